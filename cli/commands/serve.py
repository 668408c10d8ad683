"""`vrs serve`: an OpenAI-compatible server for MODEL (Rust frontend + Python engine)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from cli.serve_args import ServeOptions, build_args
from cli.sizes import parse_size

console = Console(stderr=True)


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DType(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def _size(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def serve(
    model: Annotated[Optional[str], typer.Argument(
        help="Model directory (or a hub id already in the local HF cache). "
             "Default: the built-in demo model (tiny, random weights).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind the HTTP server to.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="HTTP port.")] = 8000,
    served_model_name: Annotated[Optional[str], typer.Option(
        help="Model name clients send and /v1/models lists. Default: MODEL.")] = None,
    mock: Annotated[bool, typer.Option(
        "--mock", help="Run the mock engine (instant prefill, random tokens): measures the "
                       "frontend alone; only MODEL's tokenizer and config are read.")] = False,
    max_model_len: Annotated[Optional[int], typer.Option(
        min=1, help="Context length limit (prompt + output). Default: the model's.")] = None,
    log_level: Annotated[LogLevel, typer.Option(help="Log verbosity.")] = LogLevel.info,
    shutdown_timeout: Annotated[float, typer.Option(
        min=0, help="Seconds to let in-flight requests finish on SIGINT/SIGTERM.")] = 30.0,
    chat_template: Annotated[Optional[Path], typer.Option(
        exists=True, dir_okay=False, help="Jinja chat template file overriding the model's.")]
        = None,
    device: Annotated[Device, typer.Option(help="Where the engine runs.")] = Device.auto,
    dtype: Annotated[DType, typer.Option(
        help="Weight and activation dtype (auto: float32 on CPU, bfloat16 on CUDA).")]
        = DType.auto,
    block_size: Annotated[int, typer.Option(help="Tokens per KV-cache block.")] = 16,
    max_num_seqs: Annotated[int, typer.Option(
        min=1, help="Most requests in one engine step.")] = 256,
    max_num_batched_tokens: Annotated[int, typer.Option(
        min=1, help="Token budget of one engine step (long prompts are chunked).")] = 2048,
    kv_cache_memory: Annotated[Optional[str], typer.Option(
        help="KV cache size, e.g. 2GiB. Default: sized for the device.")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option(
        min=0.01, max=1.0, help="On CUDA: fraction of GPU memory the engine may use.")] = 0.9,
    enable_prefix_caching: Annotated[bool, typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="Reuse KV blocks of shared prompt prefixes.")] = True,
    seed: Annotated[int, typer.Option(help="Engine random seed.")] = 0,
    mock_step_delay_ms: Annotated[float, typer.Option(
        min=0, help="Mock engine: sleep per step, to imitate a model's step time.")] = 0.0,
) -> None:
    """Serve MODEL over an OpenAI-compatible HTTP API.

    The Rust frontend (vrs-rs) binds the port and spawns a headless Python engine.
    """
    options = ServeOptions(
        model=model, host=host, port=port, served_model_name=served_model_name, mock=mock,
        max_model_len=max_model_len, log_level=log_level.value,
        shutdown_timeout=shutdown_timeout, chat_template=chat_template, device=device.value,
        dtype=dtype.value, block_size=block_size, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        kv_cache_memory_bytes=_size(kv_cache_memory),
        gpu_memory_utilization=gpu_memory_utilization,
        enable_prefix_caching=enable_prefix_caching, seed=seed,
        mock_step_delay_ms=mock_step_delay_ms,
    )
    from cli.binary import find_rust_frontend
    from cli.launch import exec_rust
    from cli.serve_args import print_banner

    binary = find_rust_frontend()
    args = build_args(options, console)
    print_banner(args, console)
    exec_rust(binary, "serve", args)
