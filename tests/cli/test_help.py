"""`--help` of every command reads whole at 80, 120 and 200 columns: no option name cut
to `…` (rich's table does that when the widest row does not fit), no line wider than
the terminal, no command description cut short."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from cli.main import app

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = [(), ("serve",), ("frontend",), ("render",), ("bench",), ("bench", "serve")]


def help_text(command: tuple[str, ...], columns: int) -> str:
    result = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", *command, "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": str(columns), "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def option_names(command: tuple[str, ...]) -> list[str]:
    """Every long option name of ``vrs COMMAND`` (negative forms included)."""
    click_command = typer.main.get_command(app)
    for name in command:
        click_command = click_command.commands[name]  # type: ignore[attr-defined]
    return [name for param in click_command.params
            for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]


@pytest.mark.parametrize("columns", [80, 120, 200])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "vrs")
def test_help_is_whole(command: tuple[str, ...], columns: int) -> None:
    text = help_text(command, columns)
    assert "…" not in text
    assert all(len(line) <= columns for line in text.splitlines())
    for name in [*option_names(command), "--help"]:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), (name, text)


@pytest.mark.parametrize("columns", [80, 200])
def test_command_lists_give_whole_first_sentences(columns: int) -> None:
    text = " ".join(help_text((), columns).split())  # wrapped lines joined
    for sentence in ("Serve MODEL over an OpenAI-compatible HTTP API.",
                     "Serve MODEL with Python in charge of the sockets and processes.",
                     "Serve MODEL's chat template and tokenizer only (no engine, no weights).",
                     "Benchmarks: measure a running server."):
        assert sentence in text
    assert "..." not in text.replace("[ARGS]...", "")
    bench = " ".join(help_text(("bench",), columns).split())
    assert "Load-test an OpenAI-compatible server and report vLLM's serving metrics." in bench
