"""``python -m engine --headless --handshake-address ADDR --engine-index I``.

Starts one engine process that joins a launcher (vrs-rs, the Python frontend, or a
remote frontend) through the handshake described in engine/protocol.py.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import MutableMapping

# How many times an idle OpenMP thread of torch's libgomp spins before it sleeps, unless
# GOMP_SPINCOUNT or OMP_WAIT_POLICY says otherwise. libgomp's own default (300,000)
# keeps a thread spinning through the gaps between steps; when anything else wants a core
# (the frontend, the engine's output thread, another program) the spinning threads take
# it, and a step that waits on a descheduled thread stalls for whole time slices.
# Measured in docs/benchmarks.md ("Single-stream latency: where a batch-1 step goes").
SPIN_COUNT = "10000"


def set_openmp_spin(environ: MutableMapping[str, str]) -> None:
    """Give ``environ`` vrs's OpenMP spin count unless the user chose a wait policy.
    Read once, when torch loads libgomp: call it before anything imports torch."""
    if "GOMP_SPINCOUNT" not in environ and "OMP_WAIT_POLICY" not in environ:
        environ["GOMP_SPINCOUNT"] = SPIN_COUNT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    parser.add_argument("--headless", action="store_true", required=True,
                        help="run without an HTTP server, joining a launcher over ZMQ")
    parser.add_argument("--handshake-address", required=True,
                        help="the launcher's handshake ROUTER, e.g. ipc:///tmp/x or tcp://h:p")
    parser.add_argument("--engine-index", type=int, default=0, help="this engine's index")
    args = parser.parse_args(argv)
    if not 0 <= args.engine_index < 65536:
        parser.error("--engine-index must be in 0..65535")

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    set_openmp_spin(os.environ)
    os.environ["VRS_ENGINE_INDEX"] = str(args.engine_index)  # its workers' log lines
    from engine.logfmt import setup_logging

    setup_logging(os.environ.get("VRS_LOG_LEVEL", "INFO").upper(),
                  f"engine {args.engine_index}")
    from engine.process.handshake import run_headless

    return run_headless(args.handshake_address, args.engine_index)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
