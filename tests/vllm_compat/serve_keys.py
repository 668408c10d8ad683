"""Write the keys vLLM 0.33.0's `vllm serve` can put in a Rust frontend's --args-json.

Usage (the interpreter must have vllm==0.33.0 installed; vrs's own venv does not):

    ~/.cache/vrs-vllm-venv/bin/python tests/vllm_compat/serve_keys.py          # write
    ~/.cache/vrs-vllm-venv/bin/python tests/vllm_compat/serve_keys.py --check  # compare

`RustFrontendProcessManager` (vllm/v1/utils.py) sends `jsonify_non_default_args(args)`:
the non-default `vllm serve` arguments by argparse dest, plus `model_tag`,
`engine_ready_timeout_secs` and `http_timeout_keep_alive`. Output,
server/contracts/vllm_serve_keys.json: `engine` (dests that are `EngineArgs` fields: the
engine's settings) and `frontend` (the other dests, and the three added keys). vrs-rs
(rust/server/src/args/vllm.rs) maps the frontend keys it honours, refuses the others by
name, and accepts engine keys silently.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "server" / "contracts" / "vllm_serve_keys.json"
ADDED = ["engine_ready_timeout_secs", "http_timeout_keep_alive", "model_tag"]


def keys() -> dict[str, object]:
    import vllm
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    # Building the parser reads the platform's defaults; no accelerator is needed.
    platforms._current_platform = CpuPlatform()  # type: ignore[attr-defined]
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.common.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    engine = {f.name for f in dataclasses.fields(AsyncEngineArgs)} & dests
    return {
        "vllm_version": vllm.__version__,
        "engine": sorted(engine),
        "frontend": sorted((dests - engine) | set(ADDED)),
    }


def main() -> int:
    text = json.dumps(keys(), indent=1) + "\n"
    if "--check" in sys.argv[1:]:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} differs from this vllm's serve arguments; rerun without --check",
                  file=sys.stderr)
            return 1
        print(f"{OUT}: up to date")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
