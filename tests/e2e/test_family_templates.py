"""The published chat templates of the served decoder families render in both frontends
exactly as transformers renders them.

Each family's template (tests/chat_templates: the fixture, where it was taken from, the
family's bos/eos) is served by `vrs render --chat-template FILE` from both frontends, on a
model directory whose tokenizer knows the family's special tokens. Every conversation below
goes to `/v1/chat/completions/render` of each; the ground truth is transformers'
``apply_chat_template(tokenize=False)`` with the same template and tokenizer. A conversation a
template refuses (a system role Gemma 2 does not take, a tool template without tools) must be
refused by both frontends, with the template's own message where it raised one.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chat_templates import FAMILIES, template_for, write_family_tokenizer
from tests.e2e.test_render import RenderServer, template_messages

pytestmark = pytest.mark.e2e

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The current weather in a city.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                     "description": "The temperature unit"}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Searches the web.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "What to look for"}},
            "required": ["query"]}}},
]
SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
USER = {"role": "user", "content": "What is the capital of France?"}
ASSISTANT = {"role": "assistant", "content": "Paris."}
USER_2 = {"role": "user", "content": "And of Japan? Answer in one word."}
CALL = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "abcDEF123", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Zürich\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temperature\": 21}"}
# arguments that are not JSON: vLLM gives the template {} (and so must both frontends)
CALL_NOT_JSON = {"role": "assistant", "content": None, "tool_calls": [{
    "id": "abcDEF123", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Zür"}}]}

# name -> (request body fields, what the template must read for the case to apply)
CONVERSATIONS: dict[str, tuple[dict[str, Any], str | None]] = {
    "system_user": ({"messages": [SYSTEM, USER]}, None),
    "user_only": ({"messages": [USER]}, None),
    "multi_turn": ({"messages": [SYSTEM, USER, ASSISTANT, USER_2]}, None),
    "multi_turn_no_system": ({"messages": [USER, ASSISTANT, USER_2]}, None),
    "ends_with_assistant_no_generation_prompt": (
        {"messages": [USER, ASSISTANT], "add_generation_prompt": False}, None),
    "unicode_and_whitespace": ({"messages": [
        {"role": "user", "content": "  你好，世界 🌍 — naïve café?\n\n"}]}, None),
    "content_parts": ({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe"}, {"type": "text", "text": "Paris."}]}]}, None),
    "tools": ({"messages": [SYSTEM, USER], "tools": TOOLS}, "tools"),
    "tools_no_system": ({"messages": [USER], "tools": TOOLS}, "tools"),
    "tool_round_trip": ({"messages": [USER, CALL, RESULT], "tools": TOOLS}, "tool_calls"),
    "tool_call_arguments_not_json": (
        {"messages": [USER, CALL_NOT_JSON, RESULT], "tools": TOOLS}, "tool_calls"),
    "thinking_off": ({"messages": [SYSTEM, USER],
                      "chat_template_kwargs": {"enable_thinking": False}}, "enable_thinking"),
}



def applies(family: str, conversation: str) -> bool:
    """Whether the template reads what the conversation exercises. A ``tool_use`` template
    (one of a model's named templates, the one transformers and both frontends take for a
    request with tools) is rendered with tools only: it iterates ``tools`` unguarded, which
    jinja2 refuses for ``None`` while minijinja iterates ``none`` as empty (docs/internals.md,
    "Chat templates verified")."""
    body, reads = CONVERSATIONS[conversation]
    if family.endswith("_tool_use") and "tools" not in body:
        return False
    return reads is None or reads in FAMILIES[family].source


CASES = [(family, name) for family in FAMILIES for name in CONVERSATIONS
         if applies(family, name)]


def test_the_fixtures_cover_the_families() -> None:
    """At least 12 families, those of issue #34 among them; every template file present,
    and a template that writes bos_token / eos_token has the family's token recorded."""
    assert len(FAMILIES) >= 12
    assert {"llama3", "qwen2", "qwen3", "mistral", "mixtral", "gemma2", "gemma3", "phi3",
            "phi4", "olmo2", "granite", "smollm3", "glm4_moe", "cohere", "gpt_oss"} <= set(FAMILIES)
    for name, fam in FAMILIES.items():
        assert template_for(name).is_file(), name
        source = fam.source
        assert "\r" not in source, name
        for key in ("bos_token", "eos_token"):
            if key in source:
                assert getattr(fam, key), (name, key)
        assert fam.content_format in ("string", "openai"), name
    with pytest.raises(KeyError, match="known: "):
        template_for("no-such-family")


def test_the_index_names_a_source_for_each_template() -> None:
    index = json.loads((template_for("llama3").parent / "index.json").read_text("utf-8"))
    for name, entry in index.items():
        source = entry["source"]
        assert source["repo"] and len(source["commit"]) == 40 and source["path"], name
        assert source["taken"], name


def family_model(base: Path, family: str, directory: Path) -> Path:
    """A model directory for the render service: the family's tokenizer, the demo config."""
    vocab = write_family_tokenizer(family, base, directory)
    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    config["vocab_size"] = max(config["vocab_size"], vocab)
    (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copyfile(base / "generation_config.json", directory / "generation_config.json")
    return directory


class Family:
    """One family's render services (both frontends) and its transformers tokenizer."""

    def __init__(self, family: str, base: Path, tmp: Path) -> None:
        from transformers import AutoTokenizer

        self.family = family
        self.model_dir = family_model(base, family, tmp / "model")
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        self.servers: dict[str, RenderServer] = {}
        for frontend in ("rust", "python"):
            self.servers[frontend] = RenderServer(frontend, self.model_dir,
                                                  tmp / f"{frontend}.log",
                                                  template_for(family))

    def stop(self) -> None:
        codes = {name: server.stop() for name, server in self.servers.items()}
        assert codes == dict.fromkeys(self.servers, 0), codes


@pytest.fixture(scope="module")
def family_services(demo_model: Path, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[Callable[[str], Family]]:
    """The services of one family at a time (CASES come family by family)."""
    current: list[Family] = []

    def get(family: str) -> Family:
        if current and current[0].family == family:
            return current[0]
        if current:
            current.pop().stop()
        current.append(Family(family, demo_model, tmp_path_factory.mktemp(family)))
        return current[0]

    yield get
    if current:
        current.pop().stop()


def truth(fam: Family, body: dict[str, Any]) -> dict[str, Any]:
    """transformers' rendering of the request, or {"error": its message}."""
    template = FAMILIES[fam.family]
    try:
        text = fam.tokenizer.apply_chat_template(
            template_messages(body["messages"], template.content_format),
            tools=body.get("tools"), chat_template=template.source, tokenize=False,
            add_generation_prompt=body.get("add_generation_prompt", True),
            **body.get("chat_template_kwargs", {}))
    except Exception as exc:  # noqa: BLE001 - the template's own refusal is the expectation
        return {"error": str(exc)}
    return {"prompt": text, "ids": fam.tokenizer(text, add_special_tokens=False)["input_ids"]}


@pytest.mark.parametrize(("family", "conversation"), CASES,
                         ids=[f"{family}-{name}" for family, name in CASES])
def test_frontends_render_like_transformers(family_services: Callable[[str], Family],
                                            family: str, conversation: str) -> None:
    fam = family_services(family)
    body = {"model": "demo", **CONVERSATIONS[conversation][0]}
    want = truth(fam, body)
    answers = {name: server.post("chat", body) for name, server in fam.servers.items()}
    if "error" in want:
        for name, answer in answers.items():
            assert answer.status_code == 400, (name, want["error"], answer.text)
        messages = {name: answer.json()["error"]["message"] for name, answer in answers.items()}
        if want["error"] in FAMILIES[family].source:  # the template's raise_exception
            assert messages == dict.fromkeys(answers, want["error"])
        return
    for name, answer in answers.items():
        assert answer.status_code == 200, (name, answer.text)
    rust, python = answers["rust"].json(), answers["python"].json()
    assert python["prompt"] == want["prompt"]
    assert rust["prompt"] == want["prompt"]
    assert rust["prompt_token_ids"] == python["prompt_token_ids"] == want["ids"]


def test_named_templates_take_tool_use_for_requests_with_tools(demo_model: Path,
                                                              tmp_path: Path) -> None:
    """Command-R's tokenizer config publishes named templates, `default` and `tool_use`:
    transformers takes `tool_use` for a request with tools, and so do both frontends."""
    from transformers import AutoTokenizer

    model = family_model(demo_model, "cohere", tmp_path / "model")
    config_path = model / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["chat_template"] = [
        {"name": "default", "template": FAMILIES["cohere"].source},
        {"name": "tool_use", "template": FAMILIES["cohere_tool_use"].source}]
    config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    tokenizer = AutoTokenizer.from_pretrained(str(model))
    servers = {}
    try:
        for frontend in ("rust", "python"):
            servers[frontend] = RenderServer(frontend, model, tmp_path / f"{frontend}.log")
        for name in ("system_user", "multi_turn", "tools", "tools_no_system"):
            body = {"model": "demo", **CONVERSATIONS[name][0]}
            want = tokenizer.apply_chat_template(
                template_messages(body["messages"], "string"), tools=body.get("tools"),
                tokenize=False, add_generation_prompt=True)
            assert ("## Available Tools" in want) == ("tools" in body), name
            for frontend, server in servers.items():
                answer = server.post("chat", body)
                assert answer.status_code == 200, (frontend, name, answer.text)
                assert answer.json()["prompt"] == want, (frontend, name)
    finally:
        codes = {name: server.stop() for name, server in servers.items()}
    assert codes == dict.fromkeys(servers, 0), codes


# The same tool call and result as a Responses input and as Anthropic Messages: both routes
# become chat messages whose call's arguments reach the template as an object.
RESPONSES_INPUT = {"input": [
    {"type": "message", "role": "user", "content": USER["content"]},
    {"type": "function_call", "call_id": "abcDEF123", "name": "get_weather",
     "arguments": "{\"city\": \"Zürich\"}"},
    {"type": "function_call_output", "call_id": "abcDEF123", "output": RESULT["content"]}],
    "tools": [{"type": "function", **tool["function"]} for tool in TOOLS]}
MESSAGES_BODY = {"max_tokens": 16, "messages": [
    {"role": "user", "content": USER["content"]},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "abcDEF123",
                                       "name": "get_weather", "input": {"city": "Zürich"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "abcDEF123",
                                  "content": RESULT["content"]}]}],
    "tools": [{"name": tool["function"]["name"], "description": tool["function"]["description"],
               "input_schema": tool["function"]["parameters"]} for tool in TOOLS]}


@pytest.mark.parametrize("family", ["llama3", "glm4_moe"])
def test_tool_calls_reach_the_template_as_objects_from_every_route(
        family_services: Callable[[str], Family], family: str) -> None:
    """A tool call and its result by chat completions, Responses and Anthropic Messages
    render as transformers renders the chat with the call's arguments an object (vLLM's
    ``_postprocess_messages``); glm4_moe's template iterates them (``.items()``)."""
    fam = family_services(family)
    source = FAMILIES[family].source
    messages = [USER, {**CALL, "tool_calls": [{**CALL["tool_calls"][0], "function": {
        "name": "get_weather", "arguments": {"city": "Zürich"}}}]}, RESULT]
    want = fam.tokenizer.apply_chat_template(
        template_messages(messages, FAMILIES[family].content_format), tools=TOOLS,
        chat_template=source, tokenize=False, add_generation_prompt=True)
    assert "Zürich" in want and '\\"city' not in want  # not the JSON text written again
    routes = {"/v1/chat/completions/render": {"messages": [USER, CALL, RESULT], "tools": TOOLS},
              "/v1/responses/render": RESPONSES_INPUT, "/v1/messages/render": MESSAGES_BODY}
    for path, body in routes.items():
        for name, server in fam.servers.items():
            answer = server.client.post(path, json={"model": "demo", **body})
            assert answer.status_code == 200, (name, path, answer.text)
            assert answer.json()["prompt"] == want, (name, path)
