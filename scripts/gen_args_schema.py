#!/usr/bin/env python3
"""Writes server/contracts/args.schema.json, the JSON Schema of the args-json, from the
structs that declare it (server/args_json.py). Run it after changing a key there, then
the Rust structs the tests hold against the file (rust/server/src/args.rs, args/http.rs).

Usage: ``python scripts/gen_args_schema.py`` from the repository root; ``--check`` only
says whether the file is current (exit 1 when it is not)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server.args_json import SCHEMA_COMMAND, SCHEMA_FILE, schema_text  # noqa: E402


def main(argv: list[str]) -> int:
    text = schema_text()
    current = SCHEMA_FILE.read_text(encoding="utf-8") if SCHEMA_FILE.exists() else None
    if "--check" in argv:
        if current != text:
            print(f"{SCHEMA_FILE} is out of date; run `{SCHEMA_COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SCHEMA_FILE.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_FILE}")
    else:
        print(f"{SCHEMA_FILE} is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
