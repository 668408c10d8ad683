"""``--uds PATH`` in every mode (`vrs frontend`: the supervisor binds the Unix socket and
vrs-rs adopts it): curl --unix-socket and the openai SDK on an httpx UDS transport stream
a chat completion; a stale socket file is replaced, a live one is an error; the file is
gone after the server exits, and no TCP port is bound."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import MODEL, MODES, Server, sse_events

BODY = {"model": MODEL, "messages": [{"role": "user", "content": "hello over a Unix socket"}],
        "max_tokens": 6, "stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture(scope="module", params=MODES)
def uds_server(request: pytest.FixtureRequest, demo_model: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One per mode, started where a crashed server left its socket file."""
    folder = tmp_path_factory.mktemp("uds")
    path = folder / "vrs.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays; nobody listens on it
    server = Server(request.param, demo_model, folder / "server.log", uds=path,
                    cli_args=("--mock-step-delay-ms", "1"))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()
    assert not path.exists(), f"{path} left behind after exit"


def test_curl_streams_a_chat_completion(uds_server: Server) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    result = subprocess.run(
        [curl, "-sS", "-N", "--fail-with-body", "--unix-socket", str(uds_server.uds),
         "-H", "content-type: application/json", "-d", json.dumps(BODY),
         "http://localhost/v1/chat/completions"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr + result.stdout
    events = sse_events(iter(result.stdout.splitlines()))
    assert events[-1]["usage"]["completion_tokens"] == 6
    assert "".join(e["choices"][0]["delta"].get("content") or ""
                   for e in events if e["choices"])


def test_openai_sdk_on_an_httpx_uds_transport(uds_server: Server) -> None:
    stream = uds_server.client().chat.completions.create(
        model=MODEL, messages=BODY["messages"], max_tokens=6, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    with uds_server.http() as http, http.stream(
            "POST", f"{uds_server.url}/v1/chat/completions", json=BODY) as response:
        assert response.status_code == 200
        assert sse_events(response.iter_lines())[-1]["usage"]["completion_tokens"] == 6


def test_it_serves_the_socket_and_no_tcp_port(uds_server: Server) -> None:
    assert f"unix:{uds_server.uds}" in uds_server.log()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", uds_server.port), timeout=5).close()


def test_a_live_socket_is_an_error(uds_server: Server, demo_model: Path,
                                   tmp_path: Path) -> None:
    assert uds_server.uds is not None
    second = Server(uds_server.mode, demo_model, tmp_path / "second.log", wait=False,
                    uds=uds_server.uds)
    try:
        assert second.wait_exit(60) == 1, second.log()
    finally:
        second.stop()
    assert str(uds_server.uds) in second.log() and "Traceback" not in second.log()
    second.assert_all_gone()
    assert uds_server.uds.exists()  # the first server's file stays, and it still serves
    with uds_server.http() as http:
        assert http.get(f"{uds_server.url}/health").status_code == 200
