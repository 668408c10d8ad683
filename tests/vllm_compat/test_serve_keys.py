"""The committed vLLM `serve` keys (server/contracts/vllm_serve_keys.json, which vrs-rs
reads to sort vLLM's --args-json into engine and frontend keys) are what vLLM 0.33.0's
own argument parser declares today.

Runs only where vllm 0.33.0 is installed in its own venv ($VRS_VLLM_PYTHON, default
~/.cache/vrs-vllm-venv/bin/python); vrs's own venv does not carry vllm.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
KEYS = HERE.parents[1] / "server" / "contracts" / "vllm_serve_keys.json"
VLLM_PYTHON = Path(
    os.environ.get("VRS_VLLM_PYTHON", Path.home() / ".cache/vrs-vllm-venv/bin/python")
)


def test_the_committed_keys_are_split_cleanly() -> None:
    keys = json.loads(KEYS.read_text(encoding="utf-8"))
    engine, frontend = set(keys["engine"]), set(keys["frontend"])
    assert not engine & frontend
    assert {"model_tag", "engine_ready_timeout_secs", "http_timeout_keep_alive"} <= frontend
    assert {"tensor_parallel_size", "gpu_memory_utilization", "max_model_len"} <= engine


@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm interpreter at {VLLM_PYTHON}")
def test_the_keys_match_vllms_parser() -> None:
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}
    proc = subprocess.run([str(VLLM_PYTHON), str(HERE / "serve_keys.py"), "--check"],
                          capture_output=True, text=True, timeout=600, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "up to date" in proc.stdout
