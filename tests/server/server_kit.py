"""The Python frontend with the mock engine, in the test process, on a loopback port: the
HTTP tests of this directory (the shared one is conftest.py's ``python_server``). The
tests import from here, a name no other test directory uses."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from server.lifecycle import serve
from tests.engine_threads import start_engine_threads

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
MAX_MODEL_LEN = 2048
# The loggers of the server and its engines, which PythonServer writes to its log.
LOGGERS = ("vrs", "uvicorn")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PythonServer:
    """``server.lifecycle.serve`` (what ``python -m server --args-json ...`` runs) on a
    thread of the test process, its mock engine(s) on threads too, on the real wire
    (tests/engine_threads.py); stopped by ``stop()`` as by SIGTERM. Its log in ``log_path``:
    what the ``vrs`` and ``uvicorn`` loggers say while it runs (another server running at
    the same time in this process writes there too)."""

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
            "engine_config": engine,
            **args,
        }
        self._log = logging.FileHandler(log_path)
        self._log.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s "
                                                 "[%(threadName)s] %(message)s"))
        for name in LOGGERS:
            logging.getLogger(name).addHandler(self._log)
        self.returncode: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(document,),
                                        name=f"vrs-server-{self.port}", daemon=True)
        self._thread.start()
        self._wait_healthy()

    def _serve(self, document: dict[str, Any]) -> None:
        try:
            self.returncode = serve(document, start_engines=start_engine_threads,
                                    stop=self._stop)
        except BaseException:
            logging.getLogger("vrs.tests").exception("the server on a thread raised")
            raise

    def _wait_healthy(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self._thread.is_alive():
                self._close_log()
                raise AssertionError(f"the server stopped ({self.returncode}):\n{self.log()}")
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{self.url} not healthy in {timeout:g} s:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", json=body, timeout=60)

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop it as SIGTERM does, wait up to ``timeout`` s; its exit code (None: still
        running, or it raised)."""
        self._stop.set()
        self._thread.join(timeout)
        self._close_log()
        return self.returncode

    def _close_log(self) -> None:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(self._log)
        self._log.close()
