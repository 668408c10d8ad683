"""Engines on another host (tcp:// on loopback): `vrs serve --data-parallel-size 2
--data-parallel-size-local 1` (or `vrs frontend ...`) starts first, engine 1 joins after
with `vrs serve --headless --handshake-address tcp://... --engine-index 1`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import CLI, ROOT, Server, alive, free_port, wait_until
from tests.e2e.test_data_parallel import complete, owners

pytestmark = pytest.mark.e2e


class Remote:
    """A headless engine joining ``address``, as another host would run it."""

    def __init__(self, model: Path, address: str, index: int, log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLI, "serve", str(model), "--headless", "--log-level",
             "debug", "--handshake-address", address, "--engine-index", str(index)],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._log.close()


REMOTE_MODES = ("rust-serve", "rust-frontend")
# What the frontend says when a remote engine's connection closes.
LEFT = {"rust-serve": "an engine left", "rust-frontend": "the connection to the engine closed"}


@pytest.fixture(params=REMOTE_MODES)
def deployment(request: pytest.FixtureRequest, demo_model: Path,
               tmp_path: Path) -> Iterator[tuple[Server, Remote]]:
    rpc_port = free_port()
    server = Server(request.param, demo_model, tmp_path / "frontend.log", wait=False,
                    cli_args=("--data-parallel-size", "2", "--data-parallel-size-local", "1",
                              "--data-parallel-rpc-port", str(rpc_port),
                              "--mock-step-delay-ms", "20"))
    assert wait_until(lambda: "waiting for engines 1..2" in server.log(), 30), server.log()
    remote = Remote(demo_model, f"tcp://127.0.0.1:{rpc_port}", 1, tmp_path / "engine1.log")
    try:
        server.wait_ready()
        yield server, remote
    finally:
        server.stop()
        remote.stop()


def test_remote_engine_joins_and_takes_work(deployment: tuple[Server, Remote]) -> None:
    server, remote = deployment
    bodies = [{"prompt": f"remote {i}", "max_tokens": 10, "ignore_eos": True}
              for i in range(16)]
    with ThreadPoolExecutor(len(bodies)) as threads:
        answers = list(threads.map(lambda b: complete(server, b), bodies))
    ids = {a["id"] for a in answers}

    def given() -> dict[str, int]:
        return {**owners(server.log()), **owners(remote.log())}

    assert wait_until(lambda: ids <= set(given()), 10)
    assert {given()[i] for i in ids} == {0, 1}
    # The frontend stopping ends the remote engine too (it is nobody's child here).
    server.signal(signal.SIGTERM)
    assert server.wait_exit(30) == 0, server.log()[-3000:]
    assert remote.proc.wait(30) == 0, remote.log()[-3000:]
    assert "went away" in remote.log()
    server.assert_all_gone()


def test_remote_engine_killed_takes_the_frontend_down(
        deployment: tuple[Server, Remote]) -> None:
    server, remote = deployment
    assert complete(server, {"prompt": "x", "max_tokens": 2})["usage"]["completion_tokens"] == 2
    remote.proc.kill()
    assert server.wait_exit(30) != 0
    assert LEFT[server.mode] in server.log(), server.log()[-3000:]
    server.assert_all_gone()
    assert remote.proc.wait(10) is not None and not alive(remote.proc.pid)


@pytest.mark.parametrize("mode", REMOTE_MODES)
def test_a_missing_engine_is_named(mode: str, demo_model: Path, tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / "frontend.log", wait=False,
                    env={"VRS_ENGINE_READY_TIMEOUT_S": "3"},
                    cli_args=("--data-parallel-size", "3", "--data-parallel-size-local", "1",
                              "--data-parallel-rpc-port", str(free_port())))
    try:
        code = server.wait_exit(60)
    finally:
        server.stop()
    assert code == 1
    assert "engine(s) 1, 2 of 3 " in server.log(), server.log()[-3000:]
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{server.url}/health", timeout=2)
    server.assert_all_gone()


def test_headless_needs_a_tcp_handshake_address(demo_model: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CLI, "serve", str(demo_model), "--headless"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--handshake-address tcp://" in done.stderr + done.stdout
