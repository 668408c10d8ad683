"""Stopping a server process a test started, shared by the test directories (pytest puts
tests/ on the path with tests/conftest.py)."""

from __future__ import annotations

import signal
import subprocess


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
