"""Handing over to a frontend process once the options are resolved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def _secret_key(key: str) -> bool:
    """api_key(s), token and *_token name secrets (flags or JSON keys)."""
    key = key.lower().replace("-", "_")
    return key in ("api_key", "api_keys", "token") or key.endswith("_token")


def _redact_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "***" if _secret_key(str(k)) and v is not None else _redact_json(v)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v) for v in value]
    return value


def _flag_kind(flag: str) -> str | None:
    """"secret" when the flag's value is a secret, "json" for --args-json, else None."""
    if not flag.startswith("--"):
        return None
    if _secret_key(flag[2:]):
        return "secret"
    return "json" if flag == "--args-json" else None


def _redact_value(value: str, kind: str) -> str:
    if kind == "secret":
        return "***"
    try:
        return json.dumps(_redact_json(json.loads(value)))
    except ValueError:
        return value


def redact(argv: list[str]) -> list[str]:
    """argv for logging: values of --api-key/--token-like flags (``--x v`` and ``--x=v``)
    and secret keys inside --args-json replaced by ``***`` (vrs-rs logs the same way)."""
    out: list[str] = []
    pending: str | None = None
    for arg in argv:
        if pending is not None:
            out.append(_redact_value(arg, pending))
            pending = None
            continue
        flag, eq, value = arg.partition("=")
        kind = _flag_kind(flag)
        if eq and kind is not None:
            out.append(f"{flag}={_redact_value(value, kind)}")
        else:
            pending = None if eq else kind
            out.append(arg)
    return out


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
