"""``--uds PATH`` in every mode (`vrs frontend`: the supervisor binds the Unix socket and
vrs-rs adopts it): curl --unix-socket and the openai SDK on an httpx UDS transport stream
a chat completion; a stale socket file is replaced, a live one is an error; the file is
gone after the server exits, and no TCP port is bound. `vrs render` in both frontends:
HTTPS on a Unix socket."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.certs import make_certs
from tests.e2e.servers import CLI, MODEL, MODES, ROOT, Server, rust_binary, sse_events, wait_until

pytestmark = pytest.mark.e2e

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


@pytest.mark.parametrize("frontend", ["rust", "python"])
def test_render_serves_https_on_a_unix_socket(frontend: str, demo_model: Path,
                                              tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    path = tmp_path / "render.sock"
    log = tmp_path / "render.log"
    env = {**os.environ, "VRS_RUST_FRONTEND_PATH": str(rust_binary()), "PYTHONPATH": str(ROOT)}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", CLI, "render", str(demo_model),
                                 "--frontend", frontend, "--uds", str(path),
                                 "--served-model-name", MODEL, *certs.server_flags()],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    context = certs.client()
    transport = httpx.HTTPTransport(uds=str(path), verify=context)
    try:
        with httpx.Client(transport=transport, timeout=30) as http:
            def healthy() -> bool:
                assert proc.poll() is None, log.read_text()
                try:
                    return http.get("https://localhost/health").status_code == 200
                except httpx.TransportError:
                    return False

            assert wait_until(healthy, 120, step=0.1), log.read_text()
            response = http.post("https://localhost/v1/chat/completions/render", json={
                "model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
            assert response.status_code == 200, response.text
            assert response.json()["prompt_token_ids"]
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log.read_text()
    assert f"unix:{path}" in log.read_text()
    assert not path.exists()
