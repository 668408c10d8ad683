"""The first screen tells the truth, for the three ways to serve (real CLI, real
processes, loopback): the address is announced only once the port accepts connections,
the vrs-rs command line is logged once (shortened at info), every stderr line of both
languages has one layout (engine/logfmt.py, rust/cli/src/logfmt.rs), and a Ctrl-C is
logged as SIGINT.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.logfmt import LINE
from tests.e2e.servers import CLI, ROOT, free_port, rust_binary

pytestmark = pytest.mark.e2e

MODES = {"rust-serve": ("serve",), "rust-frontend": ("frontend",),
         "python": ("serve", "--frontend", "python")}


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("mode", list(MODES))
def test_first_screen(mode: str, demo_model: Path, tmp_path: Path) -> None:
    port = free_port()
    log_path = tmp_path / "stderr.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VRS_RUST_FRONTEND_PATH": str(rust_binary()),
           "TOKENIZERS_PARALLELISM": "false"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI, *MODES[mode], str(demo_model), "--mock",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        announced = re.compile(rf"serving .* on http://127\.0\.0\.1:{port}\b")
        deadline = time.monotonic() + 120
        while not announced.search(log_path.read_text(errors="replace")):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.02)
        # The moment the address shows, the port takes connections.
        assert accepts(port), "announced before listening"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log_path.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    assert "\x1b[" not in text, "no terminal colours in a log"
    bad = [line for line in lines if not LINE.match(line)]
    assert not bad, "lines off the layout:\n" + "\n".join(bad)
    components = {LINE.match(line).group(0).rsplit("[", 1)[1] for line in lines}  # type: ignore[union-attr]
    assert "engine 0] " in components and "vrs] " in components, components
    assert len(announced.findall(text)) == 1, text
    assert "SIGINT" in text and "SIGTERM" not in text, text
    if mode != "python":
        assert "vrs-rs] " in components, components
        assert "Ctrl-C to stop (twice to stop now)" in text
    if mode == "rust-frontend":
        assert text.count("frontend --listen-fd") == 1, text
        assert "--args-json '{...}'" in text and '"engine_config"' not in text, text
