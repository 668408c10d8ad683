"""The request shapes agent clients send, through the official SDKs, on the Rust and Python
frontends (the mock engine, scripted replies): the anthropic SDK with ``output_config``
(effort, format), adaptive thinking, ``cache_control`` everywhere Anthropic takes it, a
Claude Code style system prompt (billing header, a ``system`` message inside ``messages``)
and ``redacted_thinking`` history; the openai SDK's Responses calls with ``include``'s
output text logprobs and ``top_logprobs`` (whole and streamed) and vLLM's extensions
(``ignore_eos``, ``structured_outputs``, ``chat_template_kwargs``, ...). Both frontends
must agree (each test runs once per request mode)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.e2e.features import EXPECTED_SCRIPT
from tests.e2e.servers import MODEL, Server
from tests.e2e.test_render import RenderServer

pytestmark = pytest.mark.e2e

EPHEMERAL = {"type": "ephemeral"}
BILLING = "x-anthropic-billing-header: cc_version=2.1.3; cc_entrypoint=cli; cch=0a1b2;"
LOGPROBS = "message.output_text.logprobs"
TOOL = {"name": "get_weather", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}}}, "cache_control": EPHEMERAL}


@pytest.fixture
def feature(feature_pool: Any, route_mode: str) -> Server:
    return feature_pool.get(route_mode)


def claude(server: Server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0, timeout=60)


def kinds(message: Any) -> list[tuple[str, str]]:
    return [(b.type, b.thinking if b.type == "thinking" else b.text) for b in message.content]


def test_claude_code_request_shape(feature: Server) -> None:
    """What Claude Code sends on every turn: a block system prompt led by the billing
    header, cache breakpoints, tools, adaptive thinking with an effort, a streamed answer."""
    system = [{"type": "text", "text": BILLING},
              {"type": "text", "text": "You are a coding agent.", "cache_control": EPHEMERAL}]
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "[think] what is 2+2?", "cache_control": EPHEMERAL}]}]
    fields: dict[str, Any] = {
        "model": MODEL, "max_tokens": 200, "system": system, "messages": messages,
        "tools": [TOOL], "thinking": {"type": "adaptive"}, "output_config": {"effort": "high"},
        "metadata": {"user_id": "session-1"}, "cache_control": EPHEMERAL}
    with claude(feature).messages.stream(**fields) as stream:
        final = stream.get_final_message()
    assert kinds(final) == [("thinking", "Two plus two is 4, 四."),
                            ("text", "The answer is 4.")]
    # the billing header is not part of the prompt: the same count as without it
    counted = claude(feature).messages.count_tokens(
        model=MODEL, system=system, messages=messages, tools=[TOOL],
        thinking={"type": "adaptive"}, output_config={"effort": "high"})
    plain = claude(feature).messages.count_tokens(
        model=MODEL, system="You are a coding agent.", messages=messages, tools=[TOOL],
        thinking={"type": "enabled", "budget_tokens": 1024})
    assert counted.input_tokens == plain.input_tokens == final.usage.input_tokens + (
        final.usage.cache_read_input_tokens or 0)


def test_adaptive_thinking_keeps_the_templates_default(feature: Server) -> None:
    ask = {"model": MODEL, "max_tokens": 60,
           "messages": [{"role": "user", "content": "[think] what is 2+2?"}]}
    adaptive = claude(feature).messages.create(**ask, thinking={"type": "adaptive",
                                                                "display": "summarized"})
    default = claude(feature).messages.create(**ask)
    assert kinds(adaptive) == kinds(default)
    assert [b.type for b in adaptive.content] == ["text"]
    effort = claude(feature).messages.create(**ask, output_config={"effort": "low"})
    assert [b.type for b in effort.content] == ["thinking", "text"]
    off = claude(feature).messages.create(**ask, output_config={"effort": "max"},
                                          thinking={"type": "disabled"})
    assert [b.type for b in off.content] == ["text"]


def test_output_config_format_constrains_the_answer(feature: Server) -> None:
    schema = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
              "required": ["answer"], "additionalProperties": False}
    message = claude(feature).messages.create(
        model=MODEL, max_tokens=300, messages=[{"role": "user", "content": "Well?"}],
        output_config={"format": {"type": "json_schema", "schema": schema}})
    assert message.stop_reason == "end_turn"
    assert json.loads(message.content[0].text)["answer"] in ("yes", "no")
    refused = httpx.post(f"{feature.url}/v1/messages", timeout=30, json={
        "model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"schema": {"type": "objectx"}}}})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("output_config.format: ")


def test_history_with_system_messages_and_redacted_thinking(feature: Server) -> None:
    """A ``system`` message inside ``messages`` joins the system prompt (the demo template
    takes none after the first); redacted thinking renders nothing."""
    history = [{"role": "user", "content": "[script] go"},
               {"role": "assistant", "content": [
                   {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                   {"type": "text", "text": "ok"}]},
               {"role": "user", "content": "again"}]
    inline = claude(feature).messages.create(
        model=MODEL, max_tokens=60, system="Be brief.",
        messages=[*history[:2], {"role": "system", "content": " Reminder."}, history[2]])  # type: ignore[misc,list-item]
    merged = claude(feature).messages.create(
        model=MODEL, max_tokens=60, system="Be brief. Reminder.",
        messages=[*history[:1], {"role": "assistant", "content": "ok"}, history[2]])  # type: ignore[list-item]
    assert kinds(inline) == kinds(merged) == [("text", EXPECTED_SCRIPT)]
    assert inline.usage.input_tokens + (inline.usage.cache_read_input_tokens or 0) == (
        merged.usage.input_tokens + (merged.usage.cache_read_input_tokens or 0))


def test_a_template_that_takes_late_system_messages_keeps_them(
        route_mode: str, demo_model: Path, tmp_path: Path) -> None:
    template = tmp_path / "permissive.jinja"
    template.write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                        "{% if add_generation_prompt %}<assistant>{% endif %}",
                        encoding="utf-8")
    server = RenderServer("python" if route_mode == "python" else "rust", demo_model,
                          tmp_path / "render.log", template=template)
    try:
        body = {"model": MODEL, "max_tokens": 5, "system": [
            {"type": "text", "text": BILLING}, {"type": "text", "text": "top"}],
            "messages": [{"role": "user", "content": "a"},
                         {"role": "system", "content": "mid"},
                         {"role": "user", "content": "b"}]}
        answer = server.client.post("/v1/messages/render", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["prompt"] == (
            "<system>top<user>a<system>mid<user>b<assistant>")
    finally:
        assert server.stop() == 0


def responses_logprobs(response: Any) -> list[Any]:
    [message] = [item for item in response.output if item.type == "message"]
    return list(message.content[0].logprobs)


def test_responses_output_text_logprobs(feature: Server) -> None:
    client = feature.client()
    response = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60,
                                       include=[LOGPROBS], top_logprobs=2)
    logprobs = responses_logprobs(response)
    assert response.output_text == EXPECTED_SCRIPT and response.top_logprobs == 2
    assert "".join(lp.token for lp in logprobs) == EXPECTED_SCRIPT
    assert all(len(lp.top_logprobs) == 2 and lp.logprob <= 0 for lp in logprobs)
    assert all(bytes(lp.bytes).decode() == lp.token for lp in logprobs)
    stream = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60,
                                     include=[LOGPROBS], top_logprobs=2, stream=True)
    events = list(stream)
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    streamed = [lp for d in deltas for lp in d.logprobs]
    assert [(lp.token, len(lp.top_logprobs or [])) for lp in streamed] == [
        (lp.token, 2) for lp in logprobs]
    assert all(len(d.logprobs) >= 1 for d in deltas)
    done = next(e for e in events if e.type == "response.output_text.done")
    assert [lp.token for lp in done.logprobs] == [lp.token for lp in logprobs]
    final = events[-1].response
    assert [lp.token for lp in responses_logprobs(final)] == [lp.token for lp in logprobs]
    plain = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60,
                                    top_logprobs=2)
    assert responses_logprobs(plain) == [] and plain.top_logprobs == 2
    zero = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60,
                                   include=[LOGPROBS, "reasoning.encrypted_content"])
    assert all(lp.top_logprobs == [] for lp in responses_logprobs(zero))
    assert len(responses_logprobs(zero)) == len(logprobs)


def test_responses_take_vllms_extensions(feature: Server) -> None:
    client = feature.client()
    long = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=12,
                                   extra_body={"ignore_eos": True, "repetition_penalty": 1.1,
                                               "min_p": 0.05, "stop_token_ids": [],
                                               "skip_special_tokens": True})
    assert (long.status, long.usage.output_tokens) == ("incomplete", 12)
    assert long.output_text.startswith(EXPECTED_SCRIPT)
    choice = client.responses.create(model=MODEL, input="Well?", max_output_tokens=20,
                                     extra_body={"structured_outputs": {"choice": ["yes", "no"]}})
    assert choice.output_text in ("yes", "no")
    thinking = client.responses.create(model=MODEL, input="[think] 2+2?", max_output_tokens=60,
                                       extra_body={"chat_template_kwargs": {
                                           "enable_thinking": True}})
    assert [item.type for item in thinking.output] == ["reasoning", "message"]
    assert thinking.output_text == "The answer is 4."
    refused = httpx.post(f"{feature.url}/v1/responses", timeout=30, json={
        "model": MODEL, "input": "x", "structured_outputs": {"choice": ["a"]},
        "text": {"format": {"type": "json_object"}}})
    assert (refused.status_code, refused.json()["error"]["param"]) == (
        400, "structured_outputs")
