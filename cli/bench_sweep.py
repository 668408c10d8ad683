"""Running `vrs-rs bench sweep`: build its args-json, follow its JSON-lines events and show
them (a rich progress display on a terminal, plain lines otherwise), then a table of the
points. The sweep itself (points, resume, early stops, files) lives in Rust
(rust/bench/src/sweep.rs)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from cli.bench_args import BenchOptions, build_args
from cli.bench_display import live_stats
from cli.bench_runner import BenchError

# Set per point by the sweep, not passed through from the serve options.
PER_POINT = ("base_url", "label", "max_concurrency", "request_rate")


@dataclass
class SweepOptions:
    base_urls: list[str]
    labels: list[str]
    max_concurrency: str | None
    request_rate: str | None
    output_dir: Path
    resume: bool
    stop_at_slo: list[str]
    max_failed_ratio: float
    disable_tqdm: bool


def build_sweep_args(serve: BenchOptions, sweep: SweepOptions) -> dict[str, Any]:
    """The args-json dict for `vrs-rs bench sweep` (keys in docs/internals.md)."""
    serve_args = {k: v for k, v in build_args(serve).items() if k not in PER_POINT}
    return {
        "base_urls": [url.rstrip("/") for url in sweep.base_urls],
        "labels": sweep.labels,
        "max_concurrency": sweep.max_concurrency,
        "request_rate": sweep.request_rate,
        "output_dir": str(sweep.output_dir.resolve()),
        "resume": sweep.resume,
        "stop_at_slo": sweep.stop_at_slo,
        "max_failed_ratio": sweep.max_failed_ratio,
        "serve": serve_args,
    }


def _ms(value: Any) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "-"


def load_name(event: dict[str, Any]) -> str:
    """`c=16` or `rate=2.5`: the swept setting of the point."""
    if event.get("axis") == "request_rate":
        return f"rate={event.get('request_rate')}"
    return f"c={event.get('max_concurrency')}"


def point_name(event: dict[str, Any]) -> str:
    """`rust c=16`: the server's label and the load."""
    return f"{event.get('label')} {load_name(event)}"


def headline(event: dict[str, Any]) -> str:
    """The last point's numbers on one line."""
    failed = event.get("failed") or 0
    return (f"{_ms(event.get('request_throughput'))} req/s, "
            f"{_ms(event.get('output_throughput'))} tok/s, TTFT p50/p99 "
            f"{_ms(event.get('median_ttft_ms'))}/{_ms(event.get('p99_ttft_ms'))} ms, ITL p50 "
            f"{_ms(event.get('median_itl_ms'))} ms" + (f", {failed} failed" if failed else ""))


class SweepDisplay:
    """Renders the events of `vrs-rs bench sweep`: which point of how many, the last
    point's headline, stops; live only on a terminal without --disable-tqdm."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        self.progress: Progress | None = None
        self.sweep_task: TaskID | None = None
        self.point_task: TaskID | None = None
        self.rows: list[dict[str, Any]] = []
        self.live = live

    def __enter__(self) -> SweepDisplay:
        if self.live:
            self.progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(), console=self.console)
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text, highlight=False, soft_wrap=True)
        else:
            print(Console().render_str(text).plain, flush=True)

    def _advance(self, steps: int = 1, description: str | None = None) -> None:
        if self.progress is not None and self.sweep_task is not None:
            self.progress.update(self.sweep_task, advance=steps, description=description)

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        where = f"[{event.get('index')}/{event.get('total')}] {point_name(event)}"
        if kind == "sweep":
            self.say(f"[bold]vrs bench sweep[/bold]: {event.get('points')} points, "
                     f"{event.get('axis')} x {', '.join(event.get('labels') or [])} -> "
                     f"{escape(str(event.get('output_dir')))}")
            if self.progress is not None:
                self.sweep_task = self.progress.add_task("sweep", total=event.get("points"),
                                                         stats="")
        elif kind == "point":
            self._advance(0, f"point {where}")
            if self.progress is not None:
                if self.point_task is not None:
                    self.progress.remove_task(self.point_task)
                self.point_task = self.progress.add_task("  requests", total=None, stats="")
            else:
                self.say(f"{where}: running")
        elif kind == "progress" and self.progress is not None and self.point_task is not None:
            self.progress.update(self.point_task, total=event.get("total"),
                                 completed=int(event.get("completed", 0))
                                 + int(event.get("failed", 0)), stats=live_stats(event))
        elif kind in ("point_result", "point_skipped"):
            self.rows.append(event)
            resumed = " [dim](kept from an earlier run)[/dim]" if kind == "point_skipped" else ""
            self.say(f"{where}: {headline(event)}{resumed}")
            self._advance()
        elif kind == "point_error":
            self.say(f"[red]{where}: could not run:[/red] "
                     f"{escape(str(event.get('message')))}")
            self._advance()
        elif kind == "stop":
            left = int(event.get("skipped") or 0)
            tail = f" ({left} point{'s' if left > 1 else ''} left out)" if left else ""
            self.say(f"[yellow]stopped {event.get('label')} at {load_name(event)}:[/yellow] "
                     f"{escape(str(event.get('reason')))}{tail}")
            self._advance(left)

    def table(self) -> Table:
        """The points of this sweep, one row each (fits 80 columns)."""
        table = Table(title="Sweep", title_justify="left", box=None, padding=(0, 1))
        for name in ("point", "req/s", "tok/s", "TTFT p50", "TTFT p99", "ITL p50", "failed"):
            table.add_column(name, justify="left" if name == "point" else "right")
        for row in self.rows:
            table.add_row(point_name(row), _ms(row.get("request_throughput")),
                          _ms(row.get("output_throughput")), _ms(row.get("median_ttft_ms")),
                          _ms(row.get("p99_ttft_ms")), _ms(row.get("median_itl_ms")),
                          str(row.get("failed", "-")))
        return table


def follow(proc: subprocess.Popen[str], display: SweepDisplay) -> dict[str, Any] | None:
    """Shows events until vrs-rs exits; the summary event, or BenchError on an error."""
    summary: dict[str, Any] | None = None
    error: str | None = None
    assert proc.stdout is not None
    for line in proc.stdout:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if line.strip():
                print(line.rstrip("\n"), file=sys.stderr)
            continue
        if not isinstance(event, dict):
            continue
        if event.get("event") == "summary":
            summary = event
        elif event.get("event") == "error":
            error = str(event.get("message") or "unknown error")
        else:
            display.event(event)
    proc.wait()
    if error is not None:
        raise BenchError(error)
    return summary


def run_sweep(serve: BenchOptions, sweep: SweepOptions) -> None:
    """`vrs bench sweep`: the whole command after option parsing."""
    from cli.binary import find_rust_frontend
    from cli.launch import spawn_rust

    args = build_sweep_args(serve, sweep)
    binary = find_rust_frontend()
    console = Console(soft_wrap=False)
    proc = spawn_rust(binary, "bench sweep", args, stdout=subprocess.PIPE)
    display = SweepDisplay(console, console.is_terminal and not sweep.disable_tqdm)
    try:
        with display:
            summary = follow(proc, display)
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        Console(stderr=True).print("[yellow]interrupted: run the same command again to "
                                   "resume[/yellow]")
        raise typer.Exit(130) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if display.rows:
        console.print(display.table())
    if summary is not None:
        console.print(f"summary written to {summary.get('path')} ({summary.get('rows')} rows)",
                      highlight=False, soft_wrap=True)
    if proc.returncode != 0:
        raise typer.Exit(proc.returncode)
