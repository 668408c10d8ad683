"""`vrs bench serve` and `vrs bench sweep`: load-test OpenAI-compatible servers (the load
generator is vrs-rs)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

import cli.bench_options as opt
from cli.bench_vllm import VllmFlagsCommand
from cli.server_options import with_options

app = typer.Typer(
    name="bench",
    help="Benchmarks: measure a running server.",
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.command("serve", cls=VllmFlagsCommand)
@with_options(opt.workload_options, own_first=True)
def serve(
    base_url: Annotated[str | None, typer.Option(
        help="Server address, e.g. http://127.0.0.1:8000 or https://host:8443. "
             "Default: http://HOST:PORT.")] = None,
    host: Annotated[str, typer.Option(help="Server host (when --base-url is not given).")]
        = "127.0.0.1",
    port: Annotated[int, typer.Option(
        min=1, max=65535, help="Server port (when --base-url is not given).")] = 8000,
    max_concurrency: Annotated[int | None, typer.Option(
        min=1, help="Most requests in flight at once. Default: no limit.")] = None,
    request_rate: Annotated[float, typer.Option(
        min=0.0,
        help="Requests per second, Poisson arrivals; inf sends all at once.")] = math.inf,
    result_file: Annotated[Path | None, typer.Option(
        dir_okay=False, help="Write the result JSON (vLLM's key names) to this file.")]
        = None,
    save_result: Annotated[bool, typer.Option(
        "--save-result", help="Write the result JSON under vLLM's file name "
        "({label}-{rate}qps[-concurrencyN]-{model}-{date}.json).")] = False,
    result_dir: Annotated[Path | None, typer.Option(
        file_okay=False, help="With --save-result: the directory of the result file "
                              "(default: the current one).")] = None,
    result_filename: Annotated[str | None, typer.Option(
        help="With --save-result: the result file's name instead of vLLM's.")] = None,
    label: Annotated[str | None, typer.Option(help="A name for this run, kept in the "
                                                      "result.")] = None,
    save_detailed: Annotated[bool, typer.Option(
        "--save-detailed", help="Keep vLLM's per-request lists in the result (input_lens, "
        "output_lens, start_times, ttfts, itls, errors).")] = False,
    plot: Annotated[Path | None, typer.Option(
        file_okay=False, metavar="DIR",
        help="Draw this run's TTFT and ITL distributions into DIR (PNG and a "
             "self-contained HTML report).")] = None,
    disable_tqdm: Annotated[bool, typer.Option(
        "--disable-tqdm", help="No live progress display (plain lines instead).")] = False,
    **shared: Any,
) -> None:
    """Load-test an OpenAI-compatible server and report vLLM's serving metrics.

    Works against any OpenAI-compatible server (vrs serve, vrs serve --frontend python,
    vLLM, SGLang...): completions, chat completions or the Responses API, an Anthropic
    Messages server (--backend anthropic-messages), or embeddings (--backend
    openai-embeddings). The load generator runs in vrs-rs;
    this shows its progress and results. vLLM's `vllm bench serve` flags work under
    their names where vrs does the same (--dataset-name, --input-len, --num-warmups,
    --save-result, --backend vllm...); the others are refused with what vrs offers
    instead.
    """
    from cli.bench_args import BenchOptions, workload
    from cli.bench_runner import run_bench

    run_bench(BenchOptions(
        base_url=base_url, host=host, port=port, max_concurrency=max_concurrency,
        request_rate=request_rate, result_file=result_file, save_result=save_result,
        result_dir=result_dir, result_filename=result_filename, label=label,
        save_detailed=save_detailed, plot=plot, disable_tqdm=disable_tqdm,
        **workload(shared),
    ))


@app.command("sweep", cls=VllmFlagsCommand)
@with_options(opt.workload_options, own_first=True)
def sweep(
    base_url: Annotated[list[str], typer.Option(
        metavar="URL",
        help="A server to sweep, e.g. http://127.0.0.1:8000 (repeat for several; each is "
             "swept in turn).")],
    label: Annotated[list[str] | None, typer.Option(
        metavar="NAME",
        help="A name per --base-url, in the same order (letters, digits, . _ -): the "
             "result directory and the CSV's label. Default: HOST_PORT.")] = None,
    max_concurrency: Annotated[str | None, typer.Option(
        metavar="N,N,...", help="Concurrencies to sweep, e.g. 1,4,16,64 (or one value, "
                                "kept while --request-rate is swept).")] = None,
    request_rate: Annotated[str | None, typer.Option(
        metavar="R,R,...", help="Request rates to sweep (req/s, Poisson arrivals; inf: all "
                                "at once), e.g. 1,2,4 (or one value, kept while "
                                "--max-concurrency is swept).")] = None,
    output_dir: Annotated[Path, typer.Option(
        file_okay=False, metavar="DIR",
        help="Where results go: OUTPUT_DIR/LABEL/c16.json (or r2.5.json) per point and "
             "OUTPUT_DIR/summary.csv.")] = Path("sweep-results"),
    no_resume: Annotated[bool, typer.Option(
        "--no-resume", help="Run every point again; by default a point whose complete "
                            "result file exists is kept.")] = False,
    stop_at_slo: Annotated[list[str] | None, typer.Option(
        metavar="[STAT_]METRIC:MS", help="Stop a server's sweep after the first point past "
        "this latency: ttft:500 (median TTFT > 500 ms), p99_itl:50, mean_tpot:20; METRIC: "
        "ttft, tpot, itl, e2el; STAT: median (default), mean, pN (repeatable).")] = None,
    max_failed_ratio: Annotated[float, typer.Option(
        min=0.0, max=1.0, metavar="RATIO",
        help="Stop a server's sweep after a point where more than this share of the "
             "requests failed.")] = 0.05,
    disable_tqdm: Annotated[bool, typer.Option(
        "--disable-tqdm", help="No live progress display (plain lines instead).")] = False,
    **shared: Any,
) -> None:
    """Run `bench serve` over a list of concurrencies or request rates, on one or more
    servers.

    Each point's result (bench serve's keys) goes to OUTPUT_DIR/LABEL/c16.json (r2.5.json
    for a rate), and OUTPUT_DIR/summary.csv is rebuilt from every result file there, one
    row per point. Run the same command again to resume: points with a complete result
    are kept (--no-resume runs them again). A server's sweep stops early when a point
    cannot run, fails more than --max-failed-ratio of its requests, or passes a
    --stop-at-slo bound. Every other option is bench serve's, applied at each point.
    """
    from cli.bench_args import BenchOptions, workload
    from cli.bench_sweep import SweepOptions, run_sweep

    serve_options = BenchOptions(
        base_url=None, host="127.0.0.1", port=8000, max_concurrency=None,
        request_rate=math.inf, result_file=None, label=None, **workload(shared))
    run_sweep(serve_options, SweepOptions(
        base_urls=base_url, labels=label or [], max_concurrency=max_concurrency,
        request_rate=request_rate, output_dir=output_dir, resume=not no_resume,
        stop_at_slo=stop_at_slo or [], max_failed_ratio=max_failed_ratio,
        disable_tqdm=disable_tqdm,
    ))


@app.command("plot")
def plot(
    results: Annotated[list[Path], typer.Argument(
        metavar="RESULTS...", help="Result JSON files of bench serve / bench sweep, or a "
                                   "sweep's OUTPUT_DIR (every result file below it).")],
    output: Annotated[Path, typer.Option(
        "--output", "-o", file_okay=False, metavar="DIR",
        help="Where sweep.png and report.html go.")] = Path("bench-plots"),
) -> None:
    """Draw a sweep's curves: throughput against concurrency (or rate), request
    throughput and goodput, and TTFT / ITL (median, p99) against throughput, one line per
    server or label. Writes a PNG and a self-contained HTML report."""
    from cli.bench_plot import PlotError, plot_sweep

    try:
        written = plot_sweep(results, output)
    except PlotError as exc:
        raise typer.BadParameter(str(exc), param_hint="'RESULTS...'") from None
    for path in written:
        print(f"wrote {path}")
