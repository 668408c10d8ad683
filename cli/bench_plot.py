"""Figures of `vrs bench` results: `vrs bench plot` (a sweep's curves, one line per server
or label) and `vrs bench serve --plot` (one run's TTFT and ITL distributions), each as a
PNG and a self-contained HTML report (cli/bench_report.py).

matplotlib draws them: it writes PNG itself (plotly needs kaleido, a bundled Chromium,
for a PNG), and a PNG embedded in the HTML as a data URL keeps the report one file that
opens offline, with no script to load.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from cli.bench_report import write_report


class PlotError(ValueError):
    """A result file that cannot be plotted; the message names it."""


@dataclass
class Run:
    """One result file: its label (the result's `label`, else its directory's name in a
    sweep's OUTPUT_DIR/LABEL/c16.json layout, else the base URL) and its keys."""

    label: str
    path: Path
    result: dict[str, Any]


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlotError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise PlotError(f"{path} line {exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(value, dict) or "completed" not in value:
        raise PlotError(f"{path}: not a `vrs bench serve` result (no \"completed\" key)")
    return value


def load_runs(paths: list[Path]) -> list[Run]:
    """The results of `paths`: result JSON files, or directories (a sweep's OUTPUT_DIR)
    whose *.json files below are read (summary.json and other lists are skipped)."""
    runs = []
    for given in paths:
        if given.is_dir():
            files = sorted(p for p in given.rglob("*.json") if p.name != "summary.json")
            if not files:
                raise PlotError(f"{given}: no result JSON files in this directory")
        elif given.is_file():
            files = [given]
        else:
            raise PlotError(f"{given}: no such file or directory")
        for path in files:
            result = _read(path)
            label = result.get("label") or (path.parent.name if given.is_dir()
                                            and path.parent != given else None)
            runs.append(Run(str(label or result.get("base_url") or path.stem), path, result))
    return runs


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if value == "inf":
        return math.inf
    return None


def sweep_axis(runs: list[Run]) -> tuple[str, str]:
    """(result key, axis title) of what the sweep varied: the concurrency when it takes
    more than one value, else the request rate when that does; for runs that vary
    neither, whichever all of them have (a limit, a finite rate)."""
    concurrency = ("max_concurrency", "Max concurrency (requests in flight)")
    rate = ("request_rate", "Request rate (req/s)")
    concurrencies = {_number(r.result.get("max_concurrency")) for r in runs}
    rates = {_number(r.result.get("request_rate")) for r in runs}
    if None not in concurrencies and len(concurrencies) > 1:
        return concurrency
    finite_rates = None not in rates and math.inf not in rates
    if finite_rates and len(rates) > 1:
        return rate
    if None not in concurrencies:
        return concurrency
    if finite_rates:
        return rate
    raise PlotError("the results have neither a max_concurrency nor a finite request_rate "
                    "to draw a curve over (give the files of a sweep)")


def _upper_percentile(result: dict[str, Any], metric: str) -> str | None:
    """The highest pN_<metric>_ms key of a result (p99 by default)."""
    found = []
    for key in result:
        match = re.fullmatch(rf"p([0-9.]+)_{metric}_ms", key)
        if match:
            found.append((float(match.group(1)), key))
    return max(found)[1] if found else None


def _by_label(runs: list[Run], x_key: str) -> dict[str, list[Run]]:
    lines: dict[str, list[Run]] = {}
    for run in runs:
        if _number(run.result.get(x_key)) is not None:
            lines.setdefault(run.label, []).append(run)
    for line in lines.values():
        line.sort(key=lambda r: _number(r.result[x_key]) or 0.0)
    return lines


def _values(line: list[Run], key: str) -> list[float]:
    """`key` of each run as a float (NaN where missing: a gap in the line)."""
    return [math.nan if (v := _number(r.result.get(key))) is None else v for r in line]


def _plain_ticks(axis: Axes, values: list[float]) -> None:
    """A log2 x axis labelled with the swept values themselves (1, 4, 16, 64)."""
    axis.set_xscale("log", base=2)
    axis.set_xticks(values)
    axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _point_name(run: Run, x_key: str) -> str:
    value = _number(run.result.get(x_key))
    text = "inf" if value == math.inf else f"{value:g}"
    return f"c{text}" if x_key == "max_concurrency" else f"{text}/s"


def _latency_panel(axis: Axes, lines: dict[str, list[Run]], metric: str, title: str,
                   colors: dict[str, str], x_key: str) -> None:
    """Median (solid) and upper percentile (dashed) of `metric` against output
    throughput: the latency-throughput curve; each median point named by its load."""
    for label, line in lines.items():
        xs = _values(line, "output_throughput")
        med = _values(line, f"median_{metric}_ms")
        axis.plot(xs, med, "o-", color=colors[label], label=f"{label} median")
        for run, x, y in zip(line, xs, med, strict=True):
            if not (math.isnan(x) or math.isnan(y)):
                axis.annotate(_point_name(run, x_key), (x, y), textcoords="offset points",
                              xytext=(4, -10), fontsize=7, color=colors[label])
        upper = _upper_percentile(line[0].result, metric)
        if upper is not None:
            ys = _values(line, upper)
            name = upper.split("_")[0]
            axis.plot(xs, ys, "s--", color=colors[label], alpha=0.7, label=f"{label} {name}")
    measured = [v for line in lines.values() for v in _values(line, f"median_{metric}_ms")
                if not math.isnan(v)]
    if not any(measured):
        axis.text(0.5, 0.5, f"no {metric.upper()} measured: every answer came in one "
                  "chunk", transform=axis.transAxes, ha="center", va="center", color="gray")
    axis.set_title(title)
    axis.set_xlabel("Output throughput (tok/s)")
    axis.set_ylabel(f"{metric.upper()} (ms)")
    axis.set_ylim(bottom=0)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)


def sweep_figure(runs: list[Run]) -> Figure:
    """Four panels: output throughput against the swept value; request throughput and
    goodput against it; TTFT and ITL (median, p99) against output throughput."""
    x_key, x_title = sweep_axis(runs)
    lines = _by_label(runs, x_key)
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    colors = {label: palette[i % len(palette)] for i, label in enumerate(lines)}
    figure = Figure(figsize=(13, 9.5), layout="constrained")
    (tput, good), (ttft, itl) = figure.subplots(2, 2)
    xs_all = sorted({_number(r.result[x_key]) or 0.0 for line in lines.values()
                     for r in line} - {math.inf})
    for label, line in lines.items():
        xs = _values(line, x_key)
        tput.plot(xs, _values(line, "output_throughput"), "o-",
                  color=colors[label], label=label)
        good.plot(xs, _values(line, "request_throughput"), "o-",
                  color=colors[label], label=f"{label} throughput")
        if any("request_goodput" in r.result for r in line):
            good.plot(xs, _values(line, "request_goodput"), "^--",
                      color=colors[label], alpha=0.7, label=f"{label} goodput")
    has_goodput = any("request_goodput" in r.result for r in runs)
    good_title = ("Request throughput and goodput (requests meeting the SLOs)" if has_goodput
                  else "Request throughput")
    for axis, title, unit in ((tput, "Output token throughput", "Output throughput (tok/s)"),
                              (good, good_title, "Requests per second (req/s)")):
        if x_key == "max_concurrency" and xs_all and min(xs_all) > 0:
            _plain_ticks(axis, xs_all)
        axis.set_title(title)
        axis.set_xlabel(x_title)
        axis.set_ylabel(unit)
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    _latency_panel(ttft, lines, "ttft", "Time to first token vs throughput", colors,
                   x_key)
    _latency_panel(itl, lines, "itl", "Inter-token latency vs throughput", colors,
                   x_key)
    swept = "concurrency" if x_key == "max_concurrency" else "request rate"
    figure.suptitle(f"vrs bench sweep over {swept}: {', '.join(lines)} "
                    f"({len(runs)} runs)", fontsize=13)
    return figure


def _histogram(axis: Axes, values: list[float], title: str, label: str) -> None:
    values = sorted(values)
    axis.hist(values, bins=min(50, max(5, len(values) // 4)), color="#1f77b4", alpha=0.8)
    for p, style in ((50, "-"), (99, "--")):
        rank = p / 100 * (len(values) - 1)  # numpy's linear percentile, as the result's
        low = math.floor(rank)
        high = min(low + 1, len(values) - 1)
        at = values[low] + (values[high] - values[low]) * (rank - low)
        axis.axvline(at, color="#d62728", linestyle=style, label=f"p{p} {at:.1f} ms")
    axis.set_title(title)
    axis.set_xlabel(label)
    axis.set_ylabel("Count")
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)


def run_figure(result: dict[str, Any]) -> Figure:
    """One run's TTFT (per request) and ITL (per gap between chunks) histograms, from
    its per-request lists (`ttfts`, `itls`, `errors`: `--save-detailed`'s keys)."""
    if "ttfts" not in result or "itls" not in result:
        raise PlotError("the result has no per-request lists (ttfts, itls): run bench "
                        "serve with --plot or --save-detailed")
    ok = [not e for e in result.get("errors") or [""] * len(result["ttfts"])]
    ttfts = [t * 1000 for t, good in zip(result["ttfts"], ok, strict=True) if good]
    itls = [g * 1000 for gaps, good in zip(result["itls"], ok, strict=True) if good
            for g in gaps]
    figure = Figure(figsize=(12, 4.8), layout="constrained")
    first, second = figure.subplots(1, 2)
    if ttfts:
        _histogram(first, ttfts, f"TTFT of {len(ttfts)} requests", "TTFT (ms)")
    if itls:
        _histogram(second, itls, f"ITL: {len(itls)} gaps between chunks", "ITL (ms)")
    model = str(result.get("model") or "run").rstrip("/").rsplit("/", 1)[-1]
    name = result.get("label") or model
    figure.suptitle(f"vrs bench serve: {name}", fontsize=13)
    return figure


def _table(runs: list[Run], x_key: str) -> tuple[list[str], list[list[str]]]:
    keys = ["output_throughput", "request_throughput", "request_goodput", "median_ttft_ms",
            "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "completed", "failed"]
    keys = [k for k in keys if any(k in r.result for r in runs)]
    rows = []
    for run in sorted(runs, key=lambda r: (r.label, _number(r.result.get(x_key)) or 0.0)):
        cells = [run.label, str(run.result.get(x_key))]
        for key in keys:
            value = run.result.get(key)
            cells.append(f"{value:.2f}" if isinstance(value, float) else str(value))
        rows.append(cells)
    return ["label", x_key, *keys], rows


def plot_sweep(paths: list[Path], output: Path) -> list[Path]:
    """`vrs bench plot`: sweep.png and report.html in `output`; returns their paths."""
    runs = load_runs(paths)
    x_key, _ = sweep_axis(runs)
    header, rows = _table(runs, x_key)
    return write_report(output, "vrs bench sweep", [("sweep", sweep_figure(runs))],
                        header, rows)


def plot_run(result: dict[str, Any], output: Path) -> list[Path]:
    """`vrs bench serve --plot`: distributions.png and report.html in `output`."""
    keys = ["completed", "failed", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
            "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "output_throughput"]
    row = [str(result.get(k)) if not isinstance(result.get(k), float)
           else f"{result[k]:.2f}" for k in keys]
    return write_report(output, "vrs bench serve", [("distributions", run_figure(result))],
                        keys, [row])
