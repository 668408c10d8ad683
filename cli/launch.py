"""Handing over to a frontend process once the options are resolved."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def cli_log() -> logging.Logger:
    """The CLI's own log lines, in the layout every vrs process uses (engine/logfmt.py),
    on stderr; kept off the root logger, which the Python server configures."""
    from engine.logfmt import Layout

    log = logging.getLogger("vrs.cli")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(Layout("vrs"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def rust_argv(binary: Path, subcommand: str, args: dict[str, Any]) -> list[str]:
    """`vrs-rs SUBCOMMAND --args-json JSON`; SUBCOMMAND may be nested ("bench serve")."""
    return [str(binary), *subcommand.split(), "--args-json", json.dumps(args)]


def spawn_rust(binary: Path, subcommand: str, args: dict[str, Any],
               **popen: Any) -> subprocess.Popen[str]:
    """Start `vrs-rs SUBCOMMAND --args-json ...` as a child (text mode, line-buffered)."""
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.Popen(rust_argv(binary, subcommand, args), text=True, bufsize=1,
                            **popen)


def exec_rust(binary: Path, subcommand: str, args: dict[str, Any]) -> None:
    """Replace this process with `vrs-rs SUBCOMMAND --args-json ...` (never returns)."""
    argv = rust_argv(binary, subcommand, args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
