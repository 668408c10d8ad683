"""Running `vrs-rs bench serve`: start it, follow its JSON-lines events, show them, and
write the result file."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from cli.bench_args import BenchOptions, build_args, check_result_options, result_path
from cli.bench_display import BenchDisplay

# vLLM's per-request lists (--save-detailed); --plot asks for them to draw.
DETAILED_KEYS = ("input_lens", "output_lens", "start_times", "ttfts", "itls", "errors")


class BenchError(RuntimeError):
    """The load generator reported an error, or stopped without a result."""


def _event(line: str) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def follow(proc: subprocess.Popen[str], display: BenchDisplay) -> dict[str, Any]:
    """Reads events until vrs-rs exits; the result event's fields, or BenchError."""
    result: dict[str, Any] | None = None
    error: str | None = None
    assert proc.stdout is not None
    for line in proc.stdout:
        event = _event(line)
        if event is None:
            if line.strip():
                print(line.rstrip("\n"), file=sys.stderr)
            continue
        kind = event.get("event")
        if kind == "result":
            result = {k: v for k, v in event.items() if k != "event"}
        elif kind == "error":
            error = str(event.get("message") or "unknown error")
        else:
            display.event(event)
    code = proc.wait()
    if error is not None:
        raise BenchError(error)
    if code != 0 or result is None:
        raise BenchError(f"vrs-rs bench serve exited with code {code} without a result")
    return result


def write_result(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def run_bench(options: BenchOptions) -> None:
    """`vrs bench serve`: the whole command after option parsing."""
    from cli.binary import find_rust_frontend
    from cli.launch import spawn_rust

    check_result_options(options)
    args = build_args(options)
    binary = find_rust_frontend()
    console = Console(soft_wrap=False)
    live = console.is_terminal and not options.disable_tqdm
    proc = spawn_rust(binary, "bench serve", args, stdout=subprocess.PIPE)
    try:
        with BenchDisplay(console, live) as display:
            result = follow(proc, display)
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        Console(stderr=True).print("[yellow]interrupted[/yellow]")
        raise typer.Exit(130) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    result = {"date": date, **result}
    if options.plot is not None:
        from cli.bench_plot import plot_run

        for written in plot_run(result, options.plot):
            console.print(f"wrote {written}", highlight=False, soft_wrap=True)
    if not options.save_detailed:
        result = {k: v for k, v in result.items() if k not in DETAILED_KEYS}
    display.result(result)
    path = result_path(options, result, date)
    if path is not None:
        write_result(path, result)
        console.print(f"result written to {path}", highlight=False, soft_wrap=True)
