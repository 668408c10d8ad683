"""`vrs serve --frontend python` forwards `--max-batch-prompts`, and the mock engine's
scripted replies (`--mock-replies`) are encoded with `--tokenizer`: a real CLI process,
real HTTP on loopback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import tokenizers

from tests.processes import terminate, wait_healthy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
REPLY = "ok <zz-marker> done"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_batch_limit_and_the_tokenizer_of_scripted_replies(tmp_path: Path) -> None:
    from engine.mock.demo_model import ensure_demo_model

    model = ensure_demo_model()
    # A tokenizer directory whose tokenizer.json has one token the model's does not.
    tokenizer_dir = tmp_path / "tokenizer"
    tokenizer_dir.mkdir()
    shutil.copy(model / "tokenizer_config.json", tokenizer_dir)
    other = tokenizers.Tokenizer.from_file(str(model / "tokenizer.json"))
    other.add_special_tokens(["<zz-marker>"])
    other.save(str(tokenizer_dir / "tokenizer.json"))
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"when": "mark it", "reply": REPLY}]))
    port = free_port()
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    command = [
        sys.executable,
        "-c",
        "from cli.main import main; main()",
        "serve",
        str(model),
        "--mock",
        "--frontend",
        "python",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        "demo",
        "--max-model-len",
        "256",
        "--tokenizer",
        str(tokenizer_dir),
        "--mock-replies",
        str(replies),
        "--max-batch-prompts",
        "2",
    ]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, tmp_path / "serve.log")
        over = httpx.post(f"{url}/v1/completions", json={"prompt": ["a", "b", "c"]}, timeout=30)
        assert over.status_code == 400
        error = over.json()["error"]
        assert error["param"] == "prompt" and "at most 2" in error["message"]
        assert "--max-batch-prompts" in error["message"]
        answer = httpx.post(
            f"{url}/v1/completions",
            timeout=30,
            json={
                "prompt": ["please mark it", "mark it again"],
                "max_tokens": 50,
                "skip_special_tokens": False,
            },
        ).json()
        expected = other.encode(REPLY, add_special_tokens=False).ids
        for choice in answer["choices"]:
            assert choice["text"] == REPLY and choice["finish_reason"] == "stop"
        # The reply's tokens (the marker is one) and the EOS, for each prompt.
        assert answer["usage"]["completion_tokens"] == 2 * (len(expected) + 1)
    finally:
        terminate(proc)
        log.close()
    assert proc.returncode == 0, (tmp_path / "serve.log").read_text()
