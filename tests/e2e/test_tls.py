"""HTTPS (``--ssl-certfile`` / ``--ssl-keyfile``) in every mode, with a test CA made by
``cryptography`` (certs.py): the openai SDK streams and answers over it, a client that
does not trust the CA is refused, and so is plain HTTP; mTLS (``--ssl-cert-reqs 2``)
serves a client whose certificate the CA signed and refuses one without a certificate or
with another CA's; a bad certificate is one error line and exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.certs import Certs, make_certs
from tests.e2e.servers import (
    CLI,
    MODEL,
    MODES,
    ROOT,
    ROUTE_MODES,
    Server,
    free_port,
    rust_binary,
)

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "hello over TLS"}]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module", params=MODES)
def tls_server(request: pytest.FixtureRequest, demo_model: Path, certs: Certs,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """HTTPS, no client certificates; one per mode (`vrs frontend` too: vrs-rs does TLS
    on the socket the supervisor bound)."""
    log = tmp_path_factory.mktemp("tls") / f"{request.param}.log"
    server = Server(request.param, demo_model, log, tls=certs.client(),
                    cli_args=("--mock-step-delay-ms", "1", *certs.server_flags()))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


@pytest.fixture(scope="module", params=ROUTE_MODES)
def mtls_server(request: pytest.FixtureRequest, demo_model: Path, certs: Certs,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """HTTPS that requires a client certificate signed by the test CA."""
    log = tmp_path_factory.mktemp("mtls") / f"{request.param}.log"
    server = Server(request.param, demo_model, log, tls=certs.client("client"),
                    cli_args=("--mock-step-delay-ms", "1", *certs.server_flags(cert_reqs=2)))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def test_openai_sdk_over_https(tls_server: Server) -> None:
    client = tls_server.client()
    reply = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8)
    assert reply.usage is not None and reply.usage.completion_tokens == 8
    stream = client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=8,
                                            stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 8
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert f"https://127.0.0.1:{tls_server.port}" in tls_server.log()


def test_a_client_that_does_not_trust_the_ca_is_refused(tls_server: Server) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{tls_server.url}/health", timeout=10)
    plain = f"http://127.0.0.1:{tls_server.port}/health"
    with pytest.raises(httpx.HTTPError):
        assert httpx.get(plain, timeout=10).status_code != 200
    with tls_server.http() as http:  # still serving
        assert http.get(f"{tls_server.url}/health").status_code == 200


def test_mtls_serves_a_client_certificate_of_the_ca(mtls_server: Server) -> None:
    reply = mtls_server.client().chat.completions.create(model=MODEL, messages=MESSAGES,
                                                         max_tokens=4)
    assert reply.choices[0].message.content


@pytest.mark.parametrize("cert", [None, "rogue"])
def test_mtls_refuses_a_client_without_a_valid_certificate(mtls_server: Server, certs: Certs,
                                                           cert: str | None) -> None:
    with httpx.Client(verify=certs.client(cert), timeout=10) as http:
        # TLS 1.3: the server's refusal arrives after the client's handshake is done, so
        # it shows up as an alert or a closed connection on the first exchange.
        with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
            http.get(f"{mtls_server.url}/health")
    with mtls_server.http() as http:
        assert http.get(f"{mtls_server.url}/health").status_code == 200


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("flag", ["--ssl-certfile", "--ssl-keyfile"])
def test_a_bad_certificate_path_is_one_error_line(mode: str, demo_model: Path, certs: Certs,
                                                  tmp_path: Path, flag: str) -> None:
    flags = dict(zip(certs.server_flags()[::2], certs.server_flags()[1::2], strict=True))
    flags[flag] = str(tmp_path / "missing.pem")
    command = [sys.executable, "-c", CLI, "frontend" if mode == "rust-frontend" else "serve",
               str(demo_model), "--mock", "--port", str(free_port()),
               *[part for item in flags.items() for part in item],
               *(["--frontend", "python"] if mode == "python" else [])]
    env = {**os.environ, "COLUMNS": "400",  # one line, unwrapped
           "VRS_RUST_FRONTEND_PATH": str(rust_binary())}
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1, result.stderr
    lines = error_lines(result.stderr)
    assert len(lines) == 1 and "missing.pem" in lines[0], result.stderr


def test_a_certificate_that_does_not_load_stops_the_server(mode: str, demo_model: Path,
                                                           certs: Certs, tmp_path: Path) -> None:
    """The servers check for themselves (a certificate given through --args-json): `vrs
    frontend`'s vrs-rs once the supervisor started the engine."""
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    http = {"ssl_certfile": str(garbage), "ssl_keyfile": str(certs.server_key)}
    server = Server(mode, demo_model, tmp_path / "server.log", launch="direct", wait=False,
                    direct={"http": http})
    try:
        assert server.wait_exit(60) == 1, server.log()
    finally:
        server.stop()
    assert "garbage.pem" in server.log() and "Traceback" not in server.log(), server.log()
    server.assert_all_gone()
