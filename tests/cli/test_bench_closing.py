"""`vrs bench serve` against a server that closes every connection after its response
though it says keep-alive (llama.cpp's `llama-server` does): the load generator sends a
request that finds its pooled connection closed once more, on a new connection, so no
request is lost; the result counts those retries (`retried_requests`) and the summary
shows them. The server (stdlib, HTTP/1.1, chunked SSE, on loopback) is written here."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import demo_model, run_vrs  # noqa: F401 - the fixture

pytestmark = pytest.mark.e2e

# How long a connection stays open after its answer: long enough for the client to send
# its next request on it, which the server then never reads.
CLOSE_AFTER_S = 0.05


class ClosingServer(BaseHTTPRequestHandler):
    """Streams `max_tokens` chunks (chunked encoding, `Connection: keep-alive`), then closes
    the connection CLOSE_AFTER_S later without reading what came next."""

    protocol_version = "HTTP/1.1"
    model_root = ""
    answered = 0

    def log_message(self, *args: Any) -> None:
        pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _answer(self, content_type: str, events: list[bytes]) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "keep-alive")
        self.end_headers()
        for event in events:
            self._chunk(event)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        ClosingServer.answered += 1
        time.sleep(CLOSE_AFTER_S)
        self.close_connection = True

    def do_GET(self) -> None:
        models = {"object": "list", "data": [
            {"id": "fake-model", "object": "model", "root": self.model_root}]}
        self._answer("application/json", [json.dumps(models).encode()])

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        count = body["max_tokens"]
        events = [f"data: {json.dumps({'choices': [{'index': 0, 'text': f' w{i}'}]})}\n\n"
                  .encode() for i in range(count)]
        usage = {"choices": [], "usage": {"completion_tokens": count}}
        events += [f"data: {json.dumps(usage)}\n\n".encode(), b"data: [DONE]\n\n"]
        self._answer("text/event-stream", events)


@pytest.fixture(scope="module")
def closing_server(demo_model: Path) -> Iterator[str]:  # noqa: F811 - the imported fixture
    ClosingServer.model_root = str(demo_model)
    server = ThreadingHTTPServer(("127.0.0.1", 0), ClosingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("concurrency", [1, 8])
def test_no_request_is_lost_to_a_closed_connection(closing_server: str, concurrency: int,
                                                   tmp_path: Path) -> None:
    ClosingServer.answered = 0
    result_file = tmp_path / "r.json"
    out = run_vrs("bench", "serve", "--base-url", closing_server, "--result-file",
                  str(result_file), "--num-prompts", "24", "--random-input-len", "8",
                  "--random-output-len", "3", "--max-concurrency", str(concurrency))
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(result_file.read_text())
    assert (result["completed"], result["failed"]) == (24, 0), result["error_samples"]
    assert result["total_output_tokens"] == 24 * 3
    # Requests that found their connection closed were sent again, and counted.
    assert result["retried_requests"] >= 1
    assert "Retried requests" in out.stdout
    # every measured request answered once (plus the model lookup and the initial probe)
    assert ClosingServer.answered == 24 + 2
