"""``serve_render(args)``: the engine-less render service (``vrs render --frontend python``).

Template + tokenization only, from the model's tokenizer and config files (the tokenizer
from the args' ``tokenizer`` directory when given; no weights, no engine). Routes (same
shapes and errors as ``rust/server/src/routes/render.rs``):

* ``POST /v1/chat/completions/render``, ``POST /v1/completions/render``: the request
  goes through the serving path's own prompt builder (:mod:`server.prompt`) and
  the answer is what the engine would receive: ``request_id``, ``model``, ``prompt``,
  ``prompt_token_ids`` and ``sampling_params`` (the wire's field names, an object for
  ``structured_outputs`` too; ``max_tokens`` resolved against the context length). Chat
  requests may carry ``tools`` (rendered by the template) and any ``tool_choice``
  (``required`` and a named function show their prefill at the end of the prompt, and
  their structural tag in ``structured_outputs``); the tool-call and reasoning parsers are
  ``tool_call_parser`` / ``reasoning_parser`` (default ``auto``: chosen as ``serve`` chooses
  them, :mod:`server.parsers.select`), so a template without tool markers renders tools with
  ``--tool-call-parser NAME``.
  A completions request with a batch of prompts is answered with a JSON list, one answer
  per prompt (in order).
* ``POST /v1/responses/render``: a Responses API body, translated into its chat request
  (:mod:`server.responses.request`), answered as ``/v1/chat/completions/render`` answers
  that request.
* ``POST /v1/messages/render``: an Anthropic Messages body, translated into the equivalent
  chat request (:mod:`server.messages.request`), answered as that chat request is.
* ``GET /v1/models``, ``GET /health``.

The engine's limits come from ``config.json`` as the mock engine reads them:
``max_model_len`` (args) else ``max_position_embeddings`` (default 4096), and
``vocab_size`` (else the tokenizer's). Exit codes: 0 after SIGINT/SIGTERM, 1 when the
model cannot be loaded or the port bound, 2 for bad arguments.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from engine.protocol import SamplingParams
from server import openai as s
from server.args import DEFAULT_HOST, DEFAULT_PORT, CommonArgs, convert_args
from server.edge import (
    Handler,
    Receive,
    Scope,
    Send,
    dispatch,
    model_list,
    read_body,
    send_json,
)
from server.lifecycle import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    bind_http,
    checked_args,
    http_server,
    setup_logging,
    text_executor,
)
from server.messages import request as messages_request
from server.parsers.select import Choice, check_settings, choose, model_config
from server.prompt import Prompt, PromptBuilder
from server.responses import chat_prompt, takes_effort
from server.responses import request as responses_request
from server.text import ModelText, TextError

logger = logging.getLogger("vrs.render")

DEFAULT_MAX_POSITION_EMBEDDINGS = 4096  # as engine/mock/engine.py
_encode = msgspec.json.Encoder().encode


class RenderArgs(CommonArgs, forbid_unknown_fields=True):
    """The args-json map of ``vrs render`` (docs/internals.md)."""

    max_model_len: int | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None


@dataclass(frozen=True)
class Limits:
    """What an engine would report at READY, read from config.json."""

    vocab_size: int
    max_model_len: int


def model_limits(model_dir: str, max_model_len: int | None, tokenizer_vocab: int) -> Limits:
    """vocab size and context length of ``model_dir`` (raises TextError)."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TextError(f"cannot read {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise TextError(f"{path} is not a JSON object")
    vocab = config.get("vocab_size") or tokenizer_vocab
    native = config.get("max_position_embeddings") or DEFAULT_MAX_POSITION_EMBEDDINGS
    if not isinstance(vocab, int) or not isinstance(native, int):
        raise TextError(f"{path}: vocab_size and max_position_embeddings must be integers")
    return Limits(vocab_size=vocab, max_model_len=max_model_len or native)


def sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """The sampling parameters field by field (``structured_outputs`` too, by name)."""
    fields = msgspec.structs.asdict(sampling)
    if sampling.structured_outputs is not None:
        fields["structured_outputs"] = msgspec.structs.asdict(sampling.structured_outputs)
    return fields


def rendered(prefix: str, model: str, prompt: Prompt) -> bytes:
    """The render answer for ``prompt`` (a fresh request id with the serving prefix)."""
    return _encode(s.Rendered(
        request_id=f"{prefix}-{uuid.uuid4().hex}", model=model, prompt=prompt.text,
        prompt_token_ids=prompt.ids, sampling_params=sampling_fields(prompt.settings.sampling)))


class RenderApp:
    """The ASGI callable of the render service."""

    def __init__(self, text: ModelText, served_model_name: str, model_root: str,
                 limits: Limits, executor: ThreadPoolExecutor,
                 parsers: tuple[Choice, Choice] | None = None) -> None:
        self.model_name = served_model_name
        self.model_root = model_root
        self.limits = limits
        self.created = int(time.time())
        tools, reasoning = parsers or choose(None, None, text.chat_template_source,
                                             model_config(model_root))
        self.prompts = PromptBuilder(text, served_model_name, limits, executor,
                                     tool_parser=tools.name, reasoning_parser=reasoning.name)
        self._takes_effort = takes_effort(text.chat_template_source)
        self._routes: dict[str, tuple[str, Handler]] = {
            "/v1/chat/completions/render": ("POST", self.chat),
            "/v1/completions/render": ("POST", self.completion),
            "/v1/responses/render": ("POST", self.responses),
            "/v1/messages/render": ("POST", self.messages),
            "/v1/models": ("GET", self.models),
            "/health": ("GET", self.health),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await dispatch(self._routes, scope, receive, send)

    async def chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        prompt = await self.prompts.chat(await read_body(receive))
        await send_json(send, 200, rendered("chatcmpl", self.model_name, prompt))

    async def responses(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The Responses body's chat request, rendered as chat render renders it."""
        translated = responses_request.translate(await read_body(receive), self._takes_effort)
        prompt = await chat_prompt(self.prompts, translated)
        await send_json(send, 200, rendered("resp", self.model_name, prompt))

    async def completion(self, scope: Scope, receive: Receive, send: Send) -> None:
        prompts = await self.prompts.completion(await read_body(receive))
        if len(prompts) == 1:
            await send_json(send, 200, rendered("cmpl", self.model_name, prompts[0]))
            return
        answers = b",".join(rendered("cmpl", self.model_name, prompt) for prompt in prompts)
        await send_json(send, 200, b"[" + answers + b"]")

    async def messages(self, scope: Scope, receive: Receive, send: Send) -> None:
        chat = messages_request.translate(await read_body(receive),
                                          reasoning=self.prompts.reasoning_markers is not None)
        prompt = await self.prompts.chat(_encode(chat))
        await send_json(send, 200, rendered("msg", self.model_name, prompt))

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, model_list(self.model_name, self.created, self.model_root,
                                               self.limits.max_model_len))

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})


def parse_args(args: dict[str, Any]) -> RenderArgs:
    """Check the args-json map; raises ValueError naming the problem."""
    raw = convert_args(args, RenderArgs)
    if raw.max_model_len is not None and raw.max_model_len < 1:
        raise ValueError(f"max_model_len must be >= 1; got {raw.max_model_len}")
    check_settings(raw.tool_call_parser, raw.reasoning_parser)
    return raw


def serve_render(args: dict[str, Any]) -> int:
    """Run the render service until SIGINT/SIGTERM; returns the process exit code."""
    config = checked_args("render", parse_args, args)
    if config is None:
        return EXIT_USAGE
    level = (config.log_level or "info").lower()
    setup_logging(level)
    try:
        text = ModelText(config.tokenizer or config.model, config.chat_template,
                         config.chat_template_content_format or "auto")
        limits = model_limits(config.model, config.max_model_len, text.vocab_size)
    except TextError as exc:
        logger.error("%s", exc)
        return EXIT_FAILURE
    host = config.host or DEFAULT_HOST
    port = DEFAULT_PORT if config.port is None else config.port
    try:
        sock = bind_http(host, port)
    except OSError as exc:
        logger.error("cannot listen on %s:%d: %s", host, port, exc)
        return EXIT_FAILURE
    executor = text_executor()
    name = config.served_model_name or config.model
    parsers = choose(config.tool_call_parser, config.reasoning_parser, text.chat_template_source,
                     model_config(config.model))
    app = RenderApp(text, name, config.model, limits, executor, parsers)
    logger.info("render service for %s (max_model_len %d%s) on http://%s:%d", name,
                limits.max_model_len, "" if text.has_chat_template else "; no chat template",
                host, sock.getsockname()[1])
    logger.info("%s", text.content_format_line())
    server = http_server(app, level, graceful_shutdown_s=5)
    import uvloop

    try:
        uvloop.run(server.serve(sockets=[sock]))
    finally:
        sock.close()
        executor.shutdown(wait=False, cancel_futures=True)
    return EXIT_OK
