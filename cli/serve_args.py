"""Turning `vrs serve` options into the args-json that vrs-rs (or the Python frontend) takes.

The typer command only declares options; this module resolves the model and builds
the one map both frontends read: a ``server.args_json.ServeArgs`` (the keys' one
declaration; docs/internals.md), encoded.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from cli.http_args import HttpOptions, detailed_traces, traces_endpoint
from server.args_json import ServeArgs, encode


class ModelNotFoundError(ValueError):
    """MODEL is neither a local directory nor a model in the local Hugging Face cache."""


@dataclass
class ServeOptions:
    model: str | None
    host: str
    port: int
    served_model_name: str | None
    mock: bool
    max_model_len: int | None
    log_level: str
    shutdown_timeout: float
    chat_template: Path | None
    device: str
    dtype: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_cache_memory_bytes: int | None
    gpu_memory_utilization: float
    enable_prefix_caching: bool
    seed: int
    mock_step_delay_ms: float
    structured_outputs_compile_timeout: float = 5.0
    enforce_eager: bool = False
    scheduling_policy: str = "fcfs"
    runner: str = "auto"
    convert: str = "auto"
    model_impl: str = "auto"
    tensor_parallel_size: int = 1
    chat_template_content_format: str = "auto"
    mock_replies: Path | None = None
    api_key: str | None = None
    max_request_body: int = 32 * 1024 * 1024
    max_concurrent_requests: int | None = None
    max_batch_prompts: int = 256
    request_timeout: float | None = None
    tool_call_parser: str = "auto"
    reasoning_parser: str = "auto"
    data_parallel_size: int = 1
    data_parallel_size_local: int | None = None
    data_parallel_address: str = "127.0.0.1"
    data_parallel_rpc_port: int = 29550
    headless: bool = False
    handshake_address: str | None = None
    engine_index: int = 0
    tokenizer: str | None = None
    trust_remote_code: bool = False
    sse_keep_alive_interval: float | None = None
    max_num_queued_reqs: int | None = None
    max_num_queued_tokens: int | None = None
    max_queue_wait: float | None = None
    otlp_traces_endpoint: str | None = None
    collect_detailed_traces: str | None = None
    enable_responses_store: bool = False
    responses_store_max_entries: int = 1000
    enable_tokenizer_info_endpoint: bool = False
    engine: str = "vrs"
    vllm_python: str | None = None
    vllm_engine_command: str | None = None
    vllm_engine_args: list[str] = field(default_factory=list)
    http: HttpOptions = field(default_factory=HttpOptions)

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> ServeOptions:
        """From a command's parameters (its ``locals()``): enums to values, sizes parsed.

        Parameters that are not ServeOptions fields (e.g. ``frontend``) are ignored.
        """
        from dataclasses import fields
        from enum import Enum

        from cli.options import size_or_none

        values: dict[str, Any] = {"model": pick_model(params["model"],
                                                      params.get("model_option")),
                                  "http": HttpOptions.from_params(params)}
        for f in fields(cls):
            if f.name in ("model", "http"):
                continue
            if f.name == "kv_cache_memory_bytes":
                values[f.name] = size_or_none(params["kv_cache_memory"])
                continue
            if f.name not in params:
                continue  # a newer option the command does not declare: its default
            value = params[f.name]
            if f.name == "max_request_body":
                value = size_or_none(value)
            values[f.name] = value.value if isinstance(value, Enum) else value
        return cls(**values)


def pick_model(argument: str | None, option: str | None) -> str | None:
    """MODEL from the argument or ``--model`` (vLLM's spelling); both must agree."""
    if argument is not None and option is not None and argument != option:
        raise typer.BadParameter(f"MODEL {argument!r} and --model {option!r} differ; give "
                                 "the model once", param_hint="'--model'")
    return argument if argument is not None else option


def resolve_model(model: str | None, console: Console) -> tuple[Path, str]:
    """(model directory, default served name). No MODEL means the built-in demo model."""
    if model is None:
        from engine.mock.demo_model import DEMO_MODEL_NAME, demo_model_dir, ensure_demo_model

        if not (demo_model_dir() / "model.safetensors").exists():
            with console.status("building the demo model (first run only)…"):
                path = ensure_demo_model()
        else:
            path = ensure_demo_model()
        return path, DEMO_MODEL_NAME
    local = Path(model).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelNotFoundError(f"{local} has no config.json; is it a Hugging Face model dir?")
        return local.resolve(), model
    if local.exists():
        raise ModelNotFoundError(f"MODEL {model} is a file; pass a model directory")
    return _from_hf_cache(model, "MODEL", "a local model directory"), model


def resolve_tokenizer(tokenizer: str | None) -> Path | None:
    """The ``--tokenizer`` directory (a local one, or a hub id in the HF cache); None: MODEL's."""
    if tokenizer is None:
        return None
    local = Path(tokenizer).expanduser()
    if local.is_dir():
        if not (local / "tokenizer.json").is_file():
            raise ModelNotFoundError(f"--tokenizer {local} has no tokenizer.json (vrs needs a "
                                     "fast tokenizer)")
        return local.resolve()
    if local.exists():
        raise ModelNotFoundError(f"--tokenizer {tokenizer} is a file; pass the directory "
                                 "that holds tokenizer.json")
    return _from_hf_cache(tokenizer, "--tokenizer", "a local tokenizer directory")


def _looks_like_hub_id(name: str) -> bool:
    """ORG/NAME or NAME: what `hf download` takes (a path has more, or other, parts)."""
    parts = name.split("/")
    return (len(parts) <= 2 and all(parts) and not name.startswith((".", "~"))
            and all(c.isalnum() or c in "-_." for part in parts for c in part))


def _from_hf_cache(name: str, what: str, local_kind: str) -> Path:
    """A hub id resolves through the local HF cache only; nothing is downloaded."""
    if not _looks_like_hub_id(name):
        raise ModelNotFoundError(f"{what} {name} is not a local directory (no such directory) "
                                 "and not a hub id ORG/NAME")
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:  # not cached, or not a valid id: one clear message
        raise ModelNotFoundError(
            f"{what} {name!r} is not a local directory and is not in the local Hugging Face "
            f"cache, and vrs never downloads. Download it first with `hf download {name}` "
            f"(then run this command again), or pass {local_kind}."
        ) from exc


def build_args(options: ServeOptions, console: Console) -> dict[str, Any]:
    """The args-json dict for `vrs-rs serve` and the Python frontend: every key of
    ``server.args_json.ServeArgs``, null where unset."""
    model_dir, default_name = resolve_model(options.model, console)
    tokenizer_dir = resolve_tokenizer(options.tokenizer)
    served = options.served_model_name or default_name
    engine_config: dict[str, Any] = {
        "model": str(model_dir),
        "served_model_name": served,
        "mock": options.mock,
        "device": options.device,
        "dtype": options.dtype,
        "max_model_len": options.max_model_len,
        "block_size": options.block_size,
        "max_num_seqs": options.max_num_seqs,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "scheduling_policy": options.scheduling_policy,
        "kv_cache_memory_bytes": options.kv_cache_memory_bytes,
        "gpu_memory_utilization": options.gpu_memory_utilization,
        "enable_prefix_caching": options.enable_prefix_caching,
        "seed": options.seed,
        "enforce_eager": options.enforce_eager,
        "runner": options.runner,
        "convert": options.convert,
        "model_impl": options.model_impl,
        "tensor_parallel_size": options.tensor_parallel_size,
        "mock_step_delay_ms": options.mock_step_delay_ms,
        "mock_replies": _mock_replies(options.mock_replies),
        "structured_outputs_compile_timeout": options.structured_outputs_compile_timeout,
        # Grammars are built from, and mock replies encoded with, the frontend's tokenizer.
        "tokenizer": str(tokenizer_dir) if tokenizer_dir else None,
        "log_level": options.log_level,
    }
    from engine.config import ConfigError, config_from_map
    from server.parsers.select import check_settings

    config_from_map(engine_config)  # refuse bad values here, before anything starts
    try:
        check_settings(options.tool_call_parser, options.reasoning_parser)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    written = encode(ServeArgs(
        model=str(model_dir),
        served_model_name=served,
        host=options.host,
        port=options.port,
        log_level=options.log_level,
        shutdown_timeout=options.shutdown_timeout,
        python_executable=sys.executable,
        chat_template=str(options.chat_template.resolve()) if options.chat_template else None,
        chat_template_content_format=options.chat_template_content_format,
        tokenizer=str(tokenizer_dir) if tokenizer_dir else None,
        engine_config=engine_config,
        api_key=None,  # travels as $VRS_API_KEY (see pass_api_key), not on a command line
        max_request_body=options.max_request_body,
        max_concurrent_requests=options.max_concurrent_requests,
        max_batch_prompts=options.max_batch_prompts,
        request_timeout=options.request_timeout,
        tool_call_parser=options.tool_call_parser,
        reasoning_parser=options.reasoning_parser,
        scheduling_policy=options.scheduling_policy,
        data_parallel_size=options.data_parallel_size,
        data_parallel_size_local=options.data_parallel_size_local,
        data_parallel_address=options.data_parallel_address,
        data_parallel_rpc_port=options.data_parallel_rpc_port,
        http=options.http.to_args(),
        sse_keep_alive_interval=options.sse_keep_alive_interval,
        max_num_queued_reqs=options.max_num_queued_reqs,
        max_num_queued_tokens=options.max_num_queued_tokens,
        max_queue_wait=options.max_queue_wait,
        otlp_traces_endpoint=traces_endpoint(options.otlp_traces_endpoint),
        collect_detailed_traces=detailed_traces(options.collect_detailed_traces,
                                                options.otlp_traces_endpoint),
        enable_responses_store=responses_store(options.enable_responses_store),
        responses_store_max_entries=options.responses_store_max_entries,
        enable_tokenizer_info_endpoint=options.enable_tokenizer_info_endpoint,
    ))
    if options.engine != "vllm":
        return written
    from cli.vllm_engine import with_vllm_engine

    return with_vllm_engine(options, written)


STORE_ENV = "VLLM_ENABLE_RESPONSES_API_STORE"


def responses_store(flag: bool) -> bool:
    """``--enable-responses-store``, or vLLM's ``VLLM_ENABLE_RESPONSES_API_STORE`` set to a
    non-zero integer (as vLLM reads it)."""
    from engine.config import ConfigError

    raw = os.environ.get(STORE_ENV, "0").strip() or "0"
    try:
        return flag or int(raw) != 0
    except ValueError:
        raise ConfigError(f"{STORE_ENV} must be an integer (0 or 1), got {raw!r}") from None


def _mock_replies(path: Path | None) -> list[dict[str, Any]]:
    """The scripted mock replies of a JSON file (see engine/mock/replies.py)."""
    if path is None:
        return []
    from engine.config import ConfigError

    try:
        replies = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--mock-replies {path}: {exc}") from None
    if not isinstance(replies, list) or not all(
            isinstance(r, dict) and isinstance(r.get("when"), str)
            and isinstance(r.get("reply"), str) for r in replies):
        raise ConfigError(f"--mock-replies {path}: expected a JSON list of "
                          '{"when": text, "reply": text} (optionally "cuts": [offset, ...])')
    return replies


def pass_api_key(options: ServeOptions) -> None:
    """The API key goes to the frontend (vrs-rs or Python, here or a child) as
    $VRS_API_KEY, so it never shows on a command line."""
    if options.api_key:
        os.environ["VRS_API_KEY"] = options.api_key


def print_banner(args: dict[str, Any], console: Console) -> None:
    """One log line on what is about to start (the address is announced by the server
    once it listens); the demo model says its weights are random."""
    from cli.launch import cli_log
    from engine.mock.demo_model import DEMO_MODEL_NAME

    engine = ("vLLM's engine" if args["engine"] == "vllm" else
              "mock engine" if args["engine_config"]["mock"] else "engine")
    log = cli_log()
    log.info("starting %s (%s)", args["served_model_name"], engine)
    if args["served_model_name"] == DEMO_MODEL_NAME:
        log.warning("the built-in demo model has random weights: it generates nonsense, "
                    "but every code path is real")


def note_trust_remote_code(given: bool, console: Console) -> None:
    """vLLM's --trust-remote-code is accepted; say once that it changes nothing here."""
    if given:
        console.print("[yellow]note:[/yellow] --trust-remote-code changes nothing: vrs never "
                      "runs code from a model repository (models that need it are refused).")


def run_serve(options: ServeOptions, frontend: str, console: Console) -> None:
    """Resolve, validate and hand over to the chosen frontend (does not return on Rust)."""
    from cli.launch import exec_rust
    from engine.config import ConfigError

    if options.headless:
        exec_headless_engine(options)
        return
    local = options.data_parallel_size_local
    if local is not None and local > options.data_parallel_size:
        raise ConfigError(f"--data-parallel-size-local {local} exceeds --data-parallel-size "
                          f"{options.data_parallel_size}")
    if frontend == "python" and local is not None and local < options.data_parallel_size:
        raise ConfigError("--data-parallel-size-local (engines on other hosts) needs the Rust "
                          "frontend; drop --frontend python")
    if frontend == "rust":
        from cli.binary import find_rust_frontend

        binary = find_rust_frontend()
        args = build_args(options, console)
        print_banner(args, console)
        note_trust_remote_code(options.trust_remote_code, console)
        pass_api_key(options)
        exec_rust(binary, "serve", args)
        return
    from server.lifecycle import serve as serve_python

    args = build_args(options, console)
    print_banner(args, console)
    note_trust_remote_code(options.trust_remote_code, console)
    pass_api_key(options)
    raise SystemExit(serve_python(args))


def exec_headless_engine(options: ServeOptions) -> None:
    """`vrs serve --headless`: become an engine that joins a frontend elsewhere."""
    from engine.config import ConfigError

    address = options.handshake_address
    if address is None or not address.startswith("tcp://"):
        raise ConfigError("--headless needs --handshake-address tcp://HOST:PORT (the "
                          "frontend's --data-parallel-address and --data-parallel-rpc-port)")
    from engine.process.launcher import engine_command

    os.environ.setdefault("VRS_LOG_LEVEL", options.log_level)
    argv = engine_command(sys.executable, address, options.engine_index)
    os.execv(argv[0], argv)


def run_frontend(options: ServeOptions, api_server_count: int, console: Console) -> int:
    """`vrs frontend`: bind, start engines, run and supervise vrs-rs; returns the exit code."""
    from cli.binary import find_rust_frontend
    from cli.supervisor import Supervisor, warn_api_server_count

    warn_api_server_count(api_server_count, console)
    local = options.data_parallel_size_local
    if local is not None and local > options.data_parallel_size:
        from engine.config import ConfigError

        raise ConfigError(f"--data-parallel-size-local {local} exceeds --data-parallel-size "
                          f"{options.data_parallel_size}")
    binary = find_rust_frontend()
    args = build_args(options, console)
    print_banner(args, console)
    note_trust_remote_code(options.trust_remote_code, console)
    pass_api_key(options)
    return Supervisor(binary, args, data_parallel_size=options.data_parallel_size,
                      console=console).run()
