"""The `vrs` command line (typer + rich)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("vrs")
except PackageNotFoundError:  # running from a source checkout without installing
    import tomllib as _tomllib
    from pathlib import Path as _Path

    _pyproject = _Path(__file__).resolve().parent.parent / "pyproject.toml"
    __version__ = _tomllib.loads(_pyproject.read_text("utf-8"))["project"]["version"]
