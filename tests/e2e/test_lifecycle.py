"""Start-up, drain and death of every frontend (each test runs once per mode, on a server
of its own): connections made before the engine is ready are served; SIGTERM drains
in-flight streams up to --shutdown-timeout and cuts the rest off with an error event; an
engine's death ends streams with an error event and the server exits non-zero. Every
test ends with no process of the server's group left."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.servers import MODEL, Server, wait_until

pytestmark = pytest.mark.e2e

USER = [{"role": "user", "content": "hi"}]


def connectable(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


class Stream(threading.Thread):
    """A streamed completion read in the background; ``events`` fills as they arrive."""

    def __init__(self, server: Server, max_tokens: int, prompt: str | list[int] = "go",
                 ignore_eos: bool = False) -> None:
        super().__init__(daemon=True)
        self.url = f"{server.url}/v1/completions"
        self.body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                     "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos}
        self.events: list[Any] = []
        self.error: BaseException | None = None
        self.done = False
        self.start()

    def run(self) -> None:
        try:
            with httpx.stream("POST", self.url, json=self.body, timeout=60) as response:
                for line in response.iter_lines():
                    if not line:
                        continue
                    data = line.removeprefix("data: ")
                    if data == "[DONE]":
                        self.done = True
                        return
                    self.events.append(json.loads(data))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def result(self) -> list[Any]:
        """Every event, once the stream ended with [DONE]."""
        self.join(60)
        assert not self.is_alive() and self.error is None, self.error
        assert self.done, f"the stream ended without [DONE] after {self.events[-1:]}"
        return self.events


def test_early_connections_are_served_and_sigterm_drains(mode: str, demo_model: Path,
                                                         tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / "server.log", wait=False,
                    cli_args=("--mock-step-delay-ms", "10", "--shutdown-timeout", "3"))
    try:
        # The port listens long before the engine is ready (bind first, hand over second).
        assert wait_until(lambda: connectable(server.port), 60, step=0.005), server.log()
        early = httpx.post(f"{server.url}/v1/completions", timeout=60,
                           json={"prompt": "early", "max_tokens": 2})
        assert early.status_code == 200, early.text
        assert early.json()["usage"]["completion_tokens"] == 2
        server.wait_ready()

        short, long = Stream(server, 100), Stream(server, 1900)  # 1 s and 19 s of tokens
        assert wait_until(lambda: short.events and long.events, 10)
        server.signal(signal.SIGTERM)
        done = short.result()
        assert done[-2]["choices"][0]["finish_reason"] == "length"
        assert done[-1]["usage"]["completion_tokens"] == 100
        cut = long.result()
        assert cut[-1]["error"]["code"] == 503, cut[-1]
        assert "shutting down" in cut[-1]["error"]["message"]
        assert server.wait_exit(30) == 0, server.log()
        assert not connectable(server.port)
        server.assert_all_gone()
    finally:
        server.stop()


def test_engine_death_fails_streams_and_exits_nonzero(mode: str, demo_model: Path,
                                                      tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / "server.log",
                    cli_args=("--mock-step-delay-ms", "10"))
    try:
        stream = Stream(server, 1000)
        assert wait_until(lambda: stream.events, 10)
        engines = server.engines()
        assert len(engines) == 1, server.tree()
        for pid in engines:
            os.kill(pid, signal.SIGKILL)
        events = stream.result()
        error = events[-1]["error"]
        assert (error["code"], error["type"]) == (503, "ServiceUnavailableError"), error
        assert "engine" in error["message"]
        try:  # the server answers 503 for a moment before it exits
            health = httpx.get(f"{server.url}/health", timeout=5)
            assert health.status_code == 503, health.text
            ping = httpx.post(f"{server.url}/ping", timeout=5)  # SageMaker's /health
            assert ping.status_code == 503, ping.text
        except httpx.TransportError:
            assert server.proc.poll() is not None or not connectable(server.port)
        assert server.wait_exit(20) != 0, server.log()
        server.assert_all_gone()
    finally:
        server.stop()
