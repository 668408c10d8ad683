"""`vrs-rs serve` end to end: the real binary spawning the mock engine (`python -m engine
--headless`) over the real wire, driven by the official `openai` SDK and raw HTTP.

Self-contained: finds the binary (VRS_RUST_FRONTEND_PATH, else the newest
$CARGO_TARGET_DIR or rust/target build, building a debug one if there is none) and
starts each server on a free loopback port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
MAX_MODEL_LEN = 2048


# --------------------------------------------------------------------------- helpers


def rust_binary() -> Path:
    setting = os.environ.get("VRS_RUST_FRONTEND_PATH", "auto").strip() or "auto"
    if setting != "auto":
        path = Path(setting)
        assert path.is_file(), f"VRS_RUST_FRONTEND_PATH={setting} does not exist"
        return path
    target_dirs = [ROOT / "rust" / "target"]
    if os.environ.get("CARGO_TARGET_DIR"):
        target_dirs.insert(0, Path(os.environ["CARGO_TARGET_DIR"]))
    found = [d / p / "vrs-rs" for d in target_dirs for p in ("release", "debug")]
    found = [p for p in found if p.is_file()]
    if not found:
        subprocess.run(["cargo", "build", "-p", "vrs-rs"], cwd=ROOT / "rust", check=True,
                       timeout=1800)
        return rust_binary()
    return max(found, key=lambda p: p.stat().st_mtime)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def proc_stat(pid: int) -> list[str] | None:
    """Fields after the command name of /proc/PID/stat (state first), None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat and stat[0] != "Z" and stat[2] == str(pgid):
                members.append(int(entry))
    return members


def engine_pids(pid: int) -> list[int]:
    """Children of ``pid`` (the engine)."""
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(k) for k in fh.read().split()]
        except FileNotFoundError:
            pass
    return kids


def wait_until(predicate: Any, timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


class RustServer:
    """One `vrs-rs serve --args-json ...` process."""

    def __init__(self, model_dir: Path, log_path: Path, *, wait: bool = True,
                 python: str = sys.executable, env: dict[str, str] | None = None,
                 shutdown_timeout: float = 20.0, **engine: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = {
            "model": str(model_dir), "served_model_name": MODEL, "host": "127.0.0.1",
            "port": self.port, "log_level": "debug", "shutdown_timeout": shutdown_timeout,
            "python_executable": python, "chat_template": None,
            "engine_config": {"model": str(model_dir), "served_model_name": MODEL,
                              "mock": True, "max_model_len": MAX_MODEL_LEN, **engine},
        }
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        python_path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
        full_env = {**os.environ, "PYTHONPATH": python_path, **(env or {})}
        command = [str(rust_binary()), "serve", "--args-json", json.dumps(args)]
        self.proc = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        self.engine_pid = 0
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float = 120.0) -> None:
        ok = wait_until(lambda: self.proc.poll() is not None or "listening on" in self.log(),
                        timeout)
        assert ok and self.proc.poll() is None, f"vrs-rs did not start:\n{self.log()}"
        assert httpx.get(f"{self.url}/health", timeout=5).status_code == 200
        kids = engine_pids(self.proc.pid)
        assert len(kids) == 1, f"expected one engine process, got {kids}"
        self.engine_pid = kids[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0,
                             timeout=60)

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"vrs-rs still running after {timeout} s:\n{self.log()}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.engine_pid:
            for pid in group_members(self.engine_pid):
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
def server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RustServer]:
    log = tmp_path_factory.mktemp("rust") / "server.log"
    rust = RustServer(demo_model, log, mock_step_delay_ms=1)
    yield rust
    rust.stop()
    assert rust.proc.returncode == 0, rust.log()
    assert not group_members(rust.engine_pid), "engine processes left behind"


def chat(client: openai.OpenAI, **kwargs: Any) -> Any:
    messages = kwargs.pop("messages", [{"role": "user", "content": "Say something 有趣 🌍"}])
    return client.chat.completions.create(model=MODEL, messages=messages, **kwargs)


# --------------------------------------------------------------------------- happy paths


def test_models_and_health(server: RustServer) -> None:
    assert [m.id for m in server.client().models.list().data] == [MODEL]
    card = httpx.get(f"{server.url}/v1/models").json()["data"][0]
    assert card["max_model_len"] == MAX_MODEL_LEN and card["owned_by"] == "vrs"
    health = httpx.get(f"{server.url}/health")
    assert health.status_code == 200 and health.content == b""


def test_chat_usage_counts_the_rendered_prompt(server: RustServer, tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "你好, how are you? 👍🏽"}]
    response = chat(server.client(), messages=messages, max_tokens=16, seed=3)
    expected = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                             tokenize=True, return_dict=False)
    assert response.id.startswith("chatcmpl-") and response.object == "chat.completion"
    assert response.model == MODEL
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.role == "assistant"
    assert choice.message.content
    assert response.usage.prompt_tokens == len(expected)
    assert response.usage.completion_tokens == 16
    assert response.usage.total_tokens == len(expected) + 16


def test_chat_stream_equals_non_stream(server: RustServer) -> None:
    client = server.client()
    whole = chat(client, max_tokens=24, seed=11)
    chunks = list(chat(client, max_tokens=24, seed=11, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.id == chunks[0].id and c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[0].id.startswith("chatcmpl-")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_prompt_forms_and_streaming(server: RustServer, tokenizer: Any) -> None:
    client = server.client()
    prompt = "The quick brown fox 跳过 the lazy dog"
    ids = tokenizer.encode(prompt)
    as_text = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, seed=5)
    as_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=12, seed=5)
    as_list = client.completions.create(model=MODEL, prompt=[prompt], max_tokens=12, seed=5)
    assert as_text.object == "text_completion" and as_text.id.startswith("cmpl-")
    for response in (as_text, as_ids, as_list):
        assert response.usage.prompt_tokens == len(ids)
        assert response.usage.completion_tokens == 12
        assert response.usage.total_tokens == len(ids) + 12
        assert response.choices[0].finish_reason == "length"
    assert as_text.choices[0].text == as_ids.choices[0].text == as_list.choices[0].text
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, seed=5,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == as_text.choices[0].text
    assert chunks[-1].usage.model_dump() == as_text.usage.model_dump()
    assert all(c.object == "text_completion" for c in chunks)


def test_default_max_tokens_is_the_rest_of_the_context(server: RustServer) -> None:
    prompt_len = MAX_MODEL_LEN - 5
    ids = [1000 + i for i in range(prompt_len)]
    response = server.client().completions.create(model=MODEL, prompt=ids,
                                                  extra_body={"ignore_eos": True})
    assert response.usage.completion_tokens == 5
    assert response.choices[0].finish_reason == "length"


def test_stop_string_cuts_the_text(server: RustServer) -> None:
    client = server.client()
    full = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=40, seed=21)
    text = full.choices[0].text
    stop = text[12:15]
    assert stop.strip(), f"pick another seed: {text!r}"
    cut = client.completions.create(model=MODEL, prompt="Once upon", max_tokens=40, seed=21,
                                    stop=[stop])
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].text == text[:text.index(stop)]
    assert cut.usage.completion_tokens < 40
    streamed = list(client.completions.create(model=MODEL, prompt="Once upon", max_tokens=40,
                                              seed=21, stop=stop, stream=True))
    assert "".join(c.choices[0].text for c in streamed) == cut.choices[0].text
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_sampling_fields_are_accepted(server: RustServer) -> None:
    response = chat(server.client(), max_completion_tokens=4, temperature=0.7, top_p=0.9,
                    seed=1, presence_penalty=0.5, frequency_penalty=0.5, user="me",
                    stop=["zzz"], n=1, logprobs=False,
                    extra_body={"top_k": 20, "min_p": 0.05, "min_tokens": 2,
                                "repetition_penalty": 1.1, "stop_token_ids": [1],
                                "ignore_eos": False, "skip_special_tokens": True,
                                "chat_template_kwargs": {"enable_thinking": True}})
    assert response.usage.completion_tokens <= 4


# --------------------------------------------------------------------------- bad input


BAD_REQUESTS = [
    # (path, raw body, status, param, text in the message)
    ("/v1/chat/completions", b'{"model": "demo", "messages": [', 400, None, "invalid JSON"),
    ("/v1/chat/completions", b'{"model": "demo"}', 400, "messages", "`messages` is required"),
    ("/v1/chat/completions", b'{"messages": []}', 400, "messages", "must not be empty"),
    ("/v1/completions", b'{"model": "demo"}', 400, "prompt", "`prompt` is required"),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": "many"}', 400, "max_tokens",
     "invalid type"),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": -1}', 400, "max_tokens", "at least 1"),
    ("/v1/completions", b'{"prompt": "x", "temperature": -0.1}', 400, "temperature", ">= 0"),
    ("/v1/completions", b'{"prompt": "x", "top_p": 1.5}', 400, "top_p", "(0, 1]"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": 5}]}', 400,
     "messages[0].content", "invalid"),
    ("/v1/completions", b'{"prompt": "x", "model": "gpt-4o"}', 404, "model",
     "`gpt-4o` does not exist"),
    ("/v1/completions", b'{"prompt": "x", "n": 3}', 400, "n", "`n` > 1 is not supported"),
    ("/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "hi"}], "logprobs": true}', 400, "logprobs",
     "not supported"),
    ("/v1/completions", b'{"prompt": "x", "frobnicate": true}', 400, "frobnicate",
     "unknown field"),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": 5000}', 400, "max_tokens",
     "maximum context length is 2048"),
    ("/v1/chat/completions",
     b'{"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]}',
     400, None, "a system message is only allowed as the first message"),
    ("/v1/chat/completions", b'{"messages": [{"role": "wizard", "content": "a"}]}', 400, None,
     "unknown role: wizard"),
]


@pytest.mark.parametrize(("path", "body", "status", "param", "needle"), BAD_REQUESTS)
def test_bad_input_is_a_clear_error_and_the_server_goes_on(
        server: RustServer, path: str, body: bytes, status: int, param: str | None,
        needle: str) -> None:
    response = httpx.post(f"{server.url}{path}", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status and error["param"] == param, error
    assert needle in error["message"], error
    ok = server.client().completions.create(model=MODEL, prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens == 2


def test_too_long_prompt_names_the_numbers(server: RustServer, tokenizer: Any) -> None:
    prompt = "hello " * 3000
    with pytest.raises(openai.BadRequestError) as info:
        server.client().completions.create(model=MODEL, prompt=prompt, max_tokens=4)
    message = info.value.body["message"]
    assert "2048" in message and str(len(tokenizer.encode(prompt))) in message


def test_sdk_errors_map_to_sdk_exceptions(server: RustServer) -> None:
    client = server.client()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError):
        chat(client, max_tokens=0)
    missing = httpx.get(f"{server.url}/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFoundError"


# --------------------------------------------------------------------------- lifecycle


def test_client_disconnect_aborts_the_engine_request(demo_model: Path, tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", mock_step_delay_ms=5)
    try:
        with httpx.stream("POST", f"{rust.url}/v1/completions", timeout=30,
                          json={"model": MODEL, "prompt": "go", "max_tokens": 1500,
                                "stream": True}) as response:
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            request_id = json.loads(first[len("data: "):])["id"]
        # 1500 tokens at 5 ms a step would take 7.5 s; the abort ends it at once.
        assert wait_until(lambda: f"aborting engine request request_id={request_id}" in rust.log(),
                          5), rust.log()
        assert f"client went away; aborting request_id={request_id}" in rust.log()
        # A non-streamed request whose client gives up is aborted too.
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{rust.url}/v1/completions", timeout=1,
                       json={"model": MODEL, "prompt": "wait", "max_tokens": 1500})
        assert wait_until(lambda: rust.log().count("client went away; aborting") == 2, 5), \
            rust.log()
        started = time.monotonic()
        ok = rust.client().completions.create(model=MODEL, prompt="hi", max_tokens=3)
        assert ok.usage.completion_tokens == 3 and time.monotonic() - started < 5
    finally:
        rust.stop()
    assert rust.proc.returncode == 0, rust.log()


def test_sigterm_lets_the_stream_finish_then_exits_0(demo_model: Path, tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", mock_step_delay_ms=10)
    engine = rust.engine_pid
    try:
        stream = rust.client().chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "long"}], max_tokens=150,
            stream=True, stream_options={"include_usage": True})
        chunks = [next(stream)]
        rust.proc.send_signal(signal.SIGTERM)
        chunks += list(stream)
        assert chunks[-2].choices[0].finish_reason == "length"
        assert chunks[-1].usage.completion_tokens == 150
        assert rust.wait_exit(30) == 0, rust.log()
        assert wait_until(lambda: not group_members(engine), 10), "engine left behind"
        assert "SIGTERM" in rust.log()
    finally:
        rust.stop()


def test_shutdown_timeout_ends_streams_with_an_error(demo_model: Path, tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", shutdown_timeout=1,
                      mock_step_delay_ms=10)
    engine = rust.engine_pid
    try:
        stream = rust.client().completions.create(model=MODEL, prompt="x", max_tokens=1900,
                                                  stream=True)
        next(stream)
        rust.proc.send_signal(signal.SIGTERM)
        with pytest.raises(openai.APIError) as info:
            for _ in stream:
                pass
        assert "shutting down" in str(info.value)
        assert rust.wait_exit(30) == 0, rust.log()
        assert wait_until(lambda: not group_members(engine), 10), "engine left behind"
    finally:
        rust.stop()


def test_engine_sigkill_fails_streams_and_exits_nonzero(demo_model: Path,
                                                       tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", mock_step_delay_ms=10)
    engine = rust.engine_pid
    try:
        stream = rust.client().completions.create(model=MODEL, prompt="x", max_tokens=1000,
                                                  stream=True)
        next(stream)
        os.kill(engine, signal.SIGKILL)
        with pytest.raises(openai.APIError) as info:
            for _ in stream:
                pass
        assert "engine" in str(info.value)
        try:  # the server answers 503 for a moment before it exits
            health = httpx.get(f"{rust.url}/health", timeout=5)
            assert health.status_code == 503, health.text
            assert health.json()["error"]["code"] == 503
        except httpx.TransportError:
            assert rust.proc.poll() is not None
        code = rust.wait_exit(15)
        assert code != 0, rust.log()
        assert not group_members(engine), "engine group left behind"
        assert "engine dead" in rust.log()
    finally:
        rust.stop()


def test_engine_startup_failure_is_reported(demo_model: Path, tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", wait=False, block_size=3)
    code = rust.wait_exit(60)
    rust.stop()
    assert code != 0
    assert "the engine failed to start" in rust.log() and "block_size" in rust.log()


def test_missing_tokenizer_stops_startup(demo_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes((demo_model / "config.json").read_bytes())
    rust = RustServer(model, tmp_path / "server.log", wait=False)
    code = rust.wait_exit(60)
    kids = [int(line.split("pid=")[1].split()[0]) for line in rust.log().splitlines()
            if "started engine process" in line and "pid=" in line]
    rust.stop()
    assert code != 0
    assert "cannot load the tokenizer" in rust.log(), rust.log()
    for kid in kids:
        assert wait_until(lambda kid=kid: not group_members(kid), 10), "engine left behind"


def test_engine_exit_during_startup_is_noticed_at_once(demo_model: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    started = time.monotonic()
    rust = RustServer(demo_model, tmp_path / "server.log", wait=False, python=str(fake))
    code = rust.wait_exit(30)
    rust.stop()
    assert code != 0 and time.monotonic() - started < 20
    assert "exit status: 7" in rust.log(), rust.log()


def test_handshake_timeout_is_clear_and_leaves_nothing(demo_model: Path, tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nsleep 60\n")
    fake.chmod(0o755)
    rust = RustServer(demo_model, tmp_path / "server.log", wait=False, python=str(fake),
                      env={"VRS_ENGINE_READY_TIMEOUT_S": "1"})
    assert wait_until(lambda: bool(engine_pids(rust.proc.pid)) or rust.proc.poll() is not None, 10)
    kids = engine_pids(rust.proc.pid) if rust.proc.poll() is None else []
    code = rust.wait_exit(30)
    rust.stop()
    assert code != 0
    assert "sent no HELLO within 1 s" in rust.log(), rust.log()
    for kid in kids:
        assert wait_until(lambda kid=kid: not group_members(kid), 10), "engine left behind"


def test_connections_before_ready_are_served(demo_model: Path, tmp_path: Path) -> None:
    rust = RustServer(demo_model, tmp_path / "server.log", wait=False)
    try:
        def connectable() -> bool:
            try:
                socket.create_connection(("127.0.0.1", rust.port), timeout=1).close()
                return True
            except OSError:
                return False

        assert wait_until(connectable, 60, step=0.005), rust.log()
        result: dict[str, Any] = {}

        def early() -> None:
            result["r"] = httpx.post(f"{rust.url}/v1/completions", timeout=60,
                                     json={"prompt": "early", "max_tokens": 2})

        worker = threading.Thread(target=early)
        worker.start()
        worker.join(60)
        assert result["r"].status_code == 200, result["r"].text
        assert result["r"].json()["usage"]["completion_tokens"] == 2
    finally:
        rust.stop()
