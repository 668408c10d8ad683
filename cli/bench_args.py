"""Turning `vrs bench serve` options into the args-json that `vrs-rs bench serve` takes.

The typer command only declares options; this module parses the list-like strings and
builds the one dict the Rust load generator reads (keys in docs/internals.md). Checks of
values (metric names, ranges) live in Rust, next to the code that uses them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer


@dataclass
class BenchOptions:
    base_url: str | None
    host: str
    port: int
    endpoint: str | None
    backend: str
    model: str | None
    tokenizer: Path | None
    dataset: str
    random_input_len: int
    random_output_len: int
    random_range_ratio: float
    seed: int
    num_prompts: int
    max_concurrency: int | None
    request_rate: float
    ignore_eos: bool
    warmup_requests: int
    # None: every metric the backend measures (chosen in Rust)
    percentile_metrics: str | None
    metric_percentiles: str
    goodput: list[str]
    result_file: Path | None
    label: str | None
    save_result: bool = False
    result_dir: Path | None = None
    result_filename: str | None = None
    insecure: bool = False
    ca_cert: Path | None = None
    dataset_path: Path | None = None
    sharegpt_output_len: int | None = None
    custom_output_len: int = 256
    skip_chat_template: bool = False
    # sonnet: input_len, output_len, prefix_len (vLLM's defaults)
    sonnet: tuple[int, int, int] = (550, 150, 200)
    random_prefix_len: int = 0
    # prefix_repetition: prefix_len, suffix_len, num_prefixes, output_len (vLLM's defaults)
    prefix_repetition: tuple[int, int, int, int] = (256, 256, 10, 128)
    conversation_output_len: int | None = None
    conversation_think_time: float = 0.0
    save_detailed: bool = False
    # draw the run's distributions here (needs the per-request lists)
    plot: Path | None = None
    disable_tqdm: bool = False


def workload(shared: dict[str, Any]) -> dict[str, Any]:
    """BenchOptions' fields from the options of ``cli.bench_options.workload_options``
    (as typer passes them: enums, the grouped dataset lengths)."""
    values = dict(shared)
    values["backend"] = values["backend"].value
    values["dataset"] = values["dataset"].value
    values["goodput"] = values["goodput"] or []
    values["sonnet"] = tuple(values.pop(f"sonnet_{k}_len") for k in ("input", "output", "prefix"))
    values["prefix_repetition"] = tuple(values.pop(f"prefix_repetition_{k}") for k in (
        "prefix_len", "suffix_len", "num_prefixes", "output_len"))
    return values


def _items(text: str) -> list[str]:
    return [item for item in re.split(r"[,\s]+", text.strip()) if item]


def parse_percentiles(text: str) -> list[float]:
    """'50,90,99' -> [50.0, 90.0, 99.0]."""
    try:
        return [float(item) for item in _items(text)]
    except ValueError:
        raise typer.BadParameter(f"expected numbers like 50,90,99; got {text!r}",
                                 param_hint="'--metric-percentiles'") from None


def parse_goodput(values: list[str]) -> dict[str, float] | None:
    """['ttft:500 tpot:50'] or ['ttft:500', 'tpot:50'] -> {'ttft': 500.0, 'tpot': 50.0}."""
    slos: dict[str, float] = {}
    for item in (i for value in values for i in _items(value)):
        name, sep, ms = item.partition(":")
        try:
            if not sep:
                raise ValueError(item)
            slos[name.strip()] = float(ms)
        except ValueError:
            raise typer.BadParameter(f"expected NAME:MILLISECONDS like ttft:500; got {item!r}",
                                     param_hint="'--goodput'") from None
    return slos or None


def base_url(options: BenchOptions) -> str:
    if options.base_url:
        return options.base_url.rstrip("/")
    host = f"[{options.host}]" if ":" in options.host else options.host
    return f"http://{host}:{options.port}"


def build_args(options: BenchOptions) -> dict[str, Any]:
    """The args-json dict for `vrs-rs bench serve`."""
    return {
        "base_url": base_url(options),
        "endpoint": options.endpoint,
        "backend": options.backend,
        "model": options.model,
        "tokenizer": str(options.tokenizer.resolve()) if options.tokenizer else None,
        "dataset": options.dataset,
        "dataset_path": str(options.dataset_path.resolve()) if options.dataset_path else None,
        "sharegpt_output_len": options.sharegpt_output_len,
        "custom_output_len": options.custom_output_len,
        "skip_chat_template": options.skip_chat_template,
        **dict(zip(("sonnet_input_len", "sonnet_output_len", "sonnet_prefix_len"),
                   options.sonnet, strict=True)),
        **dict(zip(("prefix_repetition_prefix_len", "prefix_repetition_suffix_len",
                    "prefix_repetition_num_prefixes", "prefix_repetition_output_len"),
                   options.prefix_repetition, strict=True)),
        "conversation_output_len": options.conversation_output_len,
        "conversation_think_time": options.conversation_think_time,
        "random_input_len": options.random_input_len,
        "random_output_len": options.random_output_len,
        "random_range_ratio": options.random_range_ratio,
        "random_prefix_len": options.random_prefix_len,
        "seed": options.seed,
        "num_prompts": options.num_prompts,
        "max_concurrency": options.max_concurrency,
        # JSON has no infinity: null means "all at once".
        "request_rate": None if math.isinf(options.request_rate) else options.request_rate,
        "ignore_eos": options.ignore_eos,
        "save_detailed": options.save_detailed or options.plot is not None,
        "warmup_requests": options.warmup_requests,
        "percentile_metrics": (None if options.percentile_metrics is None
                               else _items(options.percentile_metrics)),
        "metric_percentiles": parse_percentiles(options.metric_percentiles),
        "goodput": parse_goodput(options.goodput),
        "label": options.label,
        "insecure": options.insecure,
        "ca_cert": str(options.ca_cert.resolve()) if options.ca_cert else None,
    }


def check_result_options(options: BenchOptions) -> None:
    """--result-file, or vLLM's --save-result with its --result-dir/--result-filename;
    --plot for a run that measures TTFT and ITL."""
    if options.plot is not None and options.backend == "openai-embeddings":
        raise typer.BadParameter(
            "draws TTFT and ITL, which an embeddings run does not measure (its E2EL is in "
            "the result; --save-detailed keeps the per-request lists)", param_hint="'--plot'")
    if options.result_file is not None and options.save_result:
        raise typer.BadParameter("give --result-file or --save-result, not both",
                                 param_hint="'--result-file'")
    if not options.save_result:
        for flag, value in (("--result-dir", options.result_dir),
                            ("--result-filename", options.result_filename)):
            if value is not None:
                raise typer.BadParameter(
                    "takes effect with --save-result (as in vLLM); add --save-result",
                    param_hint=f"'{flag}'")


def result_path(options: BenchOptions, result: dict[str, Any], date: str) -> Path | None:
    """Where the result goes: --result-file, else vLLM's --save-result naming."""
    from cli.bench_vllm import result_filename

    if options.result_file is not None:
        return options.result_file
    if not options.save_result:
        return None
    name = options.result_filename or result_filename(
        options.label, options.backend, options.request_rate, options.max_concurrency,
        str(result.get("model") or "model"), date)
    return (options.result_dir or Path(".")) / name
