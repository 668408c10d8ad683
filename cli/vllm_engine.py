"""`vrs serve --engine vllm`: the args-json keys that make vrs-rs front vLLM's engine.

vrs-rs starts vLLM's headless engine as `vllm-rs serve` does (`PY -m
vllm.entrypoints.cli.main serve MODEL --headless --data-parallel-address A
--data-parallel-rpc-port P --data-parallel-size N [ENGINE ARGS]`), or waits for remote
ones (``--data-parallel-size-local 0``); see rust/server/src/args/engine.rs. Here the
interpreter is resolved, the options that belong to vrs's own engine are refused, and
``--max-model-len`` is forwarded to vLLM's engine.
"""

from __future__ import annotations

import importlib.util
import shlex
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

from engine.config import ConfigError

if TYPE_CHECKING:
    from cli.serve_args import ServeOptions

DEFAULT_RPC_PORT = 29550
FIND_VLLM = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)"


class VllmEngineError(ConfigError):
    """An option that does not fit `--engine vllm`, or no interpreter with vllm."""


def has_vllm(python: str) -> bool:
    """Whether ``python`` runs and finds the vllm package (without importing it)."""
    try:
        return subprocess.run([python, "-c", FIND_VLLM], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def resolve_python(given: str | None) -> str:
    """``--vllm-python``, checked; else this interpreter if it has vllm, else python3 on
    PATH if it has; else an error saying what to pass."""
    if given is not None:
        if not has_vllm(given):
            raise VllmEngineError(f"--vllm-python {given}: it does not run, or cannot import "
                                  "vllm; name the interpreter where vllm 0.33 is installed")
        return given
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    python3 = shutil.which("python3")
    if python3 is not None and has_vllm(python3):
        return python3
    raise VllmEngineError("--engine vllm: neither this interpreter nor python3 on PATH has "
                          "vllm; pass --vllm-python PY (the interpreter where vllm 0.33 is "
                          "installed, e.g. ~/.cache/vrs-vllm-venv/bin/python)")


def engine_command(text: str | None) -> list[str] | None:
    """``--vllm-engine-command``'s words."""
    if text is None:
        return None
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise VllmEngineError(f"--vllm-engine-command {text!r}: {exc}") from None
    if not words:
        raise VllmEngineError("--vllm-engine-command is empty; give a command line")
    return words


def vllm_keys(*, mock: bool, frontend: str, max_model_len: int | None,
              vllm_python: str | None, vllm_engine_command: str | None,
              engine_args: list[str], data_parallel_size: int,
              data_parallel_size_local: int | None,
              data_parallel_rpc_port: int) -> dict[str, Any]:
    """The args-json keys of `--engine vllm` (engine, vllm_python, vllm_engine_command,
    vllm_engine_args, data_parallel_rpc_port), after the checks."""
    if mock:
        raise VllmEngineError("--mock is vrs's mock engine; with --engine vllm use "
                              "--vllm-engine-command for a stand-in (e.g. a mock vLLM engine)")
    if frontend != "rust":
        raise VllmEngineError("--engine vllm needs the Rust frontend; drop --frontend python")
    command = engine_command(vllm_engine_command)
    local = data_parallel_size_local if data_parallel_size_local is not None \
        else data_parallel_size
    starts_engines = local > 0
    python = resolve_python(vllm_python) if starts_engines and command is None else vllm_python
    args = [*(["--max-model-len", str(max_model_len)] if max_model_len else []), *engine_args]
    # All engines local and no port chosen: vrs-rs takes a free one.
    all_local = local == data_parallel_size
    port = None if all_local and data_parallel_rpc_port == DEFAULT_RPC_PORT \
        else data_parallel_rpc_port
    return {
        "engine": "vllm",
        "vllm_python": python,
        "vllm_engine_command": command,
        "vllm_engine_args": args or None,
        "data_parallel_rpc_port": port,
    }


def with_vllm_engine(options: ServeOptions, written: dict[str, Any]) -> dict[str, Any]:
    """The args-json of `vrs serve` (``written``) made `--engine vllm`'s: vLLM's keys in,
    vrs's engine config and interpreter out (vLLM's engine reads its own flags)."""
    keys = vllm_keys(mock=options.mock, frontend="rust", max_model_len=options.max_model_len,
                     vllm_python=options.vllm_python,
                     vllm_engine_command=options.vllm_engine_command,
                     engine_args=options.vllm_engine_args,
                     data_parallel_size=options.data_parallel_size,
                     data_parallel_size_local=options.data_parallel_size_local,
                     data_parallel_rpc_port=options.data_parallel_rpc_port)
    return {**written, "engine_config": None, "python_executable": None, **keys}
