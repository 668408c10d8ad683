"""``python -m engine --headless --handshake-address ADDR --engine-index I``.

Starts one engine process that joins a launcher (vrs-rs, the Python frontend, or a
remote frontend) through the handshake described in engine/protocol.py.
"""

from __future__ import annotations

import argparse
import os
import sys


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
