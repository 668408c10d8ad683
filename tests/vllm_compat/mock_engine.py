"""A vLLM 0.33.0 engine-core mock: joins a frontend's handshake and serves random tokens.

Built on vLLM's own structs and encoder (``EngineCoreRequest``, ``EngineCoreOutputs``,
``MsgpackEncoder`` / ``MsgpackDecoder``), so run it with an interpreter that has
vllm==0.33.0 (``~/.cache/vrs-vllm-venv/bin/python``; scripts/vllm_compat.sh makes it).
It stands where ``vllm serve MODEL --headless`` engines stand, and mirrors vLLM's Rust
``vllm-mock-engine`` (rust/src/mock-engine): instant prefill, a paced step, random token
ids below ``--vocab-size``, ``--output-token-chunk-size`` tokens per output.

Start the frontend first (it owns the handshake socket), then the mock:

    vllm serve MODEL --data-parallel-size-local 0 --data-parallel-address 127.0.0.1 \\
        --data-parallel-rpc-port 29550 --port 8000          # or vllm-rs serve / vrs-rs
    python tests/vllm_compat/mock_engine.py --handshake-address tcp://127.0.0.1:29550

Behind ``VLLM_USE_RUST_FRONTEND=1 vllm serve ...`` the supervisor owns that same
handshake address and hands the bound sockets to the Rust frontend; the mock joins it the
same way. ``--engine-count N`` serves N identities (threads, ranks
``--engine-start-index`` ..). ``--die-after-requests K`` serves K requests, then on the
next ADD sends ``ENGINE_CORE_DEAD`` on every output socket and exits 1. Log lines
(``--log-requests``: add, abort, finish, utility) go to stderr with the prefix
``vllm-mock:``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The mock uses vLLM's structs only, never a device: let vllm import on a CPU-only host.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import zmq  # noqa: E402
from vllm_mock.engine import DeathSwitch, Engine, EngineOptions, log  # noqa: E402
from vllm_mock.handshake import EngineShape, describe, join  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mock_engine.py", description=__doc__.split("\n")[0])
    p.add_argument("--handshake-address", default="tcp://127.0.0.1:29550",
                   help="the frontend-owned ZMQ handshake address (default %(default)s)")
    p.add_argument("--engine-count", "--data-parallel-size-local", type=int, default=None,
                   help="engine identities to register (default: --data-parallel-size, else 1)")
    p.add_argument("--engine-start-index", "--data-parallel-start-rank", type=int, default=0,
                   help="data-parallel rank of the first identity (default %(default)s)")
    p.add_argument("--data-parallel-address", default=None,
                   help="with --data-parallel-rpc-port: the handshake is tcp://ADDRESS:PORT, "
                        "as for `vllm serve --headless`")
    p.add_argument("--data-parallel-rpc-port", type=int, default=None)
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="milliseconds per engine step; 0 steps flat out, as the Rust mock "
                        "does (default %(default)s)")
    p.add_argument("--output-token-chunk-size", type=int, default=1,
                   help="tokens per EngineCoreOutput per step (default %(default)s)")
    p.add_argument("--vocab-size", type=int, default=32000,
                   help="random token ids are drawn from [0, vocab-size) (default %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default %(default)s)")
    p.add_argument("--log-requests", action="store_true",
                   help="log add / abort / finish / utility lines to stderr")
    p.add_argument("--die-after-requests", type=int, default=None, metavar="K",
                   help="serve K requests, then send ENGINE_CORE_DEAD and exit 1")
    p.add_argument("--max-model-len", type=int, default=8192,
                   help="max_model_len in the ready response (default %(default)s)")
    p.add_argument("--max-num-seqs", type=int, default=256,
                   help="max_num_seqs in the ready response (default %(default)s)")
    p.add_argument("--data-parallel-size", type=int, default=None,
                   help="data_parallel_size in the ready response when the handshake does "
                        "not say (default: engine-start-index + engine-count)")
    p.add_argument("--quiet-unknown", action="store_true",
                   help="do not log the arguments the mock ignores")
    p.add_argument("--parallel-config-hash", default=None,
                   help="sent in READY when data_parallel_size > 1 (MoE coordinated DP)")
    p.add_argument("--local", action="store_true",
                   help="register as a local, not headless, engine (HELLO local=True)")
    p.add_argument("--no-stats", action="store_true",
                   help="leave SchedulerStats out of the outputs (as --disable-log-stats)")
    p.add_argument("--handshake-timeout-s", type=float, default=300.0,
                   help="how long to wait for the frontend's answer (default %(default)s)")
    # A frontend that launches `vllm serve MODEL --headless ...` may hand the mock vLLM's
    # engine flags: they are ignored (and logged), as a stand-in should.
    args, unknown = p.parse_known_args(argv)
    args.ignored = unknown
    if (args.data_parallel_address is None) != (args.data_parallel_rpc_port is None):
        p.error("--data-parallel-address and --data-parallel-rpc-port go together")
    if args.data_parallel_address is not None:
        args.handshake_address = f"tcp://{args.data_parallel_address}:{args.data_parallel_rpc_port}"
    if args.engine_count is None:
        args.engine_count = (args.data_parallel_size or 1) - args.engine_start_index
    for name in ("engine_count", "output_token_chunk_size", "vocab_size", "max_model_len",
                 "max_num_seqs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.step_ms < 0:
        p.error("--step-ms must be >= 0")
    if args.die_after_requests is not None and args.die_after_requests < 0:
        p.error("--die-after-requests must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shape = EngineShape(
        max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
        num_gpu_blocks=65536, block_size=16,
        data_parallel_size=args.data_parallel_size or args.engine_start_index + args.engine_count,
        local=args.local, headless=not args.local,
        parallel_config_hash=args.parallel_config_hash)
    opts = EngineOptions(
        step_ms=args.step_ms, vocab_size=args.vocab_size,
        chunk_size=args.output_token_chunk_size, seed=args.seed,
        log_requests=args.log_requests, max_model_len=args.max_model_len,
        stats=not args.no_stats)
    stop = threading.Event()
    death = DeathSwitch(args.die_after_requests)
    failures: list[str] = []
    ctx = zmq.Context()

    def serve(index: int) -> None:
        try:
            sockets = join(ctx, args.handshake_address, index, shape, args.handshake_timeout_s)
        except Exception as error:  # reported, and the process exits 1
            failures.append(f"engine {index}: handshake failed: {error}")
            stop.set()
            return
        log(f"engine {index}: ready (inputs {sockets.addresses.inputs}, outputs "
            f"{sockets.addresses.outputs}, coordinator {sockets.addresses.coordinator_input})")
        engine = Engine(index, sockets, opts, death)
        try:
            engine.run(stop)
        except Exception as error:  # a broken wire: say so, stop the others
            failures.append(f"engine {index}: {type(error).__name__}: {error}")
            stop.set()
        finally:
            engine.close()

    if args.ignored and not args.quiet_unknown:
        log(f"ignoring arguments a mock has no use for: {' '.join(args.ignored)}")
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    log(f"starting {args.engine_count} engine(s) on {args.handshake_address}: {describe(shape)}, "
        f"step_ms={args.step_ms}, vocab_size={args.vocab_size}, "
        f"chunk={args.output_token_chunk_size}, seed={args.seed}")
    threads = [threading.Thread(target=serve, args=(args.engine_start_index + i,),
                                name=f"engine-{args.engine_start_index + i}", daemon=True)
               for i in range(args.engine_count)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=0.2)
    ctx.term()
    for failure in failures:
        log(failure)
    if death.fired.is_set():
        log("exiting after ENGINE_CORE_DEAD (--die-after-requests)")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
