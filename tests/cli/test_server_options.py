"""`vrs serve` and `vrs frontend` take their shared options from one declaration
(cli/server_options.py): the same options, in the same order, with the same names,
types, defaults and help, then each command's own."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from cli.main import app
from cli.server_options import server_options, shared_parameters, with_options

pytestmark = pytest.mark.unit


def command(name: str) -> Any:
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def test_serve_and_frontend_declare_the_shared_options_identically() -> None:
    shared = [p.name for p in shared_parameters(server_options)]
    serve, frontend = command("serve"), command("frontend")
    assert [p.name for p in serve.params][:len(shared)] == shared
    assert [p.name for p in frontend.params][:len(shared)] == shared
    for own, expected in ((serve, ["headless", "handshake_address", "engine_index",
                                   "frontend", "engine", "vllm_python",
                                   "vllm_engine_command"]),
                          (frontend, ["api_server_count"])):
        assert [p.name for p in own.params][len(shared):] == expected, own.name
    for s, f in zip(serve.params[:len(shared)], frontend.params, strict=False):
        assert described(s) == described(f), s.name


def described(param: Any) -> dict[str, Any]:
    """What a click parameter says in plain data: names, default, help, flags, bounds,
    and the Python type of its value."""
    plain = {k: v for k, v in vars(param).items()
             if isinstance(v, str | int | float | bool | list | tuple | None)}
    return {**plain, "annotation": param.type_descriptor.annotation}


def test_an_option_declared_once_reaches_both_commands() -> None:
    def declaration(extra: Annotated[int, typer.Option(help="Declared once.")] = 3) -> None:
        """A shared option."""

    seen: dict[str, dict[str, Any]] = {}

    @with_options(declaration)
    def first(own: Annotated[bool, typer.Option("--own")] = False, **shared: Any) -> None:
        seen["first"] = {**shared, "own": own}

    @with_options(declaration)
    def second(**shared: Any) -> None:
        seen["second"] = shared

    cli = typer.Typer()
    cli.command("first")(first)
    cli.command("second")(second)
    runner = CliRunner()
    for name in ("first", "second"):
        assert "--extra" in runner.invoke(cli, [name, "--help"]).output
        result = runner.invoke(cli, [name, "--extra", "5"])
        assert result.exit_code == 0, result.output
    assert seen == {"first": {"extra": 5, "own": False}, "second": {"extra": 5}}


def test_a_command_takes_the_shared_options_and_declares_none_of_them() -> None:
    def declaration(extra: int = 3) -> None:
        """A shared option."""

    def without_shared(own: int = 1) -> None:
        """Nowhere to receive ``extra``."""

    def twice(extra: int = 4, **shared: Any) -> None:
        """``extra`` declared again."""

    with pytest.raises(TypeError, match=r"must take \*\*shared"):
        with_options(declaration)(without_shared)
    with pytest.raises(TypeError, match="declares extra"):
        with_options(declaration)(twice)
