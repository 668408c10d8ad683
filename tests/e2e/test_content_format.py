"""`--chat-template-content-format` through both `vrs render` services: the prompt ids equal
transformers' ``apply_chat_template`` with vLLM's content-format rule applied
(``test_render.template_messages``).

vLLM's rule (vllm/entrypoints/chat_utils.py): with format ``string`` a message's text
parts reach the template joined with newlines; with ``openai`` the content is a list of
``{"type": "text", "text": ...}`` parts (a string content becomes one part, a null one an
empty list). ``auto`` is ``openai`` exactly when the template loops over a message's
content (the detection is checked against tests/parser_cases/content_format.jsonl in
both languages). The demo template loops over its ``render_content(content)`` macro's
parameter, so ``auto`` is ``openai`` for it (the whole corpus of test_render.py runs so);
``tests/render_corpus/list_aware.jinja`` loops over ``message.content``: ``openai`` too,
with parts kept apart by " | ". ``--chat-template-content-format string`` on the demo
template joins them with newlines.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.text.content_format import detect
from tests.e2e.test_render import (
    CHATS,
    CORPUS,
    DEMO_FORMAT,
    QWEN3_STYLE,
    QWEN3_STYLE_FORMAT,
    RenderServer,
    rendered,
    template_messages,
)

pytestmark = pytest.mark.e2e

LIST_AWARE = CORPUS / "list_aware.jinja"
DEMO_TEMPLATE = (Path(__file__).resolve().parents[2] / "engine" / "mock" / "templates"
                 / "demo_chat_template.jinja")
# The corpus bodies the list-aware template renders (it has no tool-call format).
PLAIN_CHATS = [r for r in CHATS if "tools" not in r["body"] and "tool_choice" not in r["body"]]
CONTENT_PARTS = next(r for r in CHATS if r["name"] == "content_parts")


def truth(tokenizer: Any, body: dict[str, Any], fmt: str, template: str | None) -> list[int]:
    continue_final = body.get("continue_final_message", False)
    text = tokenizer.apply_chat_template(
        template_messages(body["messages"], fmt), tokenize=False, chat_template=template,
        add_generation_prompt=body.get("add_generation_prompt", not continue_final),
        continue_final_message=continue_final, **body.get("chat_template_kwargs", {}))
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _servers(model_dir: Path, tmp: Path, template: Path | None,
             extra: tuple[str, ...]) -> Iterator[dict[str, RenderServer]]:
    servers: dict[str, RenderServer] = {}
    try:
        for frontend in ("rust", "python"):
            servers[frontend] = RenderServer(frontend, model_dir, tmp / f"{frontend}.log",
                                             template, extra)
        yield servers
    finally:
        codes = {name: server.stop() for name, server in servers.items()}
        assert codes == dict.fromkeys(servers, 0), codes


@pytest.fixture(scope="module")
def list_aware_servers(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    # The list-aware template has no thinking markers, so `auto` finds no reasoning parser;
    # the corpus's `thinking_token_budget` body needs one named.
    yield from _servers(demo_model, tmp_path_factory.mktemp("list-aware"), LIST_AWARE,
                        ("--reasoning-parser", "qwen3"))


@pytest.fixture(scope="module")
def auto_servers(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    yield from _servers(demo_model, tmp_path_factory.mktemp("demo-auto"), None, ())


@pytest.fixture(scope="module")
def string_servers(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    yield from _servers(demo_model, tmp_path_factory.mktemp("demo-string"), None,
                        ("--chat-template-content-format", "string"))


def test_the_templates_are_detected_as_vllm_does() -> None:
    assert detect(LIST_AWARE.read_text(encoding="utf-8")) == "openai"
    assert detect(DEMO_TEMPLATE.read_text(encoding="utf-8")) == DEMO_FORMAT == "openai"
    assert detect(QWEN3_STYLE.read_text(encoding="utf-8")) == QWEN3_STYLE_FORMAT == "string"


@pytest.mark.parametrize("entry", PLAIN_CHATS, ids=[r["name"] for r in PLAIN_CHATS])
def test_list_aware_template_gets_the_parts(list_aware_servers: dict[str, RenderServer],
                                           tokenizer: Any, entry: dict[str, Any]) -> None:
    want = truth(tokenizer, entry["body"], "openai", LIST_AWARE.read_text(encoding="utf-8"))
    rust = rendered(list_aware_servers["rust"], entry)
    python = rendered(list_aware_servers["python"], entry)
    assert rust["prompt"] == python["prompt"]
    assert rust["prompt_token_ids"] == python["prompt_token_ids"] == want


def test_content_parts_on_the_list_aware_template(list_aware_servers: dict[str, RenderServer],
                                                  tokenizer: Any) -> None:
    """The parts stay apart (the template's " | "), never joined with a newline."""
    for server in list_aware_servers.values():
        prompt = rendered(server, CONTENT_PARTS)["prompt"]
        assert "First part. | Second part, 第二部分." in prompt
        assert "First part.\n" not in prompt


def test_demo_template_auto_keeps_the_parts(auto_servers: dict[str, RenderServer],
                                             tokenizer: Any) -> None:
    """The issue's case: on the demo template vLLM passes the parts list (no newline
    between the parts), which is what both services render by default."""
    want = truth(tokenizer, CONTENT_PARTS["body"], "openai", None)
    assert want != truth(tokenizer, CONTENT_PARTS["body"], "string", None)
    for server in auto_servers.values():
        answer = rendered(server, CONTENT_PARTS)
        assert answer["prompt_token_ids"] == want
        assert "First part.Second part, 第二部分." in answer["prompt"]


@pytest.mark.parametrize("entry", PLAIN_CHATS, ids=[r["name"] for r in PLAIN_CHATS])
def test_string_format_on_the_demo_template(string_servers: dict[str, RenderServer],
                                            tokenizer: Any, entry: dict[str, Any]) -> None:
    want = truth(tokenizer, entry["body"], "string", None)
    rust = rendered(string_servers["rust"], entry)
    python = rendered(string_servers["python"], entry)
    assert rust["prompt"] == python["prompt"]
    assert rust["prompt_token_ids"] == python["prompt_token_ids"] == want
