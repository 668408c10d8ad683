"""The package version (``/version``): the installed distribution's, else pyproject.toml's."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("vrs")
    except PackageNotFoundError:  # a source checkout that is not installed
        import tomllib
        from pathlib import Path

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text("utf-8"))["project"]["version"])


__version__ = package_version()
