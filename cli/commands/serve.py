"""`vrs serve`: an OpenAI-compatible server for MODEL (Rust frontend + Python engine)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from cli import options as o
from cli.serve_args import ServeOptions, run_serve
from cli.server_options import with_server_options

console = Console(stderr=True)


@with_server_options
def serve(
    headless: o.Headless = False,
    handshake_address: o.HandshakeAddress = None,
    engine_index: o.EngineIndex = 0,
    frontend: o.Frontend = o.FrontendKind.rust,
    **shared: Any,
) -> None:
    """Serve MODEL over an OpenAI-compatible HTTP API.

    The Rust frontend (vrs-rs) binds the port and spawns a headless Python engine;
    --frontend python runs the Python (uvicorn) frontend instead.
    """
    options = ServeOptions.from_params({**shared, **locals()})
    run_serve(options, frontend.value, console)
