"""Starting and stopping a server process a test runs, shared by the test directories
(pytest puts tests/ on the path with tests/conftest.py)."""

from __future__ import annotations

import signal
import ssl
import subprocess
import time
from pathlib import Path

import httpx


def wait_healthy(proc: subprocess.Popen, url: str, log_path: Path, *,
                 verify: ssl.SSLContext | bool = True, timeout: float = 120.0) -> None:
    """Poll ``url/health`` until it answers 200; fail with the server's log if ``proc``
    exits first or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}):\n"
                                 + log_path.read_text(errors="replace"))
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not healthy in {timeout:g} s:\n"
                                 + log_path.read_text(errors="replace"))
        try:
            if httpx.get(f"{url}/health", verify=verify, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)


def terminate(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGTERM ``proc`` if it still runs, wait up to ``timeout`` seconds, then kill it;
    returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode
