"""The args-json map of the Python services (docs/internals.md), checked, with the
defaults of ``rust/server/src/args.rs``: ``vrs serve``'s map ([`ServeArgs`]) becomes the
checked serving settings ([`Config`]), ``vrs render``'s ([`RenderArgs`]) is checked as is.
The keys are declared once, in ``server/args_json.py``."""

from __future__ import annotations

import math
import os
import sys
from typing import Any, TypeVar

import msgspec

from engine.config import SCHEDULING_POLICIES
from server.args_json import CommonArgs, RenderArgs, ServeArgs
from server.edge.middleware import check as check_middleware
from server.edge.trace import traces_url
from server.http_args import HttpArgs, check_http_args
from server.parsers.select import check_settings
from server.state import DEFAULT_STORE_ENTRIES, Options
from server.text.content_format import check_option as check_content_format
from server.validate.prompt import DEFAULT_MAX_BATCH_PROMPTS

LOG_LEVELS = ("trace", "debug", "info", "warning", "warn", "error", "critical")
DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8000
DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0
DEFAULT_MAX_REQUEST_BODY = 32 * 1024 * 1024
API_KEY_ENV = "VRS_API_KEY"


class Config(msgspec.Struct):
    """ServeArgs with the defaults filled in and the values checked."""

    model: str
    served_model_name: str
    host: str
    port: int
    log_level: str
    shutdown_timeout: float
    python_executable: str
    chat_template: str | None
    content_format: str  # --chat-template-content-format: auto | string | openai
    tokenizer: str  # the directory of tokenizer.json: ``tokenizer`` or else ``model``
    engine_config: dict[str, Any]
    data_parallel_size: int
    options: Options  # what the routes need; the parsers are chosen with the template
    http: HttpArgs  # the listener's and the edge's settings


Args = TypeVar("Args", bound=CommonArgs)


def convert_args(args: dict[str, Any], kind: type[Args]) -> Args:
    """The args-json map as ``kind``, its shared keys checked; raises ValueError naming
    the problem."""
    try:
        raw = msgspec.convert(args, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    if not os.path.isdir(raw.model):
        raise ValueError(f"model directory {raw.model!r} does not exist")
    level = (raw.log_level or "info").lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}; got {level!r}")
    if raw.port is not None and not 0 <= raw.port < 65536:
        raise ValueError(f"port must be in 0..65535; got {raw.port}")
    if raw.chat_template is not None and not os.path.isfile(raw.chat_template):
        raise ValueError(f"chat template file {raw.chat_template!r} does not exist")
    if raw.tokenizer is not None and not os.path.isdir(raw.tokenizer):
        raise ValueError(f"tokenizer directory {raw.tokenizer!r} does not exist")
    raw.chat_template_content_format = check_content_format(raw.chat_template_content_format)
    check_http_args(raw.http)
    check_middleware(raw.http)
    return raw


def parse_args(args: dict[str, Any]) -> Config:
    """Check the args-json map; raises ValueError naming the problem."""
    raw = convert_args(args, ServeArgs)
    timeout = DEFAULT_SHUTDOWN_TIMEOUT_S if raw.shutdown_timeout is None else raw.shutdown_timeout
    if not (math.isfinite(timeout) and timeout >= 0):
        raise ValueError(f"shutdown_timeout must be >= 0 seconds, got {timeout}")
    level = (raw.log_level or "info").lower()
    port = DEFAULT_PORT if raw.port is None else raw.port
    engine_config = dict(raw.engine_config or {})
    engine_config.setdefault("model", raw.model)
    engine_config.setdefault("scheduling_policy", raw.scheduling_policy or "fcfs")
    data_parallel_size = 1 if raw.data_parallel_size is None else raw.data_parallel_size
    if not 1 <= data_parallel_size < 65536:
        raise ValueError(f"data_parallel_size must be in 1..65535; got {data_parallel_size}")
    if raw.data_parallel_size_local not in (None, data_parallel_size):
        raise ValueError("data_parallel_size_local (engines on other hosts) needs the Rust "
                         "frontend")
    if raw.engine not in (None, "vrs"):
        raise ValueError(f"engine {raw.engine!r}: the Python frontend fronts vrs's engine only; "
                         "vLLM's engine needs the Rust frontend (vrs-rs)")
    return Config(model=raw.model, served_model_name=raw.served_model_name or raw.model,
                  host=raw.host or DEFAULT_HOST, port=port, log_level=level,
                  shutdown_timeout=timeout,
                  python_executable=raw.python_executable or sys.executable,
                  chat_template=raw.chat_template,
                  content_format=raw.chat_template_content_format or "auto",
                  tokenizer=raw.tokenizer or raw.model,
                  engine_config=engine_config,
                  data_parallel_size=data_parallel_size, options=_options(raw),
                  http=raw.http)


def _options(raw: ServeArgs) -> Options:
    """The HTTP settings of the args-json map, checked (defaults as in args.rs)."""
    body = DEFAULT_MAX_REQUEST_BODY if raw.max_request_body is None else raw.max_request_body
    if body < 1:
        raise ValueError(f"max_request_body must be >= 1 byte, got {body}")
    limit = raw.max_concurrent_requests
    if limit is not None and limit < 1:
        raise ValueError(f"max_concurrent_requests must be >= 1, got {limit}")
    timeout = raw.request_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"request_timeout must be > 0 seconds, got {timeout}")
    check_settings(raw.tool_call_parser, raw.reasoning_parser)
    policy = raw.scheduling_policy or "fcfs"
    if policy not in SCHEDULING_POLICIES:
        raise ValueError(f"scheduling_policy must be one of {', '.join(SCHEDULING_POLICIES)}; "
                         f"got {policy!r}")
    batch = DEFAULT_MAX_BATCH_PROMPTS if raw.max_batch_prompts is None else raw.max_batch_prompts
    if batch < 1:
        raise ValueError(f"max_batch_prompts must be >= 1, got {batch}")
    key = raw.api_key if raw.api_key is not None else os.environ.get(API_KEY_ENV)
    for name in ("sse_keep_alive_interval", "max_queue_wait"):
        seconds = getattr(raw, name)
        if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(f"{name} must be > 0 seconds, got {seconds}")
    for name in ("max_num_queued_reqs", "max_num_queued_tokens"):
        bound = getattr(raw, name)
        if bound is not None and bound < 0:
            raise ValueError(f"{name} must be >= 0, got {bound}")
    entries = raw.responses_store_max_entries
    if entries is not None and entries < 1:
        raise ValueError(f"responses_store_max_entries must be >= 1, got {entries}")
    if raw.collect_detailed_traces and raw.otlp_traces_endpoint is None:
        raise ValueError("collect_detailed_traces needs otlp_traces_endpoint")
    if raw.otlp_traces_endpoint is not None:
        traces_url(raw.otlp_traces_endpoint)
    return Options(api_key=key or None, max_request_body=body, max_concurrent_requests=limit,
                   request_timeout=timeout, tool_call_parser=raw.tool_call_parser,
                   reasoning_parser=raw.reasoning_parser, scheduling_policy=policy,
                   max_batch_prompts=batch,
                   sse_keep_alive_interval=raw.sse_keep_alive_interval,
                   max_num_queued_reqs=raw.max_num_queued_reqs,
                   max_num_queued_tokens=raw.max_num_queued_tokens,
                   max_queue_wait=raw.max_queue_wait,
                   otlp_traces_endpoint=raw.otlp_traces_endpoint,
                   collect_detailed_traces=raw.collect_detailed_traces,
                   enable_request_id_headers=raw.http.enable_request_id_headers,
                   enable_tokenizer_info_endpoint=raw.enable_tokenizer_info_endpoint,
                   enable_responses_store=raw.enable_responses_store,
                   responses_store_max_entries=entries or DEFAULT_STORE_ENTRIES)


def parse_render_args(args: dict[str, Any]) -> RenderArgs:
    """Check the args-json map; raises ValueError naming the problem."""
    raw = convert_args(args, RenderArgs)
    if raw.max_model_len is not None and raw.max_model_len < 1:
        raise ValueError(f"max_model_len must be >= 1; got {raw.max_model_len}")
    check_settings(raw.tool_call_parser, raw.reasoning_parser)
    return raw
