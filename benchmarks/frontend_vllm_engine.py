"""vrs-rs against vllm-rs in front of the same vLLM engine: vLLM 0.33's own wire, one mock.

Both Rust frontends serve the built-in demo model's tokenizer and template in front of
vLLM's engine-core protocol, each the way it takes remote engines:

    vrs-rs serve MODEL --engine vllm --data-parallel-size-local 0 \\
        --data-parallel-address 127.0.0.1 --data-parallel-rpc-port P
    vllm-rs serve MODEL --data-parallel-size-local 0 \\
        --data-parallel-address 127.0.0.1 --data-parallel-rpc-port P

and the engine behind is the vLLM-wire mock (``tests/vllm_compat/mock_engine.py``, on
vLLM's own structs and encoder, run by the interpreter where vllm 0.33.0 is installed),
joining the frontend's handshake on port P. Every run starts a fresh mock with the same
arguments, so each frontend meets the same engine. Flat out (``--step-ms 0``) the mock
steps as fast as it can; paced (``--step-ms 2``) it makes one token per running request
every 2 ms. The client is ``vrs bench serve`` (chat streams, random 512 in / 128 out, EOS
ignored) at each concurrency; the frontends take turns (A B A B ...) for ``--rounds``
rounds, and each mode reports the medians over rounds of req/s, TTFT p50, ITL p50 and the
frontend process's CPU per request (``/proc``; the mock is another process, not counted).

    python benchmarks/frontend_vllm_engine.py                  # paced 2 ms and flat out
    python benchmarks/frontend_vllm_engine.py --modes paced --concurrency 64 --rounds 5
    python benchmarks/frontend_vllm_engine.py --engine vllm --model DIR --concurrency 256 \
        --vllm-args --load-format dummy         # on a GPU: vllm serve, each frontend in turn

With ``--engine vllm`` each turn is ``VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=BIN
vllm serve MODEL`` (issue #33's first way in) in front of vLLM's real engine, which needs a
GPU; the CPU counted is the frontend binary's process alone.

Needs vrs-rs (``pip install .``, or ``--vrs-rs PATH``) and vllm 0.33.0 in its own venv
(``scripts/vllm_compat.sh`` makes ``~/.cache/vrs-vllm-venv``): its ``vllm-rs`` binary is
the other frontend. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_servers import bench, machine  # noqa: E402
from servers import REPO_ROOT, RESULTS, free_port, wait_healthy  # noqa: E402

VLLM_VENV = Path.home() / ".cache" / "vrs-vllm-venv"
MOCK = REPO_ROOT / "tests" / "vllm_compat" / "mock_engine.py"
MODES = {"paced": 2.0, "flat": 0.0}
METRICS = ("request_throughput", "median_ttft_ms", "p99_ttft_ms", "median_itl_ms",
           "p99_itl_ms", "cpu_ms_per_request")


def default_vrs_rs() -> Path | None:
    found = os.environ.get("VRS_RUST_FRONTEND_PATH") or shutil.which("vrs-rs")
    return Path(found) if found else None


def default_vllm_rs() -> Path | None:
    found = sorted(VLLM_VENV.glob("lib/python3*/site-packages/vllm/vllm-rs"))
    return found[0] if found else None


@dataclass(frozen=True)
class Process:
    """A process by pid: what ``frontend_servers.bench`` reads the frontend's CPU from."""

    pid: int


class Pair:
    """One frontend (``label``: ``vrs-rs`` or ``vllm-rs``) serving on a free port with an
    engine behind it, healthy once constructed. ``--engine mock``: the frontend takes remote
    engines and a fresh mock joins its handshake. ``--engine vllm``: ``vllm serve`` with
    ``VLLM_USE_RUST_FRONTEND=1`` runs the frontend binary in front of its real engine.
    ``frontend``, ``proc`` (the frontend binary's process) and ``url`` are what
    ``frontend_servers.bench`` reads."""

    def __init__(self, label: str, binary: Path, args: argparse.Namespace, step_ms: float,
                 log_dir: Path) -> None:
        self.frontend = label
        port, rpc = free_port(), free_port()
        self.url = f"http://127.0.0.1:{port}"
        log = log_dir / f"{label}.log"
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RUST_LOG": "warn"}
        self.procs: list[subprocess.Popen[bytes]] = []
        if args.engine == "vllm":
            cmd = [str(args.vllm_python), "-m", "vllm.entrypoints.cli.main", "serve",
                   str(args.model), "--host", "127.0.0.1", "--port", str(port),
                   *args.vllm_args]
            env |= {"VLLM_USE_RUST_FRONTEND": "1", "VLLM_RUST_FRONTEND_PATH": str(binary)}
            commands = [(cmd, log)]
        else:
            remote = ["--data-parallel-size", "1", "--data-parallel-size-local", "0",
                      "--data-parallel-address", "127.0.0.1", "--data-parallel-rpc-port",
                      str(rpc)]
            cmd = [str(binary), "serve", str(args.model), "--host", "127.0.0.1",
                   "--port", str(port), *(["--engine", "vllm"] if label == "vrs-rs" else []),
                   *remote]
            # The mock is the one engine (the frontend's --data-parallel-size-local 0 is
            # how many it starts itself).
            mock = [str(args.vllm_python), str(MOCK), *remote[:2], *remote[4:],
                    "--step-ms", f"{step_ms:g}",
                    "--vocab-size", str(args.vocab_size), "--max-num-seqs", "1024",
                    "--seed", str(args.seed), "--quiet-unknown"]
            commands = [(cmd, log), (mock, log_dir / f"{label}-mock.log")]
        for argv, path in commands:
            with open(path, "ab") as out:
                self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                   start_new_session=True, env=env))
        try:
            if not wait_healthy(self.procs[0], self.url, label, log, args.start_timeout):
                raise RuntimeError(f"{label} not healthy in {args.start_timeout:g} s; see {log}")
            self.proc = Process(self.procs[0].pid if args.engine == "mock"
                                else frontend_pid(self.procs[0].pid, binary))
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def frontend_pid(session: int, binary: Path) -> int:
    """The process of session ``session`` running ``binary`` (vllm serve's frontend)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            exe = (entry / "exe").resolve()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[3]) == session and exe == binary.resolve():
            return int(entry.name)
    raise RuntimeError(f"vllm serve (session {session}) runs no {binary}")


def run_mode(mode: str, frontends: dict[str, Path], args: argparse.Namespace,
             work: Path) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Every round's results, by frontend and concurrency."""
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {
        label: {c: [] for c in args.concurrency} for label in frontends}
    for round_ in range(args.rounds):
        for label, binary in frontends.items():
            print(f"[{mode}] round {round_ + 1}/{args.rounds}: {label}", file=sys.stderr)
            pair = Pair(label, binary, args, MODES[mode], work)
            try:
                for c in args.concurrency:
                    out = work / f"{mode}-{label}-c{c}-r{round_}.json"
                    result = bench(pair, c, args, out, backend="openai-chat")  # type: ignore[arg-type]
                    result["cpu_ms_per_request"] = (
                        1000.0 * result["frontend_cpu_s"] / result["frontend_requests"])
                    runs[label][c].append(result)
                    print(f"  c={c}: {result['request_throughput']:.1f} req/s, TTFT p50 "
                          f"{result['median_ttft_ms']:.2f} ms, CPU "
                          f"{result['cpu_ms_per_request']:.2f} ms/req", file=sys.stderr)
            finally:
                pair.stop()
    return runs


def medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {m: statistics.median(r[m] for r in runs) for m in METRICS}


def table(title: str, runs: dict[str, dict[int, list[dict[str, Any]]]],
          concurrency: list[int]) -> str:
    lines = [f"### {title}", "",
             "| c | frontend | req/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | "
             "CPU ms/req | CPU vs vllm-rs |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in concurrency:
        base = medians(runs["vllm-rs"][c]) if "vllm-rs" in runs else None
        for label in runs:
            m = medians(runs[label][c])
            ratio = (f"{m['cpu_ms_per_request'] / base['cpu_ms_per_request']:.2f}×"
                     if base and base["cpu_ms_per_request"] > 0 else "")
            lines.append(
                f"| {c} | {label} | {m['request_throughput']:.1f} | "
                f"{m['median_ttft_ms']:.2f} | {m['p99_ttft_ms']:.2f} | "
                f"{m['median_itl_ms']:.2f} | {m['p99_itl_ms']:.2f} | "
                f"{m['cpu_ms_per_request']:.2f} | {ratio} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vrs-rs", type=Path, default=default_vrs_rs(), help="vrs-rs binary")
    p.add_argument("--vllm-rs", type=Path, default=default_vllm_rs(),
                   help="vllm-rs binary (default: the one in ~/.cache/vrs-vllm-venv's vllm)")
    p.add_argument("--vllm-python", type=Path, default=VLLM_VENV / "bin" / "python",
                   help="interpreter with vllm 0.33.0, for the mock engine")
    p.add_argument("--engine", choices=("mock", "vllm"), default="mock",
                   help="mock: the vLLM-wire mock engine (no GPU); vllm: vLLM's own engine "
                        "under `vllm serve` (a GPU)")
    p.add_argument("--vllm-args", nargs=argparse.REMAINDER, default=[],
                   help="with --engine vllm: the rest of the command line goes to vllm serve")
    p.add_argument("--model", type=Path, default=None,
                   help="model directory (default: the built-in demo model)")
    p.add_argument("--shape", default=None,
                   help="instead of --model: a random seeded model of these "
                        "benchmarks/engine_models.py shapes (e.g. qwen3-0.6b)")
    p.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["paced", "flat"])
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 512])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--prompts-per-slot", type=int, default=4)
    p.add_argument("--min-prompts", type=int, default=64)
    p.add_argument("--vocab-size", type=int, default=4096,
                   help="the mock's random tokens are below this (inside the demo vocabulary)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-timeout", type=float, default=120.0)
    p.add_argument("--out", type=Path, default=RESULTS / "frontend_vllm_engine.json")
    args = p.parse_args(argv)
    for name in ("vrs_rs", "vllm_rs", "vllm_python"):
        path = getattr(args, name)
        if path is None or not path.is_file():
            p.error(f"--{name.replace('_', '-')}: not found ({path}); see the module doc")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT))
    if args.model is None and args.shape is None:
        from engine.mock.demo_model import ensure_demo_model
        args.model = ensure_demo_model()
    frontends = {"vrs-rs": args.vrs_rs, "vllm-rs": args.vllm_rs}
    if args.engine == "vllm":
        args.modes = ["flat"]  # the real engine sets its own pace
    report: dict[str, Any] = {"machine": machine(), "args": {
        k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    tables = []
    with tempfile.TemporaryDirectory(prefix="vrs-vllm-engine-") as tmp:
        if args.shape is not None:
            from engine_models import build_model
            args.model = build_model(Path(tmp), args.shape, args.seed)
        for mode in args.modes:
            runs = run_mode(mode, frontends, args, Path(tmp))
            report[mode] = {label: {c: medians(r) for c, r in by_c.items()}
                            for label, by_c in runs.items()}
            title = ("vLLM's engine (vllm serve)" if args.engine == "vllm"
                     else f"mock engine, {mode} (step {MODES[mode]:g} ms)")
            tables.append(table(title, runs, args.concurrency))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print("\n\n".join(tables))
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
