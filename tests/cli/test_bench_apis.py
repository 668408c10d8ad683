"""`vrs bench serve --backend openai-responses | anthropic-messages` end to end: the typer
app running the vrs-rs load generator against a small server written here (stdlib, on
loopback) that streams each API's events as docs/api.md writes them (typed Responses
events with `sequence_number`, Anthropic's message/content-block events), tokens
TOKEN_GAP_S apart, so TTFT, ITL and the token counts can be checked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import demo_model, one_line_error, run_vrs  # noqa: F401

TOKEN_GAP_S = 0.002
# The usage reports more tokens than the deltas sent: the count must come from the usage.
EXTRA_TOKENS = 1


class FakeApis(BaseHTTPRequestHandler):
    """`/v1/responses` and `/v1/messages`: a prelude, then `max_output_tokens` /
    `max_tokens` one-word deltas TOKEN_GAP_S apart (the first after one gap), then the
    closing events with the usage."""

    model_root = ""
    seen: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": [
            {"id": "fake-model", "object": "model", "root": self.model_root}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        headers = {k.lower(): v for k, v in self.headers.items()}
        FakeApis.seen.append((self.path, headers, body))
        if self.path == "/v1/responses":
            self._responses(body["max_output_tokens"])
        elif self.path == "/v1/messages":
            self._messages(body["max_tokens"])
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _start(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()

    def _event(self, kind: str, value: dict[str, Any]) -> None:
        self.wfile.write(f"event: {kind}\ndata: {json.dumps(value)}\n\n".encode())
        self.wfile.flush()

    def _responses(self, count: int) -> None:
        self._start()
        seq = iter(range(10_000))

        def send(kind: str, **fields: Any) -> None:
            self._event(kind, {"type": kind, "sequence_number": next(seq), **fields})

        shell = {"id": "resp_1", "object": "response", "status": "in_progress", "output": [],
                 "usage": None}
        send("response.created", response=shell)
        send("response.in_progress", response=shell)
        item = {"id": "msg_1", "type": "message", "status": "in_progress",
                "role": "assistant", "content": []}
        for i in range(count):
            time.sleep(TOKEN_GAP_S)
            if i == 0:
                send("response.output_item.added", output_index=0, item=item)
                send("response.content_part.added", item_id="msg_1", output_index=0,
                     content_index=0, part={"type": "output_text", "text": ""})
            send("response.output_text.delta", item_id="msg_1", output_index=0,
                 content_index=0, delta=f" w{i}", logprobs=[])
        send("response.output_text.done", item_id="msg_1", output_index=0, content_index=0,
             text="...", logprobs=[])
        usage = {"input_tokens": 1, "output_tokens": count + EXTRA_TOKENS, "total_tokens": 0}
        send("response.completed", response={**shell, "status": "completed", "usage": usage})

    def _messages(self, count: int) -> None:
        self._start()
        self._event("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 0}}})
        self._event("ping", {"type": "ping"})
        for i in range(count):
            time.sleep(TOKEN_GAP_S)
            if i == 0:
                self._event("content_block_start", {
                    "type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}})
            self._event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta",
                                                          "text": f" w{i}"}})
        self._event("content_block_stop", {"type": "content_block_stop", "index": 0})
        self._event("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": "max_tokens",
                                               "stop_sequence": None},
            "usage": {"output_tokens": count + EXTRA_TOKENS}})
        self._event("message_stop", {"type": "message_stop"})


@pytest.fixture(scope="module")
def fake_apis(demo_model: Path) -> Iterator[str]:  # noqa: F811 - the imported fixture
    FakeApis.model_root = str(demo_model)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApis)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("backend", "path"), [("openai-responses", "/v1/responses"),
                                               ("anthropic-messages", "/v1/messages")])
def test_bench_streams_each_api(fake_apis: str, backend: str, path: str,
                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    FakeApis.seen.clear()
    result_file = tmp_path / "r.json"
    out = run_vrs("bench", "serve", "--base-url", fake_apis, "--backend", backend,
                  "--result-file", str(result_file), "--num-prompts", "6",
                  "--random-input-len", "16", "--random-output-len", "4",
                  "--max-concurrency", "3", "--warmup-requests", "2",
                  "--metric-percentiles", "50")
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(result_file.read_text())
    assert result["backend"] == backend and result["endpoint"] == path
    assert result["completed"] == 6 and result["failed"] == 0, result.get("error_samples")
    assert result["total_output_tokens"] == 6 * (4 + EXTRA_TOKENS), "the usage's count"
    assert result["total_input_tokens"] == 6 * 16
    # The prelude (created / in_progress, message_start / ping) comes at once; the first
    # delta one token gap later: TTFT sees that gap, ITL the gaps between deltas.
    assert result["median_ttft_ms"] >= TOKEN_GAP_S * 1000 * 0.8
    assert result["median_itl_ms"] >= TOKEN_GAP_S * 1000 * 0.8
    assert 0 < result["median_ttft_ms"] <= result["median_e2el_ms"]
    assert len(FakeApis.seen) == 1 + 2 + 6, "probe, warm-up, measured"
    for seen_path, headers, body in FakeApis.seen:
        assert seen_path == path and body["stream"] is True and body["model"] == "fake-model"
        assert body["temperature"] == 0.0 and "ignore_eos" not in body
        if backend == "openai-responses":
            assert isinstance(body["input"], str) and body["max_output_tokens"] == 4
            assert body["store"] is False
            assert headers["authorization"] == "Bearer k-openai"
        else:
            assert body["messages"][0]["role"] == "user" and body["max_tokens"] == 4
            assert headers["x-api-key"] == "k-openai" and "authorization" not in headers
            assert headers["anthropic-version"] == "2023-06-01"


def test_anthropic_key_is_preferred(fake_apis: str, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-anthropic")
    FakeApis.seen.clear()
    out = run_vrs("bench", "serve", "--base-url", fake_apis, "--backend", "anthropic-messages",
                  "--result-file", str(tmp_path / "r.json"), "--num-prompts", "1",
                  "--random-input-len", "8", "--random-output-len", "2")
    assert out.returncode == 0, out.stdout + out.stderr
    assert {headers["x-api-key"] for _, headers, _ in FakeApis.seen} == {"k-anthropic"}


@pytest.mark.parametrize("backend", ["openai-responses", "anthropic-messages"])
def test_ignore_eos_is_refused_for_apis_without_it(fake_apis: str, backend: str) -> None:
    out = run_vrs("bench", "serve", "--base-url", fake_apis, "--backend", backend,
                  "--ignore-eos", "--num-prompts", "1")
    line = one_line_error(out)
    assert "ignore_eos" in line and backend in line, line
