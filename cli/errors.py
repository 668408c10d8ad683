"""The CLI's error boundary: known failures become one red line and exit code 1."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from cli.binary import BinaryNotFoundError
from cli.serve_args import ModelNotFoundError


def run_cli(app: typer.Typer) -> None:
    from engine.config import ConfigError

    console = Console(stderr=True)
    try:
        app(prog_name="vrs")
    except (BinaryNotFoundError, ModelNotFoundError, ConfigError, RuntimeError) as exc:
        console.print(f"[bold red]error:[/bold red] {exc}")
        sys.exit(1)
