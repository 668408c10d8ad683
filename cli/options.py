"""Option declarations shared by the commands that start a server (serve, frontend).

Each user-facing flag is declared once here; the commands' signatures use these
aliases, so help text, defaults, validation and completions have one source.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cli.sizes import parse_size


class Device(StrEnum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class DType(StrEnum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


class LogLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class FrontendKind(StrEnum):
    rust = "rust"
    python = "python"


def size_or_none(value: str | None) -> int | None:
    """Parse a memory size option (``2GiB``) or pass None through."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


Model = Annotated[str | None, typer.Argument(
    help="Model directory (or a hub id already in the local HF cache). "
         "Default: the built-in demo model (tiny, random weights).")]
Host = Annotated[str, typer.Option(help="Address to bind the HTTP server to.")]
Port = Annotated[int, typer.Option(min=0, max=65535, help="HTTP port.")]
ServedModelName = Annotated[str | None, typer.Option(
    help="Model name clients send and /v1/models lists. Default: MODEL.")]
Mock = Annotated[bool, typer.Option(
    "--mock", help="Run the mock engine (instant prefill, random tokens): measures the "
                   "frontend alone; only MODEL's tokenizer and config are read.")]
MaxModelLen = Annotated[int | None, typer.Option(
    min=1, help="Context length limit (prompt + output). Default: the model's.")]
LogLevelOpt = Annotated[LogLevel, typer.Option(help="Log verbosity.")]
ShutdownTimeout = Annotated[float, typer.Option(
    min=0, help="Seconds to let in-flight requests finish on SIGINT/SIGTERM.")]
ChatTemplate = Annotated[Path | None, typer.Option(
    exists=True, dir_okay=False, help="Jinja chat template file overriding the model's.")]
DeviceOpt = Annotated[Device, typer.Option(help="Where the engine runs.")]
DTypeOpt = Annotated[DType, typer.Option(
    help="Weight and activation dtype (auto: float32 on CPU, bfloat16 on CUDA).")]
BlockSize = Annotated[int, typer.Option(help="Tokens per KV-cache block.")]
MaxNumSeqs = Annotated[int, typer.Option(min=1, help="Most requests in one engine step.")]
MaxNumBatchedTokens = Annotated[int, typer.Option(
    min=1, help="Token budget of one engine step (long prompts are chunked).")]
KvCacheMemory = Annotated[str | None, typer.Option(
    help="KV cache size, e.g. 2GiB. Default: sized for the device.")]
GpuMemoryUtilization = Annotated[float, typer.Option(
    min=0.01, max=1.0, help="On CUDA: fraction of GPU memory the engine may use.")]
EnablePrefixCaching = Annotated[bool, typer.Option(
    "--enable-prefix-caching/--no-enable-prefix-caching",
    help="Reuse KV blocks of shared prompt prefixes.")]
Seed = Annotated[int, typer.Option(help="Engine random seed.")]
MockStepDelayMs = Annotated[float, typer.Option(
    min=0, help="Mock engine: sleep per step, to imitate a model's step time.")]
Frontend = Annotated[FrontendKind, typer.Option(
    help="rust: vrs-rs serves HTTP (default). python: the Python (uvicorn) frontend, "
         "the baseline.")]
