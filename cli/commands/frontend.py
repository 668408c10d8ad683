"""`vrs frontend`: Python binds the sockets and supervises the Rust frontend."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from cli.serve_args import ServeOptions
from cli.server_options import with_server_options

console = Console(stderr=True)


@with_server_options
def frontend(
    api_server_count: Annotated[int, typer.Option(
        min=1, help="Accepted for vLLM compatibility; values above 1 warn and use 1 "
                    "(vrs-rs is multi-threaded).")] = 1,
    **shared: Any,
) -> None:
    """Serve MODEL with Python in charge of the sockets and processes.

    Python binds the HTTP and ZMQ sockets, starts the engine, then runs vrs-rs on the
    inherited sockets and supervises both.
    """
    options = ServeOptions.from_params(shared)
    from cli.serve_args import run_frontend

    raise typer.Exit(run_frontend(options, api_server_count, console))
