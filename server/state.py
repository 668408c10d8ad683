"""What handlers share: the serving state (:class:`State`: engine client, text assets,
settings, metrics, admission, the queue, the prompt builder) and the render service's
(:class:`RenderState`). Rust: rust/server/src/state.rs."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from concurrent.futures import Executor
from dataclasses import dataclass

import msgspec

from server.edge import Receive
from server.edge.admission import Admission
from server.edge.body import MAX_BODY_BYTES, read_body
from server.edge.error import LIMIT_FLAG
from server.edge.metrics import Metrics
from server.edge.queue import Queue
from server.edge.trace import Traces
from server.engine_client import EngineClient
from server.logprobs import TokenTexts
from server.parsers.select import Choice, choose, model_config
from server.text import ModelText
from server.text.tokenizer_info import tokenizer_info_body
from server.validate.prompt import DEFAULT_MAX_BATCH_PROMPTS, PromptBuilder

DEFAULT_STORE_ENTRIES = 1000  # --responses-store-max-entries


class Options(msgspec.Struct, kw_only=True):
    """Server settings the routes use (see ``server.args.Config``)."""

    api_key: str | None = None
    max_request_body: int = MAX_BODY_BYTES
    max_concurrent_requests: int | None = None
    request_timeout: float | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    scheduling_policy: str = "fcfs"  # --scheduling-policy: fcfs | priority
    max_batch_prompts: int = DEFAULT_MAX_BATCH_PROMPTS
    sse_keep_alive_interval: float | None = None  # seconds; None: no comment frames
    max_num_queued_reqs: int | None = None
    max_num_queued_tokens: int | None = None
    max_queue_wait: float | None = None  # seconds
    otlp_traces_endpoint: str | None = None
    collect_detailed_traces: bool = False
    enable_request_id_headers: bool = False
    enable_responses_store: bool = False
    responses_store_max_entries: int = DEFAULT_STORE_ENTRIES
    enable_tokenizer_info_endpoint: bool = False  # GET /tokenizer_info (vLLM's flag)


class State:
    """The serving state; ``client`` must be started before requests arrive."""

    def __init__(self, client: EngineClient, text: ModelText, served_model_name: str,
                 model_root: str, executor: Executor, options: Options | None = None,
                 traces: Traces | None = None) -> None:
        self.client = client
        self.traces = traces  # a span per generation request when on
        self.text = text
        self.model_name = served_model_name
        self.model_root = model_root
        self.options = options or Options()
        self.metrics = Metrics()
        self.prompts = PromptBuilder(text, served_model_name, client, executor,
                                     tool_parser=self.options.tool_call_parser,
                                     reasoning_parser=self.options.reasoning_parser,
                                     tokenize_latency=self.metrics.tokenize,
                                     max_batch_prompts=self.options.max_batch_prompts,
                                     scheduling_policy=self.options.scheduling_policy)
        self.executor = executor
        self.token_texts = TokenTexts(text.backend)
        self.created = int(time.time())
        options = self.options
        # Generation requests in flight (admission, /load).
        self.admission = Admission(options.max_concurrent_requests, self.metrics)
        # Engine requests waiting for their first output (server/edge/queue.py).
        self.queue = Queue(options.max_num_queued_reqs, options.max_num_queued_tokens,
                           options.max_queue_wait)
        key = self.options.api_key
        self.api_key = key.encode() if key else None
        # GET /tokenizer_info's body (--enable-tokenizer-info-endpoint), read once.
        self.tokenizer_info = (
            tokenizer_info_body(text.directory, text.chat_template_path)
            if options.enable_tokenizer_info_endpoint else None)

    def body(self, receive: Receive) -> Awaitable[bytes]:
        """The request body under ``--max-request-body``."""
        return read_body(receive, self.options.max_request_body, LIMIT_FLAG)


@dataclass(frozen=True)
class Limits:
    """What an engine would report at READY, read from config.json."""

    vocab_size: int
    max_model_len: int


class RenderState:
    """The render service's state: the model's text assets and limits, no engine."""

    def __init__(self, text: ModelText, served_model_name: str, model_root: str,
                 limits: Limits, executor: Executor,
                 parsers: tuple[Choice, Choice] | None = None) -> None:
        self.model_name = served_model_name
        self.model_root = model_root
        self.limits = limits
        self.created = int(time.time())
        tools, reasoning = parsers or choose(None, None, text.chat_template_source,
                                             model_config(model_root))
        self.prompts = PromptBuilder(text, served_model_name, limits, executor,
                                     tool_parser=tools.name, reasoning_parser=reasoning.name)
