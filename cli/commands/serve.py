"""`vrs serve`: an OpenAI-compatible server for MODEL (Rust frontend + Python engine)."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from cli import options as o
from cli.serve_args import ServeOptions, run_serve
from cli.server_options import with_server_options

console = Console(stderr=True)


@with_server_options
def serve(
    *,
    ctx: typer.Context,
    headless: o.Headless = False,
    handshake_address: o.HandshakeAddress = None,
    engine_index: o.EngineIndex = 0,
    frontend: o.Frontend = o.FrontendKind.rust,
    engine: o.Engine = o.EngineKind.vrs,
    vllm_python: o.VllmPython = None,
    vllm_engine_command: o.VllmEngineCommand = None,
    **shared: Any,
) -> None:
    """Serve MODEL over an OpenAI-compatible HTTP API.

    The Rust frontend (vrs-rs) binds the port and spawns a headless Python engine;
    --frontend python runs the Python (uvicorn) frontend instead. --engine vllm fronts
    vLLM's engine instead of vrs's: vLLM engine flags go after `--`
    (`vrs serve MODEL --engine vllm -- --tensor-parallel-size 2`).
    """
    params = {**shared, **locals()}  # ctx is no ServeOptions field: ignored
    extra = list(ctx.args)  # after `--` (allow_extra_args)
    params["vllm_engine_args"] = extra
    if extra and engine is not o.EngineKind.vllm:
        raise typer.BadParameter(f"unexpected arguments {' '.join(extra)}: arguments "
                                 "after `--` are vLLM engine flags (--engine vllm)")
    if engine is o.EngineKind.vllm and (frontend is not o.FrontendKind.rust or headless):
        raise typer.BadParameter("--engine vllm needs the Rust frontend (no --frontend "
                                 "python, no --headless)", param_hint="'--engine'")
    options = ServeOptions.from_params(params)
    run_serve(options, frontend.value, console)
