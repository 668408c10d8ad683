"""``python -m server --args-json '{...}'``: run the Python frontend. Rust: the vrs-rs
binary (rust/cli/src/main.rs).

The args-json map is the one ``vrs serve`` hands to vrs-rs (docs/internals.md).
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server", description=__doc__)
    parser.add_argument("--args-json", required=True,
                        help="the serve arguments as a JSON object (see docs/internals.md)")
    options = parser.parse_args(argv)
    try:
        args = json.loads(options.args_json)
    except json.JSONDecodeError as exc:
        parser.error(f"--args-json is not valid JSON: {exc}")
    if not isinstance(args, dict):
        parser.error("--args-json must be a JSON object")
    from server.lifecycle import serve

    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
