"""Write one msgpack fixture per wire case (see wire_cases.py) plus manifest.json.

Usage: PYTHONPATH=<repo root> python tests/wire/make_fixtures.py OUTDIR

The fixtures are made by ``engine.protocol`` itself; rust/wire/tests/wire_compat.rs decodes
each into its Rust type, re-encodes it and compares bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from wire_cases import Case, cases, check_cases, decoder_for


def write_fixtures(out: Path, all_cases: list[Case]) -> list[dict[str, object]]:
    out.mkdir(parents=True, exist_ok=True)
    manifest = []
    for case in all_cases:
        wire = case.wire
        # The Python side must itself accept what it writes (short tails included).
        decoded = decoder_for(type(case.value)).decode(wire)
        assert decoded == case.value, f"{case.name}: python decode mismatch {decoded!r}"
        file = f"{case.name}.msgpack"
        (out / file).write_bytes(wire)
        manifest.append(
            {
                "name": case.name,
                "type": type(case.value).__name__,
                "file": file,
                # False: an older peer's shorter array; re-encoding gives the full array.
                "canonical": case.raw is None,
            }
        )
    return manifest


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    all_cases = cases()
    check_cases(all_cases)
    manifest = write_fixtures(out, all_cases)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(manifest)} fixtures to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
