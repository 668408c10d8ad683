"""Finding the vrs-rs binary, for every command that runs it.

``VRS_RUST_FRONTEND_PATH`` is either ``auto`` (the default: the interpreter's scripts
directory, where ``pip install`` puts it, then ``PATH``) or the binary's path. A missing
or non-executable binary is an error naming every place looked at; vrs never falls
back to the Python frontend silently.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

ENV_VAR = "VRS_RUST_FRONTEND_PATH"
BINARY_NAME = "vrs-rs"


class BinaryNotFoundError(RuntimeError):
    """vrs-rs is not where it was looked for."""


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def candidate_paths() -> list[Path]:
    """Where ``auto`` looks, in order (the PATH lookup comes last, if it finds one)."""
    seen: list[Path] = []
    for directory in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        path = Path(directory) / BINARY_NAME
        if path not in seen:
            seen.append(path)
    on_path = shutil.which(BINARY_NAME)
    if on_path and Path(on_path) not in seen:
        seen.append(Path(on_path))
    return seen


def find_rust_frontend() -> Path:
    """The vrs-rs binary to run, or BinaryNotFoundError saying what was tried."""
    setting = os.environ.get(ENV_VAR, "auto").strip() or "auto"
    if setting != "auto":
        path = Path(setting).expanduser()
        if _is_executable(path):
            return path.resolve()
        problem = "does not exist" if not path.exists() else "is not an executable file"
        raise BinaryNotFoundError(
            f"{ENV_VAR}={setting} {problem}. Point it at a built vrs-rs binary "
            f"(e.g. rust target/release/vrs-rs) or set it to 'auto'."
        )
    tried = candidate_paths()
    for path in tried:
        if _is_executable(path):
            return path
    listing = ", ".join(str(p) for p in tried) or "(nothing)"
    raise BinaryNotFoundError(
        f"vrs-rs not found ({ENV_VAR}=auto looked at: {listing}; and PATH). "
        f"Install vrs with 'pip install .' (it builds vrs-rs), or set {ENV_VAR} to the "
        "binary's path."
    )
