"""A Python frontend (``python -m server``) with the mock engine on a loopback port, for
the HTTP tests of this directory (the shared one is conftest.py's ``python_server``). The
tests import from here, a name no other test directory uses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.processes import terminate, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
MAX_MODEL_LEN = 2048


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PythonServer:
    """``python -m server --args-json ...`` with the mock engine; its log in ``log_path``."""

    def __init__(self, model_dir: Path, log_path: Path, **args: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        engine = {
            "model": str(model_dir),
            "served_model_name": MODEL,
            "mock": True,
            "max_model_len": MAX_MODEL_LEN,
            "mock_step_delay_ms": 1.0,
            **args.pop("engine", {}),
        }
        document = {
            "model": str(model_dir),
            "served_model_name": MODEL,
            "host": "127.0.0.1",
            "port": self.port,
            "log_level": "info",
            "shutdown_timeout": 5.0,
            "python_executable": sys.executable,
            "engine_config": engine,
            **args,
        }
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server", "--args-json", json.dumps(document)],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_healthy(self.proc, self.url, self.log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=60)

    def stop(self) -> int:
        terminate(self.proc)
        self._log.close()
        return self.proc.returncode
