"""Write vLLM engine-core wire fixtures with vLLM 0.33.0's own structs and encoder.

Usage (the interpreter must have vllm==0.33.0 installed; vrs's own venv does not):

    ~/.cache/vrs-vllm-venv/bin/python tests/vllm_compat/make_fixtures.py          # write
    ~/.cache/vrs-vllm-venv/bin/python tests/vllm_compat/make_fixtures.py --check  # compare

Output, in rust/wire/tests/fixtures/vllm/:

* ``<case>.bin``: the exact ZMQ multipart message, as one msgpack array of bin items, one
  per frame, in send order (request-type byte frame first for requests; aux buffers of
  large arrays after the main frame);
* ``cases.json``: per case its name, direction (``frontend`` sends it, ``engine`` sends
  it), kind and the expected decoded value as JSON (see ``vllm_json.py`` for the mapping).

rust/wire/tests/vllm_compat.rs decodes every engine-direction case to the expected values
and re-encodes every frontend-direction case to exactly these bytes. Nothing here is
random or time-dependent, so ``--check`` proves the committed fixtures are what this vLLM
writes today.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
from vllm_cases import Case, engine_cases, frontend_cases

OUT = Path(__file__).resolve().parents[2] / "rust" / "wire" / "tests" / "fixtures" / "vllm"


def frame_file(frames: list[bytes]) -> bytes:
    return msgspec.msgpack.encode([bytes(f) for f in frames])


def render(cases: list[Case]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    index: list[dict[str, Any]] = []
    for case in cases:
        files[f"{case.name}.bin"] = frame_file(case.frames)
        index.append(
            {
                "name": case.name,
                "direction": case.direction,
                "kind": case.kind,
                "frames": len(case.frames),
                "expected": case.expected,
            }
        )
    files["cases.json"] = (json.dumps(index, indent=1, sort_keys=False) + "\n").encode()
    return files


def main(argv: list[str]) -> int:
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__, file=sys.stderr)
        return 2
    import vllm

    if vllm.__version__ != "0.33.0":
        print(f"need vllm 0.33.0, found {vllm.__version__}", file=sys.stderr)
        return 2
    files = render(frontend_cases() + engine_cases())
    if check:
        stale = [
            name
            for name, data in files.items()
            if not (OUT / name).is_file() or (OUT / name).read_bytes() != data
        ]
        extra = sorted(p.name for p in OUT.glob("*") if p.name not in files)
        if stale or extra:
            print(f"stale fixtures: {stale}; unexpected files: {extra}", file=sys.stderr)
            print("regenerate with: make_fixtures.py (no --check)", file=sys.stderr)
            return 1
        print(f"{len(files)} fixture files match vllm {vllm.__version__}")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(files)} files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
