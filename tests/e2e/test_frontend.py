"""`vrs frontend` (Python binds and supervises, vrs-rs adopts the sockets): the fd
hand-over and the supervision of the group. The API itself is tested for this mode with
the others (test_api, test_errors, test_parity, test_lifecycle, test_startup)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, Server, cmdline, wait_until

pytestmark = pytest.mark.e2e

SECRET = "sk-e2e-not-for-logs"
AUTH = {"authorization": f"Bearer {SECRET}"}


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process ``pid`` holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


def tcp_listeners(port: int) -> list[int]:
    """Inodes of the listening TCP sockets on ``port`` (IPv4 and IPv6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.append(int(fields[9]))
    return found


def unix_listener(path: str) -> int:
    with open("/proc/net/unix") as fh:
        for line in fh.readlines()[1:]:
            fields = line.split()
            if len(fields) == 8 and fields[7] == path:
                return int(fields[6])
    raise AssertionError(f"no unix socket bound to {path}")


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_sockets_are_bound_first_then_handed_over(demo_model: Path, tmp_path: Path) -> None:
    server = Server("rust-frontend", demo_model, tmp_path / "server.log", wait=False,
                    cli_args=("--api-server-count", "2", "--mock-step-delay-ms", "10",
                              "--api-key", SECRET))
    try:
        def connectable() -> bool:
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                return True
            except OSError:
                return False

        assert wait_until(connectable, 60, step=0.005), server.log()
        assert server.rust_child() is None, "too late: vrs-rs already runs"
        early = httpx.post(f"{server.url}/v1/completions", timeout=60, headers=AUTH,
                           json={"prompt": "early", "max_tokens": 3})
        assert early.status_code == 200 and early.json()["usage"]["completion_tokens"] == 3
        server.wait_ready()
        assert httpx.get(f"{server.url}/v1/models").status_code == 401

        child = server.rust_child()
        assert child is not None
        argv = cmdline(child)
        for name in ("--listen-fd", "--input-listener-fd", "--output-listener-fd",
                     "--engine-start-index", "--engine-count", "--data-parallel-size"):
            assert name in argv, argv
        assert flag(argv, "--engine-count") == "1", "--api-server-count 2 must use 1"
        assert "--api-server-count 2 ignored" in server.log()
        assert [pid for pid in server.tree() if cmdline(pid)[1:2] == ["frontend"]] == [child]
        # One listening socket on the port, held by vrs-rs only (no port bound twice).
        http = os.readlink(f"/proc/{child}/fd/{flag(argv, '--listen-fd')}")
        assert tcp_listeners(server.port) == [int(http[len("socket:["):-1])]
        engine_sockets = {unix_listener(flag(argv, name).removeprefix("ipc://"))
                          for name in ("--input-address", "--output-address")}
        assert engine_sockets | set(tcp_listeners(server.port)) <= socket_inodes(child)
        supervisor = socket_inodes(server.proc.pid)
        assert not supervisor & (engine_sockets | set(tcp_listeners(server.port)))
        # The command line is logged once (by vrs-rs), in full at debug (this server's
        # level; info shortens it: test_first_screen.py), secrets redacted.
        assert server.log().count("frontend --listen-fd") == 1, server.log()
        assert "--args-json {" in server.log()
        assert SECRET not in server.log()

        # SIGINT (a terminal's Ctrl-C) drains: the stream in flight completes.
        body = {"model": MODEL, "prompt": "go", "max_tokens": 100, "stream": True}
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, headers=AUTH,
                          timeout=60) as response:
            lines = (line for line in response.iter_lines() if line)
            first = next(lines)
            server.signal(signal.SIGINT)
            rest = list(lines)
        assert first.startswith("data: ") and rest[-1] == "data: [DONE]"
        assert '"finish_reason":"length"' in rest[-2].replace(" ", "")
        assert server.wait_exit(30) == 0, server.log()
        server.assert_all_gone()
    finally:
        server.stop()


def test_vrs_rs_killed_stops_the_engines_and_exits_with_its_code(demo_model: Path,
                                                                 tmp_path: Path) -> None:
    server = Server("rust-frontend", demo_model, tmp_path / "server.log")
    try:
        child = server.rust_child()
        assert child is not None
        os.kill(child, signal.SIGKILL)
        assert server.wait_exit(20) == 128 + signal.SIGKILL, server.log()
        assert "vrs-rs exited with code 137" in server.log()
        server.assert_all_gone()
    finally:
        server.stop()


def test_vrs_rs_clean_exit_stops_the_engines_and_exits_0(demo_model: Path,
                                                         tmp_path: Path) -> None:
    server = Server("rust-frontend", demo_model, tmp_path / "server.log",
                    cli_args=("--mock-step-delay-ms", "10"))
    try:
        child = server.rust_child()
        assert child is not None
        body = {"model": MODEL, "prompt": "go", "max_tokens": 100, "stream": True}
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body,
                          timeout=60) as response:
            lines = (line for line in response.iter_lines() if line)
            next(lines)
            os.kill(child, signal.SIGTERM)  # vrs-rs alone drains and exits 0
            rest = list(lines)
        assert rest[-1] == "data: [DONE]" and "length" in rest[-2]
        assert server.wait_exit(30) == 0, server.log()
        assert "SIGTERM: no longer accepting" in server.log()
        server.assert_all_gone()
    finally:
        server.stop()


def test_supervisor_killed_takes_everyone_down(demo_model: Path, tmp_path: Path) -> None:
    server = Server("rust-frontend", demo_model, tmp_path / "server.log")
    private_dir = None
    try:
        assert len(server.tree()) == 3
        child = server.rust_child()
        assert child is not None
        # The supervisor's private ipc dir (tempfile.mkdtemp(prefix="vrs-frontend-")).
        private_dir = Path(flag(cmdline(child), "--input-address").removeprefix("ipc://")).parent
        assert private_dir.name.startswith("vrs-frontend-"), private_dir
        server.signal(signal.SIGKILL)  # no chance to clean up: the children notice alone
        assert server.wait_exit(10) == -signal.SIGKILL
        server.assert_all_gone()
    finally:
        server.stop()
        if private_dir is not None:  # what the killed supervisor could not remove
            shutil.rmtree(private_dir, ignore_errors=True)
