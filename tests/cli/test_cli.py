"""The `vrs` CLI layer: version, completions, binary discovery, option errors."""

from __future__ import annotations

import os
import site
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cli import __version__
from cli.binary import BinaryNotFoundError, find_rust_frontend
from cli.completion import render_all
from engine.sizes import parse_size

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run_vrs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
    )


def test_one_version_in_cargo_and_pyproject() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    cargo = tomllib.loads((ROOT / "rust" / "Cargo.toml").read_text())
    assert cargo["workspace"]["package"]["version"] == pyproject
    assert __version__ == pyproject


def test_version_flag() -> None:
    result = run_vrs("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"vrs {__version__}"


def test_checked_in_completions_match_the_app() -> None:
    for name, text in render_all().items():
        checked_in = (ROOT / "completions" / name).read_text(encoding="utf-8")
        assert checked_in == text, (
            f"completions/{name} is stale: run `python -m cli.completion completions`"
        )


def test_bash_completion_offers_serve_flags_and_choices() -> None:
    script = ROOT / "completions" / "vrs.bash"
    probe = (f'source {script}; COMP_WORDS=(vrs serve --device ""); COMP_CWORD=3; _vrs; '
             'echo "${COMPREPLY[@]}"; COMP_WORDS=(vrs serve --max-model); COMP_CWORD=2; _vrs; '
             'echo "${COMPREPLY[@]}"')
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["auto", "cpu", "cuda"]
    assert lines[1].split() == ["--max-model-len"]


def test_serve_help_lists_flags() -> None:
    result = run_vrs("serve", "--help")
    assert result.returncode == 0
    for flag in ("--host", "--port", "--served-model-name", "--mock", "--max-model-len",
                 "--log-level", "--device", "--kv-cache-memory", "--enable-prefix-caching"):
        assert flag in result.stdout


def child_venv_over_this_one(venv: Path) -> None:
    """A fresh venv at ``venv`` (its own, empty scripts dir) that sees this interpreter's
    packages, however this one was installed (a venv, the system's, conda): a ``.pth``
    file in the child's purelib adds this interpreter's site dirs (and the user site when
    it is enabled). ``--system-site-packages`` would not do: for a venv it means the base
    interpreter's packages, not this venv's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = str(venv / "bin" / "python")
    ask = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = subprocess.run([python, "-c", ask], check=True, capture_output=True, text=True,
                             timeout=60).stdout.strip()
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    # addsitedir (not a bare path line) so that the .pth files in those dirs apply too.
    lines = [f"import site; site.addsitedir({d!r})" for d in dirs if os.path.isdir(d)]
    Path(purelib, "vrs-test-parent-site.pth").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("command", ["serve", "frontend"])
def test_missing_binary_names_the_variable_and_paths(command: str, tmp_path: Path) -> None:
    result = run_vrs(command, "--mock",
                     env={"VRS_RUST_FRONTEND_PATH": str(tmp_path / "no-such-vrs-rs")})
    assert result.returncode == 1
    assert "VRS_RUST_FRONTEND_PATH" in result.stderr
    assert "no-such-vrs-rs" in result.stderr
    assert "Traceback" not in result.stderr
    # auto: every place looked at is named. An interpreter whose scripts dir has no vrs-rs
    # (a fresh venv over this one's packages), with nothing on PATH.
    venv = tmp_path / "venv"
    child_venv_over_this_one(venv)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from cli.main import main; main()", command,
         "--mock"], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "COLUMNS": "200", "VRS_RUST_FRONTEND_PATH": "auto",
             "PATH": str(empty)})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "VRS_RUST_FRONTEND_PATH=auto looked at" in result.stderr
    assert str(venv / "bin" / "vrs-rs") in result.stderr.replace("\n", "")


def test_frontend_help_lists_flags() -> None:
    result = run_vrs("frontend", "--help")
    assert result.returncode == 0
    for flag in ("--host", "--port", "--mock", "--max-model-len", "--api-server-count"):
        assert flag in result.stdout


def test_auto_discovery_lists_where_it_looked(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("VRS_RUST_FRONTEND_PATH", "auto")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("cli.binary.sysconfig.get_path", lambda _: str(tmp_path / "scripts"))
    monkeypatch.setattr("cli.binary.sys.executable", str(tmp_path / "bin" / "python"))
    with pytest.raises(BinaryNotFoundError) as err:
        find_rust_frontend()
    assert str(tmp_path / "scripts" / "vrs-rs") in str(err.value)
    assert str(tmp_path / "bin" / "vrs-rs") in str(err.value)
    fake = tmp_path / "vrs-rs"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert find_rust_frontend() == fake


def test_non_executable_binary_is_refused(monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    plain = tmp_path / "vrs-rs"
    plain.write_text("not a program")
    monkeypatch.setenv("VRS_RUST_FRONTEND_PATH", str(plain))
    with pytest.raises(BinaryNotFoundError, match="not an executable"):
        find_rust_frontend()


def test_bad_model_is_one_clear_line(tmp_path: Path) -> None:
    fake = tmp_path / "vrs-rs"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    result = run_vrs("serve", str(tmp_path / "missing-model"),
                     env={"VRS_RUST_FRONTEND_PATH": str(fake)})
    assert result.returncode == 1
    assert "not a local directory" in result.stderr and "Traceback" not in result.stderr


def test_invalid_engine_value_is_refused_before_start(tmp_path: Path) -> None:
    fake = tmp_path / "vrs-rs"
    fake.write_text("#!/bin/sh\necho started\n")
    fake.chmod(0o755)
    result = run_vrs("serve", "--mock", "--block-size", "3",
                     env={"VRS_RUST_FRONTEND_PATH": str(fake)})
    assert result.returncode == 1
    assert "block_size" in result.stderr and "started" not in result.stdout


@pytest.mark.parametrize("text,expected", [
    ("2GiB", 2 * 1024**3), ("512MiB", 512 * 1024**2), ("1.5GB", 1_500_000_000),
    ("4096", 4096), ("1 kib", 1024),
])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "2XB", "-1GiB", "0", "GiB"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)
