"""`vrs serve MODEL --engine vllm [-- ENGINE FLAGS]` reaches vrs-rs as the args-json keys
of rust/server/src/args/engine.rs. Real CLI subprocesses; vrs-rs is a stand-in script
that writes down its command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    from engine.mock.demo_model import ensure_demo_model

    copy = tmp_path / "model"
    shutil.copytree(ensure_demo_model(), copy)
    return copy


def run_serve(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`vrs serve ARGS` with a vrs-rs that records its argv; the args-json it got."""
    seen = tmp_path / "argv.txt"
    fake = tmp_path / "vrs-rs"
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {seen}\n")
    fake.chmod(0o755)
    env = {**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "VRS_RUST_FRONTEND_PATH": str(fake)}
    result = subprocess.run([sys.executable, "-c", "from cli.main import main; main()",
                             "serve", *args], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env=env)
    if not seen.exists():
        return result, None
    argv = seen.read_text().splitlines()
    assert argv[:2] == ["serve", "--args-json"], argv
    return result, json.loads(argv[2])


def test_engine_flags_after_the_separator_reach_vllms_engine(model: Path,
                                                             tmp_path: Path) -> None:
    result, args = run_serve(tmp_path, str(model), "--engine", "vllm", "--max-model-len", "64",
                             "--vllm-engine-command", "python3 mock_engine.py --step-ms 2",
                             "--", "--tensor-parallel-size", "2")
    assert result.returncode == 0, result.stderr
    assert args is not None
    assert args["engine"] == "vllm" and args["engine_config"] is None
    assert args["vllm_engine_command"] == ["python3", "mock_engine.py", "--step-ms", "2"]
    assert args["vllm_engine_args"] == ["--max-model-len", "64", "--tensor-parallel-size", "2"]
    assert args["data_parallel_rpc_port"] is None
    assert args["model"] == str(model.resolve())


def test_remote_engines_way_in(model: Path, tmp_path: Path) -> None:
    result, args = run_serve(tmp_path, str(model), "--engine", "vllm",
                             "--data-parallel-size-local", "0", "--data-parallel-size", "2",
                             "--data-parallel-address", "127.0.0.1",
                             "--data-parallel-rpc-port", "41234")
    assert result.returncode == 0, result.stderr
    assert args is not None
    assert (args["data_parallel_size"], args["data_parallel_size_local"]) == (2, 0)
    assert args["data_parallel_rpc_port"] == 41234 and args["vllm_python"] is None


def test_vllm_flags_without_engine_vllm_and_bad_combinations_are_refused(
        model: Path, tmp_path: Path) -> None:
    result, args = run_serve(tmp_path, str(model), "--", "--tensor-parallel-size", "2")
    assert result.returncode == 2 and args is None
    assert "vLLM engine flags" in " ".join(result.stderr.split())
    result, args = run_serve(tmp_path, str(model), "--engine", "vllm", "--frontend", "python")
    assert result.returncode == 2 and args is None
    assert "needs the Rust frontend" in " ".join(result.stderr.split())
    result, args = run_serve(tmp_path, str(model), "--engine", "vllm", "--mock",
                             "--vllm-engine-command", "x")
    assert result.returncode != 0 and args is None
    assert "--mock is vrs's mock engine" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
