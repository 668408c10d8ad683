"""The production-edge options (TLS, Unix socket, CORS, request ids, connection limits,
queue and trace settings) on their way into the args-json: checked by the CLI (one error
line, exit 1, before anything starts) and read back by the Python services with the
same defaults. Real CLI subprocesses for the errors."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run_vrs(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "VRS_RUST_FRONTEND_PATH": sys.executable}
    return subprocess.run([sys.executable, "-c", "from cli.main import main; main()", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def test_defaults_reach_both_services_unchanged() -> None:
    """What the CLI writes by default is what ``server/http_args.py`` (and, by its unit
    test, args/http.rs) takes as default."""
    import msgspec

    from cli.http_args import HttpOptions
    from server.http_args import HttpArgs, check_http_args

    written = msgspec.to_builtins(HttpOptions().to_args())
    assert written == msgspec.to_builtins(HttpArgs())
    parsed = msgspec.convert(written, HttpArgs)
    check_http_args(parsed)
    assert parsed.allowed_origins == ["*"] and parsed.h11_max_incomplete_event_size == 65536
    assert (parsed.header_read_timeout, parsed.http_timeout_keep_alive) == (10.0, 5.0)


@pytest.mark.parametrize(("flags", "message"), [
    (["--allowed-origins", "https://a.example"], "--allowed-origins 'https://a.example' is "
                                                 "not JSON"),
    (["--allowed-methods", '{"GET": 1}'], "expected a JSON list of strings"),
    (["--ssl-keyfile", "key.pem"], "--ssl-keyfile need --ssl-certfile"),
    (["--ssl-certfile", "garbage.pem"], "cannot load --ssl-certfile"),
    (["--ssl-certfile", "garbage.pem", "--ssl-cert-reqs", "2"], "--ssl-cert-reqs 2 needs "
                                                               "--ssl-ca-certs"),
    (["--uds", "garbage.pem"], "exists and is not a socket"),
    (["--uds", "no/such/dir/vrs.sock"], "does not exist"),
    (["--collect-detailed-traces", "everything"], "expected a comma-separated list"),
    (["--collect-detailed-traces", "all"], "needs --otlp-traces-endpoint"),
])
def test_bad_edge_options_are_one_line_and_exit_1(flags: list[str], message: str,
                                                  tmp_path: Path) -> None:
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    command = "render" if "--collect-detailed-traces" not in flags else "serve"
    result = run_vrs(command, "--mock", *flags, cwd=tmp_path) if command == "serve" else \
        run_vrs(command, *flags, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert message in lines[0]


def test_a_socket_file_is_accepted_for_uds(tmp_path: Path) -> None:
    """A socket at --uds passes the CLI (the server decides stale or live when binding)."""
    from cli.http_args import HttpOptions

    path = tmp_path / "vrs.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.close()
    assert HttpOptions(uds=path).to_args().uds == str(path)


def test_serve_level_settings_are_checked_by_the_python_service() -> None:
    from engine.mock.demo_model import ensure_demo_model
    from server.args import parse_args

    base = {"model": str(ensure_demo_model())}
    config = parse_args({**base, "max_queue_wait": 2.5, "max_num_queued_reqs": 3,
                         "sse_keep_alive_interval": 0.5,
                         "http": {"enable_request_id_headers": True}})
    assert config.options.max_queue_wait == 2.5 and config.options.max_num_queued_reqs == 3
    assert config.options.sse_keep_alive_interval == 0.5
    assert config.options.enable_request_id_headers and config.http.enable_request_id_headers
    with pytest.raises(ValueError, match="max_queue_wait must be > 0 seconds"):
        parse_args({**base, "max_queue_wait": 0})
    with pytest.raises(ValueError, match="collect_detailed_traces needs otlp_traces_endpoint"):
        parse_args({**base, "collect_detailed_traces": True})
    with pytest.raises(ValueError, match="http.ssl_cert_reqs must be 0, 1 or 2"):
        parse_args({**base, "http": {"ssl_cert_reqs": 5}})
    with pytest.raises(ValueError, match="unknown field"):
        parse_args({**base, "http": {"ssl_keyfle": "x"}})
