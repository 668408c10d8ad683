"""The committed vLLM wire fixtures are what vLLM 0.33.0's encoder writes today.

Runs only where vllm 0.33.0 is installed in its own venv ($VRS_VLLM_PYTHON, default
~/.cache/vrs-vllm-venv/bin/python); vrs's own venv does not carry vllm.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
VLLM_PYTHON = Path(
    os.environ.get("VRS_VLLM_PYTHON", Path.home() / ".cache/vrs-vllm-venv/bin/python")
)


@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm interpreter at {VLLM_PYTHON}")
def test_fixtures_match_vllm() -> None:
    proc = subprocess.run(
        [str(VLLM_PYTHON), str(HERE / "make_fixtures.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    sys.stderr.write(proc.stderr[-2000:])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "match vllm 0.33.0" in proc.stdout
