"""`--engine vllm`'s args-json keys (cli/vllm_engine.py): the interpreter check, the
engine command, the forwarded engine flags and the handshake port."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli.vllm_engine import VllmEngineError, engine_command, has_vllm, resolve_python, vllm_keys

pytestmark = pytest.mark.unit

VLLM_PYTHON = Path.home() / ".cache" / "vrs-vllm-venv" / "bin" / "python"


def keys(**given: object) -> dict[str, object]:
    settings: dict[str, object] = {
        "mock": False, "frontend": "rust", "max_model_len": None, "vllm_python": None,
        "vllm_engine_command": "mock-engine --step-ms 2", "engine_args": [],
        "data_parallel_size": 1, "data_parallel_size_local": None,
        "data_parallel_rpc_port": 29550}
    settings.update(given)
    return vllm_keys(**settings)  # type: ignore[arg-type]


def test_a_stand_in_command_needs_no_vllm_and_takes_a_free_port() -> None:
    written = keys(max_model_len=256, engine_args=["--dtype", "half"])
    assert written == {"engine": "vllm", "vllm_python": None,
                       "vllm_engine_command": ["mock-engine", "--step-ms", "2"],
                       "vllm_engine_args": ["--max-model-len", "256", "--dtype", "half"],
                       "data_parallel_rpc_port": None}


def test_remote_engines_keep_the_handshake_port() -> None:
    written = keys(vllm_engine_command=None, data_parallel_size=2, data_parallel_size_local=0)
    assert written["data_parallel_rpc_port"] == 29550
    assert written["vllm_python"] is None, "no local engine: no interpreter needed"
    assert keys(data_parallel_rpc_port=4000)["data_parallel_rpc_port"] == 4000


def test_vrs_engine_options_and_the_python_frontend_are_refused() -> None:
    with pytest.raises(VllmEngineError, match="--mock is vrs's mock engine"):
        keys(mock=True)
    with pytest.raises(VllmEngineError, match="needs the Rust frontend"):
        keys(frontend="python")
    with pytest.raises(VllmEngineError, match="--vllm-engine-command"):
        engine_command("'unbalanced")
    with pytest.raises(VllmEngineError, match="empty"):
        engine_command("  ")


def test_an_interpreter_without_vllm_is_refused_by_name(tmp_path: Path) -> None:
    assert not has_vllm(str(tmp_path / "no-python"))
    if has_vllm(sys.executable):
        pytest.skip("this interpreter has vllm")
    with pytest.raises(VllmEngineError, match=f"--vllm-python {sys.executable}"):
        resolve_python(sys.executable)


@pytest.mark.skipif(not VLLM_PYTHON.exists(), reason=f"no vllm interpreter at {VLLM_PYTHON}")
def test_the_vllm_venv_is_taken() -> None:
    assert resolve_python(str(VLLM_PYTHON)) == str(VLLM_PYTHON)


def test_the_python_frontend_refuses_vllms_engine(tmp_path: Path) -> None:
    from server.args import parse_args

    with pytest.raises(ValueError, match="vLLM's engine needs the Rust frontend"):
        parse_args({"model": str(tmp_path), "engine": "vllm"})
    assert parse_args({"model": str(tmp_path), "engine": "vrs"}).model == str(tmp_path)
