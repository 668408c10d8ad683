"""The `vrs` command line: one entry point, one module per subcommand (cli/commands/)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli import __version__
from cli.commands import bench as bench_command
from cli.commands import frontend as frontend_command
from cli.commands import render as render_command
from cli.commands import serve as serve_command

app = typer.Typer(
    name="vrs",
    help="vrs: LLM serving with a Rust frontend and a Python engine, vLLM-style.",
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("serve")(serve_command.serve)
app.command("frontend")(frontend_command.frontend)
app.add_typer(bench_command.app, name="bench")
app.command("render")(render_command.render)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"vrs {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[bool | None, typer.Option(
        "--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")]
        = None,
) -> None:
    """vrs: LLM serving with a Rust frontend and a Python engine, vLLM-style."""


def main() -> None:
    from cli.errors import run_cli

    run_cli(app)
