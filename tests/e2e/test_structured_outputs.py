"""Structured outputs end to end: the real engine and the demo model (random weights, real
tokenizer) behind each request mode, through the official `openai` SDK.

Every output must follow its constraint, 100%: JSON schemas validate (jsonschema), JSON
mode parses to an object, regexes fullmatch, choices are one of the choices, grammars'
outputs match what the grammar accepts, and forced tool calls' arguments validate against
the tool's ``parameters``. Chat and completions, streamed and not, ``n`` of 4, many
requests with different constraints and unconstrained ones in flight at once. A spec that
does not compile is a 400 naming its field, streamed or not, and the server goes on.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import jsonschema
import pytest

from tests.e2e.servers import MODEL, Server
from tests.structured_cases import CHOICES, GRAMMARS, REGEXES, SCHEMAS, check, closing_bias

pytestmark = pytest.mark.e2e

MAX_TOKENS = 120
USER = [{"role": "user", "content": "Answer in the requested format."}]


def texts(client: Any, chat: bool, stream: bool, n: int, seed: int, **fields: Any) -> list[str]:
    """The ``n`` outputs of one request (streamed ones assembled by choice index)."""
    common = {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "n": n,
        "seed": seed,
        "temperature": 1.0,
        **fields,
    }
    extra = {k: common.pop(k) for k in ("structured_outputs",) if k in common}
    if chat:
        call = client.chat.completions.create
        common["messages"] = USER
    else:
        call = client.completions.create
        common["prompt"] = "Answer in the requested format:"
    answer = call(stream=stream, extra_body=extra, **common)
    if not stream:
        assert all(c.finish_reason == "stop" for c in answer.choices), answer
        return [c.message.content if chat else c.text for c in answer.choices]
    parts = [""] * n
    finish = [None] * n
    for chunk in answer:
        for choice in chunk.choices:
            piece = choice.delta.content if chat else choice.text
            parts[choice.index] += piece or ""
            finish[choice.index] = choice.finish_reason or finish[choice.index]
    assert finish == ["stop"] * n
    return parts


def jobs(tokenizer: Any) -> list[tuple[str, dict[str, Any], Any]]:
    """(check kind, request settings, rule): every kind, both endpoints, both ways."""
    out: list[tuple[str, dict[str, Any], Any]] = []
    for i, (name, schema) in enumerate(SCHEMAS.items()):
        fmt = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        out.append(
            (
                "json",
                {
                    "chat": True,
                    "stream": i % 2 == 0,
                    "n": 4 if i < 3 else 1,
                    "response_format": fmt,
                },
                schema,
            )
        )
        out.append(
            (
                "json",
                {
                    "chat": False,
                    "stream": i % 2 == 1,
                    "n": 1,
                    "structured_outputs": {"json": schema},
                },
                schema,
            )
        )
    for i, regex in enumerate(REGEXES):
        out.append(
            (
                "regex",
                {
                    "chat": i % 2 == 0,
                    "stream": True,
                    "n": 4,
                    "structured_outputs": {"regex": regex},
                },
                regex,
            )
        )
    for i, choice in enumerate(CHOICES):
        out.append(
            (
                "choice",
                {
                    "chat": i % 2 == 1,
                    "stream": False,
                    "n": 4,
                    "structured_outputs": {"choice": choice},
                },
                choice,
            )
        )
    for i, (grammar, regex) in enumerate(GRAMMARS):
        out.append(
            (
                "regex",
                {
                    "chat": True,
                    "stream": i == 0,
                    "n": 4,
                    "structured_outputs": {"grammar": grammar},
                },
                regex,
            )
        )
    ids = closing_bias(lambda text: tokenizer.encode(text, add_special_tokens=False))
    bias = {str(token): value for token, value in ids.items()}
    out.append(
        (
            "object",
            {
                "chat": True,
                "stream": False,
                "n": 4,
                "logit_bias": bias,
                "response_format": {"type": "json_object"},
            },
            None,
        )
    )
    out.append(
        (
            "object",
            {
                "chat": False,
                "stream": True,
                "n": 1,
                "logit_bias": bias,
                "structured_outputs": {"json_object": True},
            },
            None,
        )
    )
    return out


def test_every_constraint_holds_in_one_busy_batch(real_server: Server, tokenizer: Any) -> None:
    client = real_server.client(timeout=300)
    work = jobs(tokenizer)

    def one(index: int) -> list[str]:
        kind, settings, _ = work[index]
        settings = dict(settings)
        return texts(
            client,
            settings.pop("chat"),
            settings.pop("stream"),
            settings.pop("n"),
            seed=index,
            **settings,
        )

    def free(chat: bool) -> str:
        if chat:
            return (
                client.chat.completions.create(
                    model=MODEL,
                    messages=USER,
                    max_tokens=16,
                    temperature=0,
                    extra_body={"ignore_eos": True},
                )
                .choices[0]
                .message.content
            )
        return (
            client.completions.create(
                model=MODEL,
                prompt="Free text:",
                max_tokens=16,
                temperature=0,
                extra_body={"ignore_eos": True},
            )
            .choices[0]
            .text
        )

    with ThreadPoolExecutor(8) as pool:
        unconstrained = [pool.submit(free, chat) for chat in (True, False)]
        results = list(pool.map(one, range(len(work))))
        busy = [f.result() for f in unconstrained]
    for (kind, settings, rule), outputs in zip(work, results, strict=True):
        assert len(outputs) == settings["n"]
        for text in outputs:
            check(kind, rule, text)
    assert busy == [free(True), free(False)]  # constrained neighbours change nothing


def tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


TOOLS = [
    tool("lookup", SCHEMAS["flat"]),
    tool("paint", SCHEMAS["enum"]),
    tool("draw", SCHEMAS["refs"]),
]
SCHEMA_OF = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", ["required", "paint"])
def test_forced_tool_calls_validate_against_the_tool_schema(
    real_server: Server, choice: str, stream: bool
) -> None:
    client = real_server.client(timeout=300)
    tool_choice = (
        choice if choice == "required" else {"type": "function", "function": {"name": choice}}
    )

    def forced(seed: int) -> list[dict[str, str]]:
        answer = client.chat.completions.create(
            model=MODEL,
            messages=USER,
            tools=TOOLS,
            tool_choice=tool_choice,
            seed=seed,
            max_tokens=200,
            temperature=1.0,
            parallel_tool_calls=False,
            stream=stream,
        )
        if stream:
            got: dict[int, dict[str, str]] = {}
            for chunk in answer:
                for delta in chunk.choices[0].delta.tool_calls or ():
                    entry = got.setdefault(delta.index, {"name": "", "arguments": ""})
                    entry["name"] += delta.function.name or ""
                    entry["arguments"] += delta.function.arguments or ""
            return list(got.values())
        message = answer.choices[0].message
        assert answer.choices[0].finish_reason == "tool_calls", answer
        return [{"name": c.function.name, "arguments": c.function.arguments}
                for c in message.tool_calls]

    with ThreadPoolExecutor(4) as pool:  # the four seeds batched in the engine
        calls = [call for answer in pool.map(forced, range(4)) for call in answer]
    assert len(calls) == 4  # one call each (parallel_tool_calls false)
    for call in calls:
        if choice != "required":
            assert call["name"] == choice
        jsonschema.validate(json.loads(call["arguments"]), SCHEMA_OF[call["name"]])


@pytest.mark.parametrize(
    ("field", "param", "words"),
    [
        (
            {"structured_outputs": {"regex": "(unclosed"}},
            "structured_outputs.regex",
            "the regex does not compile: ",
        ),
        (
            {"structured_outputs": {"grammar": "root ::= nowhere"}},
            "structured_outputs.grammar",
            "the grammar does not compile: ",
        ),
        (
            {"structured_outputs": {"json": {"type": "object", "allOf": [{"type": "object"}]}}},
            "structured_outputs.json",
            "keyword `allOf` (at `#`) is not supported",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "objectx"}},
                }
            },
            "response_format",
            "not valid JSON Schema at `#/type`",
        ),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_spec_that_does_not_compile_is_a_400(
    server: Server, field: dict[str, Any], param: str, words: str, stream: bool
) -> None:
    """On the mock pool (it compiles grammars as the real engine does)."""
    body = {"model": MODEL, "messages": USER, "max_tokens": 5, "stream": stream, **field}
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["param"] == param
    assert words in error["message"]
    ok = httpx.post(
        f"{server.url}/v1/chat/completions",
        timeout=60,
        json={
            "model": MODEL,
            "messages": USER,
            "max_tokens": 10,
            "structured_outputs": {"choice": ["fine"]},
        },
    )
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "fine"
