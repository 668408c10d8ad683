"""vrs serve against llama.cpp's llama-server on the same model, CPU and client (#40).

llama-server is built from the llama-cpp-python sdist on PyPI (benchmarks/llamacpp_build.py,
cached outside the repository); the model is benchmarks/engine_models.py's random Qwen3
(bench13m by default), converted to GGUF by that llama.cpp's own converter. Before timing
anything the script checks that llama-server tokenizes as the model's HF tokenizer does
(it stops if a single text differs) and compares greedy tokens of both servers.

The load: `vrs bench serve` (this checkout's) on /v1/completions, random prompts of
--input-len tokens, --output-len out with EOS ignored, at each --concurrency; the
servers take turns (vrs, then llama-server per GGUF type) in each of --rounds rounds,
on the same prompts. Reported per server and concurrency, medians over the rounds:
output tok/s, TPOT / TTFT / ITL p50, and the server's CPU per output token (its whole
process session from /proc: for vrs the frontend and engine). Writes
benchmarks/results/llamacpp.{json,md} (another shape: llamacpp-<shape>.{json,md}).

    python benchmarks/llamacpp.py                       # bench13m, F32, 3 rounds
    python benchmarks/llamacpp.py --outtypes f32,f16,q8_0 --shape qwen3-0.6b
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llamacpp_build import (
    VERSION,
    cache_dir,
    check_converter_requirements,
    convert,
    llama_server,
    pre_tokenizer_of,
    say,
    source_tree,
)
from llamacpp_parity import greedy_parity, tokenizer_parity
from llamacpp_report import cell, cpu_summary, markdown, session_cpu_s, summarise, vrs_variant
from servers import REPO_ROOT, RESULTS, Server, free_port, vrs, wait_healthy

sys.path.insert(0, str(REPO_ROOT))

BASELINE = "llama-server F32"
ROUTE = "/v1/completions"


class LlamaServer:
    """llama-server serving ``gguf`` on a free loopback port in its own session, ``slots``
    sequences at once (continuous batching) in a context of ``context`` tokens."""

    def __init__(self, binary: Path, gguf: Path, log: Path, name: str, *, threads: int,
                 slots: int, context: int, timeout_s: float = 300.0) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [str(binary), "-m", str(gguf), "--host", "127.0.0.1",
                     "--port", str(self.port), "-t", str(threads), "-tb", str(threads),
                     "-np", str(slots), "-c", str(context), "-a", gguf.stem]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        if not wait_healthy(self.proc, self.url, name, log, timeout_s):
            self.stop()
            raise RuntimeError(f"{name} not healthy in {timeout_s:g} s; see {log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_bench(url: str, session: int, label: str, args: argparse.Namespace,
              concurrency: int, prompts: int, seed: int, model_dir: Path,
              out: Path) -> dict[str, Any]:
    """One `vrs bench serve` run (no warm-up requests) and the server's CPU over it: its
    result, checked to be the same load on every server, and its cell."""
    cmd = vrs("bench", "serve", "--base-url", url, "--backend", "openai-completions",
              "--tokenizer", str(model_dir), "--dataset-name", "random",
              "--num-prompts", str(prompts), "--max-concurrency", str(concurrency),
              "--random-input-len", str(args.input_len),
              "--random-output-len", str(args.output_len), "--ignore-eos",
              "--warmup-requests", "0", "--seed", str(seed), "--disable-tqdm",
              "--metric-percentiles", "50,99", "--result-file", str(out), "--label", label)
    before = session_cpu_s(session)
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    cpu = session_cpu_s(session) - before
    if done.returncode != 0:
        raise RuntimeError(f"bench failed ({label}): "
                           f"{done.stderr.strip()[-2000:] or done.stdout[-2000:]}")
    result = json.loads(out.read_text())
    if result["endpoint"] != ROUTE or result["failed"]:
        raise RuntimeError(f"{label}: {result['failed']} failed requests on "
                           f"{result['endpoint']}")
    if result["total_output_tokens"] != result["completed"] * args.output_len:
        raise RuntimeError(f"{label}: {result['total_output_tokens']} output tokens, not "
                           f"{result['completed']} x {args.output_len}: not the same load")
    return {"result": result, "cpu_s": cpu, "cell": cell(result, cpu, args.output_len)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="bench13m",
                        help="benchmarks/engine_models.py shape: bench13m, qwen3-0.6b, tiny")
    parser.add_argument("--seed", type=int, default=0, help="model weights and prompts")
    parser.add_argument("--outtypes", default="f32",
                        help="GGUF types served by llama-server, comma-separated: f32 "
                             "(always, the baseline), f16, q8_0")
    parser.add_argument("--rounds", type=int, default=3,
                        help="0: the parity checks only, nothing timed")
    parser.add_argument("--concurrency", default="1,64", help="comma-separated")
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--prompts-per-stream", type=int, default=2,
                        help="requests per run: concurrency x this (at least 8)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="llama-server -t/-tb (default: all cores)")
    parser.add_argument("--slots", type=int, default=0,
                        help="llama-server -np (default: the largest --concurrency)")
    parser.add_argument("--parity-tokens", type=int, default=32)
    parser.add_argument("--vrs-env", action="append", default=[],
                        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                        help="one more vrs serve, 'vrs serve (NAME)', started with these "
                             "environment variables (e.g. t1:OMP_NUM_THREADS=1); it takes "
                             "its turn with the others; repeatable")
    parser.add_argument("--busy", type=int, default=0,
                        help="this many busy processes (a pure-Python loop each) run during "
                             "every timed run: the servers measured beside other work")
    args = parser.parse_args()
    args.variants = [vrs_variant(spec) for spec in args.vrs_env]
    args.concurrencies = [int(c) for c in args.concurrency.split(",")]
    args.types = ["f32"] + [t for t in args.outtypes.split(",") if t and t != "f32"]
    args.slots = args.slots or max(args.concurrencies)
    return args


def main() -> None:
    args = parse_args()
    from engine_models import SHAPES, build_model, describe

    from cli.binary import find_rust_frontend
    from engine.mock.demo_model import tokenizer_source_dir

    cpuinfo = cpu_summary(Path("/proc/cpuinfo").read_text())
    check_converter_requirements()
    frontend = find_rust_frontend()
    cache = cache_dir()
    binary = llama_server(cache)
    tree = source_tree(cache)
    work = cache / "work"
    say(f"building the model ({args.shape}, seed {args.seed})")
    model_dir = build_model(work, args.shape, args.seed)
    pre = pre_tokenizer_of(tree, tokenizer_source_dir())
    say(f"the uncut tokenizer's pre-tokenizer, by the converter's table: {pre!r}")
    ggufs = {t: convert(tree, model_dir, t, work / f"{model_dir.name}-{t}.gguf", pre)
             for t in args.types}
    logs = RESULTS / "llamacpp-work"
    logs.mkdir(parents=True, exist_ok=True)
    context = args.slots * (args.input_len + args.output_len + 64)

    say(f"starting vrs serve (vrs-rs {frontend}) and llama-server ({', '.join(args.types)}; "
        f"-np {args.slots} -c {context} -t {args.threads})")
    vrs_server = Server(["serve", str(model_dir)], logs / "vrs-serve.log", "vrs serve",
                        stop_session=True, env={"VRS_RUST_FRONTEND_PATH": str(frontend)})
    servers: dict[str, tuple[str, int]] = {"vrs serve": (vrs_server.url, vrs_server.proc.pid)}
    llamas: list[LlamaServer] = []
    variants: list[Server] = []
    try:
        for name, env in args.variants:
            variants.append(Server(["serve", str(model_dir)], logs / f"vrs-serve-{name}.log",
                                   f"vrs serve ({name})", stop_session=True,
                                   env={"VRS_RUST_FRONTEND_PATH": str(frontend), **env}))
            servers[f"vrs serve ({name})"] = (variants[-1].url, variants[-1].proc.pid)
        for t in args.types:
            name = f"llama-server {t.upper()}"
            llamas.append(LlamaServer(binary, ggufs[t], logs / f"llama-server-{t}.log", name,
                                      threads=args.threads, slots=args.slots,
                                      context=context))
            servers[name] = (llamas[-1].url, llamas[-1].proc.pid)
        report = measure(args, servers, model_dir, logs)
    finally:
        vrs_server.stop()
        for variant in variants:
            variant.stop()
        for llama in llamas:
            llama.stop()
    report.update(
        date=datetime.now(UTC).isoformat(timespec="seconds"), cpu=cpuinfo,
        kernel=platform.release(), python=platform.python_version(),
        llama_cpp_python=VERSION, llama_server=llamas[0].argv[:1] + ["..."],
        llama_server_args=re.sub(r"--port \d+", "--port P", " ".join(
            llamas[0].argv[1:]).replace(str(work) + "/", "")),
        pre_tokenizer=pre, vrs_rs=str(frontend), model=describe(SHAPES[args.shape]),
        shape=args.shape, vrs_dtype=vrs_dtype(logs / "vrs-serve.log"),
        args={k: v for k, v in vars(args).items()
              if k not in ("concurrencies", "types", "variants")})
    write(report)


def measure(args: argparse.Namespace, servers: dict[str, tuple[str, int]],
            model_dir: Path, logs: Path) -> dict[str, Any]:
    """The parity checks, a warm-up of each server, then the rounds."""
    vrs_url = servers["vrs serve"][0]
    say("parity: tokenizer (llama-server /tokenize against the HF tokenizer)")
    tokens = tokenizer_parity(servers[BASELINE][0], model_dir)
    say(f"  tokenizer: {tokens['equal']} / {tokens['total']} texts equal")
    if tokens["equal"] != tokens["total"]:
        for case in tokens["mismatches"]:
            say(f"  differs: {case['text']!r}: HF {case['hf']} llama {case['llama_server']}")
        raise SystemExit("tokenizer parity failed: llama-server's GGUF tokenizer is not the "
                         "model's; the comparison would not send the same prompts")
    greedy = {}
    for name, (url, _) in servers.items():
        if name.startswith("vrs serve"):
            continue
        say(f"parity: greedy, vrs against {name} ({args.parity_tokens} tokens)")
        greedy[name] = greedy_parity(vrs_url, url, model_dir, args.parity_tokens)
        g = greedy[name]
        say(f"  {g['equal']} / {g['total']} continuations identical, "
            f"{g['tokens_equal']} / {g['tokens_total']} tokens before a first difference")
    for name, (url, pid) in servers.items() if args.rounds else ():
        for conc in args.concurrencies:
            say(f"warm-up: {name} at concurrency {conc}")
            run_bench(url, pid, "warm-up", args, conc, conc, args.seed + 99_999, model_dir,
                      logs / "warm-up.json")
    runs = []
    for r in range(args.rounds):
        for c_index, conc in enumerate(args.concurrencies):
            prompts = max(8, conc * args.prompts_per_stream)
            seed = args.seed + 1 + 100 * r + c_index
            for name, (url, pid) in servers.items():
                label = f"{name} c{conc} r{r + 1}"
                others = [p for n, (_, p) in servers.items() if n != name]
                idle = sum(session_cpu_s(p) for p in others)
                with busy_processes(args.busy):
                    run = run_bench(url, pid, label, args, conc, prompts, seed, model_dir,
                                    logs / f"{label.replace(' ', '-')}.json")
                # the CPU the idle servers took meanwhile (it would slow the one measured)
                idle = sum(session_cpu_s(p) for p in others) - idle
                say(f"round {r + 1}/{args.rounds} c={conc} {name}: "
                    f"{run['cell']['output_tok_s']:.1f} tok/s, TPOT p50 "
                    f"{run['cell']['tpot_p50_ms']:.2f} ms, CPU "
                    f"{run['cell']['cpu_ms_per_token']:.3f} ms/token")
                runs.append({"contender": name, "concurrency": conc, "round": r + 1,
                             "prompts": prompts, "cell": run["cell"], "cpu_s": run["cpu_s"],
                             "input_tokens": run["result"]["total_input_tokens"],
                             "idle_servers_cpu_s": idle,
                             "duration_s": run["result"]["duration"]})
    return {"tokenizer_parity": tokens, "greedy_parity": greedy, "runs": runs,
            "rows": summarise(runs, BASELINE)}


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """``count`` processes spinning in a Python loop for the duration (none for 0)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def vrs_dtype(log: Path) -> str:
    found = re.findall(r" as (float32|bfloat16|float16)\b", log.read_text("utf-8", "replace"))
    return found[-1] if found else "unknown"


def write(report: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    # bench13m: llamacpp.{json,md}; another shape: llamacpp-<shape>.{json,md}
    stem = "llamacpp" + ("" if report["shape"] == "bench13m" else f"-{report['shape']}")
    (RESULTS / f"{stem}.json").write_text(json.dumps(report, indent=2))
    cpu = report["cpu"]
    tok = report["tokenizer_parity"]
    lines = [f"{report['date']}: {cpu['model']} ({os.cpu_count()} cores; "
             f"{'AVX2-only' if cpu['avx2_only'] else ', '.join(cpu['simd'])}), "
             f"{report['model']}; vrs dtype {report['vrs_dtype']}; llama-server "
             f"(llama-cpp-python {report['llama_cpp_python']}) {report['llama_server_args']}",
             "", f"tokenizer parity: {tok['equal']} / {tok['total']} texts"]
    for name, g in report["greedy_parity"].items():
        lines.append(f"greedy parity, vrs against {name}: {g['equal']} / {g['total']} "
                     f"continuations identical ({g['tokens_equal']} / {g['tokens_total']} "
                     "tokens before a first difference)")
    if report["runs"]:
        idle = max(run["idle_servers_cpu_s"] / run["duration_s"] for run in report["runs"])
        lines.append(f"idle servers' CPU during a run: at most {100 * idle:.1f} % of a core")
        lines += ["", markdown(report["rows"], BASELINE)]
    else:
        lines += ["", "(--rounds 0: parity checks only, nothing timed)", ""]
    (RESULTS / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))
    say(f"wrote {RESULTS / stem}.json and .md")


if __name__ == "__main__":
    main()
