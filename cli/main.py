"""The `vrs` command line: one entry point, one module per subcommand (cli/commands/)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import MarkupMode, TyperGroup

if TYPE_CHECKING:
    # typer ships its own click (typer._click); TyperGroup's methods take its types.
    from typer._click import Context, HelpFormatter

from cli import __version__
from cli.commands import bench as bench_command
from cli.commands import frontend as frontend_command
from cli.commands import render as render_command
from cli.commands import serve as serve_command

# Rich's option table gives every column a share of the width and cuts long option
# names (`--max-concurren…`) when the widest row does not fit; below this many columns
# the help is click's plain layout instead, which wraps the help text and never cuts a
# name. tests/cli/test_help.py renders every command at 80, 120 and 200 columns.
RICH_HELP_MIN_COLUMNS = 160


def help_markup_mode() -> MarkupMode:
    """"rich" on a wide terminal, None (plain click help) on a narrower one."""
    wide = shutil.get_terminal_size().columns >= RICH_HELP_MIN_COLUMNS
    return "rich" if wide else None


class CommandGroup(TyperGroup):
    """Plain help lists each subcommand's whole first sentence, wrapped (click would cut
    it at the terminal width with `...`)."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


app = typer.Typer(
    cls=CommandGroup,
    name="vrs",
    help="vrs: LLM serving with a Rust frontend and a Python engine, vLLM-style.",
    rich_markup_mode=help_markup_mode(),
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# Arguments after `--` are vLLM engine flags (`vrs serve MODEL --engine vllm -- ...`).
app.command("serve", context_settings={"allow_extra_args": True})(serve_command.serve)
app.command("frontend")(frontend_command.frontend)
bench_command.app.rich_markup_mode = app.rich_markup_mode  # one help layout for all
app.add_typer(bench_command.app, name="bench", cls=CommandGroup)
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
