"""Start-up failures of every frontend (each test runs once per mode): each is a clear
message and an exit code, and no process is left behind. The servers get their settings
as args-json (``launch="direct"``) to use a fake engine interpreter or values that the
CLI itself refuses before anything starts."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.servers import ROOT, Server, wait_until

pytestmark = pytest.mark.e2e


def fake_python(tmp_path: Path, script: str) -> str:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    return str(fake)


def failed_start(mode: str, model: Path, tmp_path: Path, timeout: float = 60,
                 env: dict[str, str] | None = None, **direct: Any) -> Server:
    server = Server(mode, model, tmp_path / "server.log", launch="direct", wait=False,
                    direct=direct, env=env)
    try:
        server.wait_exit(timeout)
    finally:
        server.stop()
    return server


def test_engine_that_fails_to_start_is_reported(mode: str, demo_model: Path,
                                                tmp_path: Path) -> None:
    server = failed_start(mode, demo_model, tmp_path, block_size=3)
    assert server.proc.returncode == 1, server.log()
    assert "failed to start" in server.log() and "block_size" in server.log(), server.log()
    server.assert_all_gone()


def test_engine_exit_during_startup_is_noticed_at_once(mode: str, demo_model: Path,
                                                       tmp_path: Path) -> None:
    started = time.monotonic()
    server = failed_start(mode, demo_model, tmp_path, timeout=30,
                          python=fake_python(tmp_path, "exit 7"))
    assert server.proc.returncode == 1 and time.monotonic() - started < 20, server.log()
    assert re.search(r"exit(ed with code| status:) 7", server.log()), server.log()
    server.assert_all_gone()


def test_handshake_timeout_is_clear_and_leaves_nothing(mode: str, demo_model: Path,
                                                       tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / "server.log", launch="direct", wait=False,
                    direct={"python": fake_python(tmp_path, "exec sleep 60")},
                    env={"VRS_ENGINE_READY_TIMEOUT_S": "1"})
    try:
        assert wait_until(lambda: len(server.tree()) > 1 or server.proc.poll() is not None, 20)
        assert server.wait_exit(30) == 1, server.log()
    finally:
        server.stop()
    assert "within 1 s" in server.log(), server.log()
    server.assert_all_gone()


def test_sigterm_during_startup_exits_0_and_leaves_nothing(mode: str, demo_model: Path,
                                                           tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / "server.log", launch="direct", wait=False,
                    direct={"python": fake_python(tmp_path, "exec sleep 60")})
    try:
        assert wait_until(lambda: len(server.tree()) > 1, 20), server.log()
        server.signal(signal.SIGTERM)
        assert server.wait_exit(20) == 0, server.log()
    finally:
        server.stop()
    server.assert_all_gone()


def test_port_in_use_is_one_clear_error(mode: str, demo_model: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = Server(mode, demo_model, tmp_path / "server.log", launch="direct",
                        wait=False, port=taken.getsockname()[1])
        try:
            assert server.wait_exit(60) == 1, server.log()
        finally:
            server.stop()
    assert re.search(r"cannot (bind|listen)", server.log()), server.log()
    assert "Traceback" not in server.log()
    server.assert_all_gone()


def test_missing_tokenizer_stops_startup(mode: str, demo_model: Path, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_bytes((demo_model / "config.json").read_bytes())
    server = failed_start(mode, model, tmp_path)
    assert server.proc.returncode == 1, server.log()
    assert "tokenizer" in server.log(), server.log()
    server.assert_all_gone()


@pytest.mark.parametrize("args, words", [
    ({"model": 1}, "Expected `str`"),
    ({"model": "/nonexistent/model"}, "does not exist"),
    ({"model": str(ROOT), "shutdown_timeout": -1}, "shutdown_timeout"),
    ({"model": str(ROOT), "log_level": "loud"}, "log_level"),
    ({"model": str(ROOT), "chat_template": "/nonexistent.jinja"}, "chat template"),
    ({"model": str(ROOT), "frobnicate": "x"}, "frobnicate"),
])
def test_python_frontend_bad_args_exit_2(args: dict[str, Any], words: str) -> None:
    result = subprocess.run([sys.executable, "-m", "server", "--args-json",
                             json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert "invalid arguments" in result.stderr and words in result.stderr, result.stderr
