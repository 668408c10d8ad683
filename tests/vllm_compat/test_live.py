"""Issue #33's live suite: frontends in front of the vLLM-wire mock engine, three ways in.

Each (frontend, way) combo (tests/vllm_compat/live_servers.py) starts once per module and
runs every case; a case a frontend does not serve is skipped with its reason (vllm-rs, the
reference, refuses n > 1 and has no Responses or Messages routes). The engine-death case
starts its own server with ``--die-after-requests 1``. Runs where vllm 0.33.0 has its venv
(``$VRS_VLLM_PYTHON``, default ~/.cache/vrs-vllm-venv/bin/python; scripts/vllm_compat.sh
makes it); a combo whose frontend binary is absent is skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.vllm_compat.live_servers import (
    COMBOS,
    VLLM_PYTHON,
    Combo,
    Live,
    frontend_binary,
    start,
    stop,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm interpreter at {VLLM_PYTHON} "
                       "(scripts/vllm_compat.sh installs one)"),
]

# What the reference frontend does not serve, by case: skipped there, never faked.
NOT_SERVED = {
    "vllm-rs": {
        "n": "vllm-rs answers n > 1 with 400 'Only n=1 is supported.'",
        "responses": "vllm-rs has no /v1/responses route (404)",
        "messages": "vllm-rs answers /v1/messages with 501",
    },
}
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


@pytest.fixture(scope="module")
def model_dir() -> str:
    from engine.mock.demo_model import ensure_demo_model

    return str(ensure_demo_model())


def _binary(combo: Combo) -> Path:
    binary = frontend_binary(combo.frontend)
    if binary is None:
        pytest.skip(f"{combo.frontend}: no binary found (see live_servers.py)")
    return binary


@pytest.fixture(scope="module", params=COMBOS, ids=lambda c: c.id)
def live(request: pytest.FixtureRequest, model_dir: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    combo: Combo = request.param
    server = start(combo, _binary(combo), model_dir, tmp_path_factory.mktemp(combo.id))
    yield server
    stop(server)


def served(live: Live, case: str) -> None:
    why = NOT_SERVED.get(live.combo.frontend, {}).get(case)
    if why:
        pytest.skip(why)


def post(live: Live, path: str, body: dict[str, Any]) -> dict[str, Any]:
    body = {"model": live.model, **body}
    resp = httpx.post(f"{live.url}{path}", json=body, timeout=120)
    assert resp.status_code == 200, f"{path}: {resp.status_code} {resp.text}\n{live.logs()}"
    return resp.json()


def new_mock_lines(live: Live, before: int, pattern: str, timeout: float = 15.0) -> list[str]:
    """The mock's log lines after the first ``before`` that contain ``pattern``."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [ln for ln in live.mock_lines()[before:] if pattern in ln]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


CHAT = {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
        "ignore_eos": True}


def test_chat(live: Live) -> None:
    out = post(live, "/v1/chat/completions", CHAT)
    choice = out["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 8


def test_completions(live: Live) -> None:
    before = len(live.mock_lines())
    out = post(live, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 6,
                                         "ignore_eos": True})
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["usage"]["completion_tokens"] == 6
    assert new_mock_lines(live, before, "max_tokens=6"), live.logs()


def test_chat_streaming(live: Live) -> None:
    body = {"model": live.model, **CHAT, "stream": True,
            "stream_options": {"include_usage": True}}
    chunks: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{live.url}/v1/chat/completions", json=body, timeout=120) as r:
        assert r.status_code == 200, r.read()
        lines = [ln for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    finishes = [c["choices"][0].get("finish_reason") for c in chunks if c["choices"]]
    assert "length" in finishes
    assert chunks[-1]["usage"]["completion_tokens"] == 8


def test_n_greater_than_one(live: Live) -> None:
    served(live, "n")
    before = len(live.mock_lines())
    out = post(live, "/v1/completions", {"prompt": "Hi", "max_tokens": 4, "n": 3,
                                         "ignore_eos": True})
    assert sorted(c["index"] for c in out["choices"]) == [0, 1, 2]
    assert out["usage"]["completion_tokens"] == 12
    # vLLM's engine gets one request per child (n = 1 each), whoever fronts it.
    adds = new_mock_lines(live, before, "max_tokens=4")
    assert len(adds) == 3 and all(" n=1 " in a for a in adds), adds


def test_logprobs(live: Live) -> None:
    out = post(live, "/v1/chat/completions", {**CHAT, "logprobs": True, "top_logprobs": 2})
    content = out["choices"][0]["logprobs"]["content"]
    assert len(content) == 8
    for entry in content:
        assert entry["logprob"] <= 0
        assert 1 <= len(entry["top_logprobs"]) <= 2


def test_prompt_logprobs(live: Live) -> None:
    out = post(live, "/v1/completions", {"prompt": "one two three four", "max_tokens": 2,
                                         "prompt_logprobs": 1})
    prompt_logprobs = out["choices"][0]["prompt_logprobs"]
    assert prompt_logprobs[0] is None
    assert len(prompt_logprobs) == out["usage"]["prompt_tokens"]
    assert all(isinstance(p, dict) and p for p in prompt_logprobs[1:])


def test_tools_named_choice(live: Live) -> None:
    before = len(live.mock_lines())
    out = post(live, "/v1/chat/completions", {
        **CHAT, "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})
    # The engine is asked to constrain the output to the call; random tokens cannot
    # follow that, so a frontend that parses the text back (vllm-rs: a structural tag and
    # the hermes markers) finds no call, and one that takes the text as the arguments
    # (vLLM's Python frontend) names the function.
    for call in out["choices"][0]["message"].get("tool_calls") or ():
        assert call["function"]["name"] == "get_weather", call
    # The constraint names the tool (vllm-rs: in its structural tag) or pins its
    # arguments' schema (vrs-rs: the call's opening is in the prompt, the schema in the tag).
    adds = new_mock_lines(live, before, "structured=StructuredOutputsParams(")
    assert adds and ("get_weather" in adds[0] or '"city"' in adds[0]), adds


def test_tools_auto_with_parser(live: Live) -> None:
    out = post(live, "/v1/chat/completions", {**CHAT, "tools": [WEATHER_TOOL],
                                              "tool_choice": "auto"})
    message = out["choices"][0]["message"]
    # Random tokens hold no tool-call markers: the parser passes the text through.
    assert isinstance(message["content"], str)
    assert not message.get("tool_calls")


def test_structured_outputs_json_schema(live: Live) -> None:
    before = len(live.mock_lines())
    schema = {"type": "object", "properties": {"zebra_field": {"type": "integer"}}}
    post(live, "/v1/chat/completions", {**CHAT, "response_format": {
        "type": "json_schema", "json_schema": {"name": "z", "schema": schema}}})
    adds = new_mock_lines(live, before, "structured=StructuredOutputsParams(")
    assert adds and "zebra_field" in adds[0], adds


def test_responses_api(live: Live) -> None:
    served(live, "responses")
    out = post(live, "/v1/responses", {"input": "Say hello.", "max_output_tokens": 6})
    assert out["object"] == "response"
    texts = [part for item in out["output"] if item["type"] == "message"
             for part in item["content"] if part["type"] == "output_text"]
    assert texts and out["usage"]["output_tokens"] <= 6


def test_messages_api(live: Live) -> None:
    served(live, "messages")
    out = post(live, "/v1/messages", {"messages": [{"role": "user", "content": "Hi"}],
                                      "max_tokens": 6})
    assert out["type"] == "message" and out["role"] == "assistant"
    assert out["stop_reason"] in ("max_tokens", "end_turn")
    assert out["usage"]["output_tokens"] <= 6


def test_abort_on_disconnect(live: Live) -> None:
    before = len(live.mock_lines())
    body = {"model": live.model, "prompt": "Tell a long story", "max_tokens": 2000,
            "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{live.url}/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # one chunk, then hang up mid-stream
    aborts = new_mock_lines(live, before, ": abort ", timeout=20)
    assert aborts, f"the engine saw no ABORT after the client left\n{live.logs()}"
    assert not new_mock_lines(live, before, "output_tokens=2000", timeout=0.1)


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: c.id)
def test_engine_death(combo: Combo, model_dir: str,
                      tmp_path_factory: pytest.TempPathFactory) -> None:
    """The engine dies (ENGINE_CORE_DEAD) on the second request: on vrs-rs that request
    fails with 503 and the frontend exits. The references are held to a 5xx only; what
    they do is printed (vllm-rs 0.33.0 answers 500 and keeps running)."""
    server = start(combo, _binary(combo), model_dir, tmp_path_factory.mktemp(f"{combo.id}-death"),
                   mock_args=("--die-after-requests", "1"))
    try:
        post(server, "/v1/completions", {"prompt": "Hi", "max_tokens": 2})
        resp = httpx.post(f"{server.url}/v1/completions", timeout=60,
                          json={"model": server.model, "prompt": "Hi", "max_tokens": 2})
        if combo.frontend != "vrs-rs":
            assert resp.status_code >= 500, f"{resp.status_code} {resp.text}"
            try:
                code: int | str = server.frontend.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = "none: still running 30 s later"
            print(f"{combo.id}: dead engine -> HTTP {resp.status_code}; frontend exit {code}")
            return
        assert resp.status_code == 503, f"{resp.status_code} {resp.text}\n{server.logs()}"
        try:
            code = server.frontend.wait(timeout=90)
        except Exception as error:
            raise AssertionError(
                f"the frontend still runs 90 s after the engine died (second request: "
                f"{resp.status_code})\n{server.logs()}") from error
        print(f"{combo.id}: dead engine -> HTTP {resp.status_code}; frontend exit {code}")
    finally:
        stop(server)


@pytest.mark.parametrize("combo", [c for c in COMBOS if c.way in (1, 3)], ids=lambda c: c.id)
def test_two_engines(combo: Combo, model_dir: str,
                     tmp_path_factory: pytest.TempPathFactory) -> None:
    """Data parallel 2: one mock process registers engine identities 0 and 1 (under
    ``vllm serve`` (way 1, and vLLM's Python frontend) vLLM's supervisor runs its DP
    coordinator, which the mock joins and the Rust frontend follows through
    ``--coordinator-address``); concurrent requests reach both."""
    server = start(combo, _binary(combo), model_dir, tmp_path_factory.mktemp(f"{combo.id}-dp"),
                   mock_args=("--engine-count", "2"),
                   frontend_args=("--data-parallel-size", "2"))
    try:
        body = {"model": server.model, "prompt": "Hi", "max_tokens": 40, "ignore_eos": True}
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(
                lambda _: httpx.post(f"{server.url}/v1/completions", json=body,
                                     timeout=120).status_code, range(8)))
        assert codes == [200] * 8, f"{codes}\n{server.logs()}"
        engines = {line.split("engine ")[1].split(":")[0]
                   for line in server.mock_lines() if ": add " in line}
        assert engines == {"0", "1"}, f"requests reached engines {engines}\n{server.logs()}"
        if combo.frontend == "vrs-rs" and combo.way == 1:
            log = server.frontend_log.read_text(errors="replace")
            assert "following vLLM's data-parallel coordinator" in log, server.logs()
    finally:
        stop(server)


@pytest.mark.parametrize("combo", [c for c in COMBOS if c.way == 3], ids=lambda c: c.id)
def test_remote_engine_killed_mid_stream(combo: Combo, model_dir: str,
                                         tmp_path_factory: pytest.TempPathFactory) -> None:
    """Way 3: the remote engine is killed (SIGKILL: no dead sentinel) while a stream is
    open. On vrs-rs the stream ends at once (its connection closing is noticed, no next
    request needed) and the frontend exits non-zero; the references' behaviour is
    printed."""
    server = start(combo, _binary(combo), model_dir,
                   tmp_path_factory.mktemp(f"{combo.id}-killed"))
    try:
        body = {"model": server.model, "prompt": "Tell a long story", "max_tokens": 2000,
                "ignore_eos": True, "stream": True}
        tail: list[str] = []
        started = time.monotonic()
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body,
                          timeout=httpx.Timeout(60, read=30)) as r:
            assert r.status_code == 200, r.read()
            lines = r.iter_lines()
            assert any(ln.startswith("data: ") for ln in lines)
            assert server.mock is not None
            os.killpg(server.mock.pid, signal.SIGKILL)
            killed = time.monotonic()
            try:
                tail = [ln for ln in lines if ln.startswith("data: ")]
            except httpx.HTTPError as error:  # the connection dropped: also an end
                tail = [f"(connection: {error!r})"]
        ended = time.monotonic() - killed
        print(f"{combo.id}: stream ended {ended:.1f} s after the kill "
              f"({time.monotonic() - started:.1f} s in all); last: {tail[-2:]}")
        if combo.frontend != "vrs-rs":
            return
        assert ended < 15, f"the stream outlived its engine by {ended:.1f} s\n{server.logs()}"
        # It ended because the engine went away, not because the text was complete.
        assert not any('"finish_reason":"length"' in t.replace(" ", "") for t in tail), tail
        try:
            code = server.frontend.wait(timeout=30)
        except subprocess.TimeoutExpired as error:
            raise AssertionError(f"vrs-rs still runs 30 s after its engine was killed\n"
                                 f"{server.logs()}") from error
        assert code != 0, server.logs()
        print(f"{combo.id}: frontend exit {code}")
    finally:
        stop(server)
