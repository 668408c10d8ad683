"""What `vrs bench serve` shows: a rich progress bar and results table on a terminal,
plain lines (vLLM's result block) otherwise."""

from __future__ import annotations

import re
import time
from typing import Any

from rich.console import Console, Group
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

METRIC_TITLES = {
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}
PLAIN_PROGRESS_EVERY_S = 1.0


def _number(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def _summary_head(result: dict[str, Any]) -> list[tuple[str, str]]:
    rate = result.get("request_rate")
    return [
        ("Successful requests", _number(result.get("completed"))),
        ("Failed requests", _number(result.get("failed"))),
        # a request sent again on a new connection (its kept-alive one closed by the
        # server); vrs's key, vLLM has no such count
        *([("Retried requests", _number(result["retried_requests"]))]
          if result.get("retried_requests") else []),
        ("Maximum request concurrency", _number(result.get("max_concurrency"))),
        ("Request rate (req/s)", _number(rate) if rate != "inf" else "inf"),
        ("Benchmark duration (s)", _number(result.get("duration"))),
        ("Total input tokens", _number(result.get("total_input_tokens"))),
    ]


def _goodput(result: dict[str, Any]) -> list[tuple[str, str]]:
    if "request_goodput" in result:
        return [("Request goodput (req/s)", _number(result["request_goodput"]))]
    return []


def _generation_summary(result: dict[str, Any]) -> list[tuple[str, str]]:
    summary = [
        *_summary_head(result),
        ("Total generated tokens", _number(result.get("total_output_tokens"))),
        ("Request throughput (req/s)", _number(result.get("request_throughput"))),
        *_goodput(result),
        ("Output token throughput (tok/s)", _number(result.get("output_throughput"))),
    ]
    # vLLM prints both peaks with two decimals (the concurrency too).
    for label, key in (("Peak output token throughput (tok/s)", "max_output_tokens_per_s"),
                       ("Peak concurrent requests", "max_concurrent_requests")):
        if key in result:
            summary.append((label, _number(float(result[key]))))
    summary.append(
        ("Total token throughput (tok/s)", _number(result.get("total_token_throughput"))))
    return summary


def _pooling_summary(result: dict[str, Any]) -> list[tuple[str, str]]:
    """vLLM's block for a pooling run (embeddings): nothing generated, so no output
    rows; its token throughput is of input tokens."""
    return [
        *_summary_head(result),
        ("Request throughput (req/s)", _number(result.get("request_throughput"))),
        *_goodput(result),
        ("Input throughput (inputs/s)", _number(result.get("input_sequence_throughput"))),
        ("Total token throughput (tok/s)", _number(result.get("total_token_throughput"))),
    ]


def result_sections(result: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """(section title, [(label, value)]) in vLLM's order; only metrics present appear. A
    pooling run's result (it has vLLM's `total_input_sequences`) gets vLLM's pooling
    summary."""
    pooling = "total_input_sequences" in result
    summary = _pooling_summary(result) if pooling else _generation_summary(result)
    sections = [("Serving Benchmark Result", summary)]
    for metric, (title, short) in METRIC_TITLES.items():
        if f"mean_{metric}_ms" not in result:
            continue
        rows = [(f"Mean {short} (ms)", _number(result[f"mean_{metric}_ms"])),
                (f"Median {short} (ms)", _number(result[f"median_{metric}_ms"])),
                (f"Std {short} (ms)", _number(result[f"std_{metric}_ms"]))]
        pattern = re.compile(rf"^p([0-9.]+)_{metric}_ms$")
        for key, value in result.items():
            match = pattern.match(key)
            if match:
                rows.append((f"P{match.group(1)} {short} (ms)", _number(value)))
        sections.append((title, rows))
    if result.get("turns"):
        sections.append(("Per Turn (mean TTFT, input, cached)", _turn_rows(result)))
    return sections


def _turn_rows(result: dict[str, Any]) -> list[tuple[str, str]]:
    """A conversation run's turns: mean TTFT (ms), prompt tokens and cached prompt tokens
    ('-' when the server reports none)."""
    rows = [("Conversations", _number(result.get("num_conversations")))]
    if result.get("turns_not_sent"):
        rows.append(("Turns not sent (after a failed turn)", _number(result["turns_not_sent"])))
    for turn in result["turns"]:
        cached = turn.get("mean_cached_tokens")
        value = (f"{_number(turn.get('mean_ttft_ms'))} ms / "
                 f"{_number(turn.get('mean_input_tokens'), 0)} / "
                 f"{'-' if cached is None else _number(cached, 0)}")
        rows.append((f"Turn {turn['turn']} ({turn['completed']} done)", value))
    return rows


def plain_result(result: dict[str, Any]) -> str:
    """vLLM's text block: `====== title ======`, `label:  value` lines, `---- section ----`."""
    width = 50
    lines = []
    for index, (title, rows) in enumerate(result_sections(result)):
        fill = "=" if index == 0 else "-"
        lines.append(f" {title} ".center(width, fill))
        lines += [f"{label + ':':<40} {value}" for label, value in rows]
    lines.append("=" * width)
    return "\n".join(lines)


SUMMARY_WIDTH = 80


def _latency_table(result: dict[str, Any]) -> Table | None:
    """One row per measured metric: mean, median, std and each pN, in ms."""
    metrics = [m for m in METRIC_TITLES if f"mean_{m}_ms" in result]
    if not metrics:
        return None
    percentiles = sorted({float(match.group(1)) for key in result
                          if (match := re.match(r"^p([0-9.]+)_[a-z0-9]+_ms$", key))})
    table = Table(box=None, padding=(0, 1), header_style="dim")
    table.add_column("latency (ms)")
    for name in ("mean", "median", "std", *(f"p{p:g}" for p in percentiles)):
        table.add_column(name, justify="right")
    for metric in metrics:
        cells = [_number(result.get(f"{stat}_{metric}_ms")) for stat in ("mean", "median", "std")]
        cells += [_number(result.get(f"p{p:g}_{metric}_ms")) for p in percentiles]
        table.add_row(METRIC_TITLES[metric][1], *cells)
    return table


def rich_result(result: dict[str, Any]) -> Group:
    """The end-of-run summary on a terminal: one screen, at most 80 columns: the run's
    numbers, then the latencies as one row per metric (and a conversation's turns)."""
    title = "Serving benchmark" + (f": {result['label']}" if result.get("label") else "")
    table = Table(title=title, title_justify="left", show_header=False, box=None,
                  padding=(0, 2))
    table.add_column("metric")
    table.add_column("value", justify="right", style="bold")
    sections = result_sections(result)
    for label, value in sections[0][1]:
        style = "red" if label == "Failed requests" and value not in ("0", "-") else None
        table.add_row(label, value, style=style)
    parts: list[Any] = [table, ""]
    latency = _latency_table(result)
    if latency is not None:
        parts += [latency, ""]
    for section, rows in sections[1:]:
        if section.startswith("Per Turn"):
            turns = Table(title=section, title_justify="left", show_header=False, box=None,
                          padding=(0, 2))
            turns.add_column("turn")
            turns.add_column("value", justify="right")
            for row in rows:
                turns.add_row(*row)
            parts.append(turns)
    return Group(*parts)


def live_stats(event: dict[str, Any]) -> str:
    """'12.3 req/s  TTFT p50 41 p99 95 ms  E2EL p50 .. ms' from a progress event (the
    rate over the elapsed time; the percentiles over the requests done so far)."""
    parts = []
    elapsed = event.get("elapsed_s")
    if isinstance(elapsed, int | float) and elapsed > 0:
        parts.append(f"{int(event.get('completed', 0)) / elapsed:.1f} req/s")
    for metric in ("ttft", "e2el"):
        p50, p99 = event.get(f"p50_{metric}_ms"), event.get(f"p99_{metric}_ms")
        if isinstance(p50, int | float) and isinstance(p99, int | float):
            parts.append(f"{metric.upper()} p50 {p50:.0f} p99 {p99:.0f} ms")
    return "  ".join(parts)


class BenchDisplay:
    """Renders the events of `vrs-rs bench serve` as they arrive."""

    def __init__(self, console: Console, live: bool) -> None:
        self.console = console
        # the rich display: on a terminal, unless --disable-tqdm
        self.live = live
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.last_plain = 0.0

    def __enter__(self) -> BenchDisplay:
        if self.live:
            self.progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                MofNCompleteColumn(), TextColumn("[red]{task.fields[failed]}"),
                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=self.console,
            )
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def _start_task(self, description: str, total: int | None) -> None:
        if self.progress is None:
            return
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(description, total=total, failed="", stats="")

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "info":
            self.console.print(
                f"[bold]vrs bench[/bold] {event.get('url')}  model [cyan]{event.get('model')}"
                f"[/cyan]  tokenizer {event.get('tokenizer')}", highlight=False, soft_wrap=True)
        elif kind == "phase":
            name, total = event.get("phase"), event.get("total")
            if name == "warmup":
                self._start_task(f"warm-up ({total} requests)", None)
            else:
                self._start_task("benchmark", total)
            if not self.live:
                print(f"{name}: {total} requests", flush=True)
        elif kind == "progress":
            self._progress(event)

    def _progress(self, event: dict[str, Any]) -> None:
        completed, failed = int(event.get("completed", 0)), int(event.get("failed", 0))
        total = int(event.get("total", 0))
        done = completed + failed
        stats = live_stats(event)
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=done, total=total,
                                 failed=f"{failed} failed" if failed else "", stats=stats)
            return
        now = time.monotonic()
        if done == total or now - self.last_plain >= PLAIN_PROGRESS_EVERY_S:
            self.last_plain = now
            print(f"progress: {done}/{total} requests ({failed} failed) {stats}".rstrip(),
                  flush=True)

    def result(self, result: dict[str, Any]) -> None:
        if self.live:
            self.console.print(rich_result(result), width=min(self.console.width,
                                                              SUMMARY_WIDTH))
        else:
            print(plain_result(result), flush=True)
        samples = result.get("error_samples") or []
        if result.get("failed") and samples:
            self.console.print("[yellow]errors of failed requests:[/yellow]")
            for message in samples:
                self.console.print(f"  {message}", highlight=False, markup=False, soft_wrap=True)
