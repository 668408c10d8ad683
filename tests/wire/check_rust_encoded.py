"""Check messages encoded by Rust (rust/wire/tests/wire_compat.rs) against engine.protocol.

Usage: PYTHONPATH=<repo root> python tests/wire/check_rust_encoded.py DIR

DIR holds ``<case>.msgpack`` for every case in wire_cases.py, built natively in Rust.
Each must decode with engine.protocol's strict msgspec decoder to the expected value,
and re-encoding it must give back Rust's bytes exactly. Exit status 1 lists every failure.
"""

from __future__ import annotations

import sys
from pathlib import Path

from wire_cases import cases, decoder_for

from engine import protocol


def check(directory: Path) -> list[str]:
    failures = []
    all_cases = cases()
    expected_files = {f"{c.name}.msgpack" for c in all_cases}
    present = {f.name for f in directory.glob("*.msgpack")}
    for extra in sorted(present - expected_files):
        failures.append(f"{extra}: rust wrote a case python does not know")
    for case in all_cases:
        path = directory / f"{case.name}.msgpack"
        if not path.exists():
            failures.append(f"{case.name}: rust wrote no fixture")
            continue
        data = path.read_bytes()
        try:
            decoded = decoder_for(type(case.value)).decode(data)
        except Exception as exc:  # report every failure, not only the first
            failures.append(f"{case.name}: python cannot decode rust bytes: {exc}")
            continue
        if decoded != case.value:
            failures.append(f"{case.name}: decoded {decoded!r}\n  expected {case.value!r}")
        again = protocol.encode(decoded)
        if again != data:
            failures.append(
                f"{case.name}: re-encoding differs\n  rust   {data.hex()}\n  python {again.hex()}"
            )
    return failures


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    failures = check(Path(argv[1]))
    for failure in failures:
        print(f"FAIL {failure}", file=sys.stderr)
    if failures:
        return 1
    print(f"ok: {len(cases())} rust-encoded messages match engine.protocol")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
