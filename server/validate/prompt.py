"""Request body -> what the engine receives: the prompt, its token ids and the lowered
sampling parameters. One implementation for the serving routes (``server.routes``) and the
render service, in the check order both frontends share; a completions request's batch of
prompts (:func:`completion_prompts`) is checked prompt by prompt. Mirrors
``rust/server/src/validate/prompt.rs``. Behaviour: docs/api.md, "Routes".
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

import msgspec

from engine import protocol as p
from server import openai as s
from server.edge.error import bad_request, model_not_found
from server.edge.metrics import Histogram
from server.parsers.reasoning import markers_of, starts_inside
from server.parsers.tools import (
    TOOL_CALL_PARSERS,
    ToolSettings,
    choice_text,
    forced_tag,
    forces_natively,
    json_forced_tag,
    prefill,
    tool_settings,
)
from server.text import ModelText, TemplateError
from server.validate import beam_search, engine_fields, extras, params, sampling

DEFAULT_MAX_BATCH_PROMPTS = 256
U32_END = 2**32
_SHAPES = (
    "invalid value for `prompt`: a string, a list of strings, a list of token "
    "ids, or a list of lists of token ids"
)


def _token_list(value: Any) -> bool:
    return type(value) is list and all(type(t) is int and 0 <= t < U32_END for t in value)


def completion_prompts(
    request: s.CompletionRequest, vocab_size: int, limit: int
) -> list[str | list[int]]:
    """The prompts of a completions request: texts to encode, or token ids (checked
    against the vocabulary)."""
    prompt = request.prompt
    if prompt is None:
        raise bad_request("`prompt` is required", "prompt")
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise bad_request("`prompt` must not be an empty list", "prompt")
    prompts: list[str | list[int]]
    if all(type(t) is int for t in prompt) and _token_list(prompt):
        prompts = [list(prompt)]
    elif all(type(t) is str for t in prompt):
        prompts = list(prompt)
    elif all(_token_list(t) for t in prompt):
        prompts = [list(t) for t in prompt]
    else:
        raise bad_request(_SHAPES, "prompt")
    if len(prompts) > limit:
        raise bad_request(
            f"`prompt` has {len(prompts)} prompts; this server takes at most "
            f"{limit} in one request (--max-batch-prompts)",
            "prompt",
        )
    for index, item in enumerate(prompts):
        if len(item) == 0:
            raise bad_request(
                f"`prompt` must not contain an empty prompt (prompt {index} is empty)", "prompt"
            )
        if isinstance(item, list):
            for token in item:
                if token >= vocab_size:
                    raise bad_request(
                        f"token id {token} in `prompt` is out of the vocabulary "
                        f"(size {vocab_size})",
                        "prompt",
                    )
    return prompts


class ModelLimits(Protocol):
    """What the engine reports at READY (the render service reads it from config.json)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def max_model_len(self) -> int: ...


class ChatOutput(msgspec.Struct):
    """How a chat request's answer is parsed."""

    tools: ToolSettings
    tool_parser: str | None  # the tool-call parser's name; None: tool calls are not parsed
    prefilled: bool  # the output is a forced tool call (tool_choice required / named)
    reasoning_inside: bool  # the prompt leaves a <think> open
    echo: str = ""  # echo: the last (assistant) message's content, put before the answer
    constrained: bool = False  # a structured-output constraint: no reasoning split

    def splits_reasoning(self) -> bool:
        """Whether a reasoning parser splits the answer: not when the prompt forces a
        tool call or a structured-output constraint applies."""
        return not (self.prefilled or self.constrained)


class Prompt(msgspec.Struct):
    """A checked request, ready for the engine (``settings.sampling.max_tokens`` is set)."""

    # the rendered chat, or the completion prompt; None for token ids, or when
    # truncate_prompt_tokens cut the prompt
    text: str | None
    ids: list[int]
    settings: params.Settings
    chat: ChatOutput | None = None


class PromptBuilder:
    """Builds :class:`Prompt` s for one model; ``tool_parser`` names its tool-call format,
    ``reasoning_parser`` its reasoning format (which markers a prompt may leave open)."""

    def __init__(self, text: ModelText, model_name: str, limits: ModelLimits,
                 executor: Executor, *, tool_parser: str | None = None,
                 reasoning_parser: str | None = None,
                 tokenize_latency: Histogram | None = None,
                 max_batch_prompts: int = DEFAULT_MAX_BATCH_PROMPTS,
                 scheduling_policy: str | None = None) -> None:
        self.text = text
        self.model_name = model_name
        self.limits = limits
        self.executor = executor
        self.tool_parser = tool_parser
        self.reasoning_markers = markers_of(reasoning_parser)
        self.max_batch_prompts = max_batch_prompts
        self._latency = tokenize_latency
        # --scheduling-policy (None: no engine, as in the render service).
        self.scheduling_policy = scheduling_policy
        self._marker_ids: dict[str, list[int]] = {}  # reasoning markers, tokenized
        # where truncate_prompt_tokens cuts when the request names no side
        self.truncate_left = getattr(text.tokenizer, "truncation_side", "right") == "left"

    def _check_model(self, model: str | None) -> None:
        """404 unless ``model`` is the served name; null or "" mean it (vLLM's rule)."""
        if model and model != self.model_name:
            raise model_not_found(model)

    async def off_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        work = functools.partial(fn, *args, **kwargs)
        if self._latency is not None:
            work = functools.partial(_timed, self._latency, work)
        try:
            return await loop.run_in_executor(self.executor, work)
        except TemplateError as exc:
            raise bad_request(str(exc)) from None

    def _finish(self, text: str | None, ids: list[int], settings: params.Settings,
                what: str, chat: ChatOutput | None = None) -> Prompt:
        cut = extras.truncated(ids, settings.extras)
        if cut is not None:  # truncate_prompt_tokens: the text no longer matches the ids
            text, ids = None, cut
        max_tokens = params.resolve_max_tokens(
            settings.max_tokens, settings.max_tokens_field, len(ids),
            self.limits.max_model_len, what)
        # max_tokens 0 with echo: the engine prefills the prompt and samples one token,
        # which is dropped (its logprobs are what is asked for).
        settings.sampling.max_tokens = max(max_tokens, 1)
        return Prompt(text, ids, settings, chat)

    async def _bad_words(self, settings: params.Settings) -> None:
        if settings.bad_words:
            settings.sampling.bad_words_token_ids = await self.off_loop(
                sampling.bad_words_ids, settings.bad_words,
                lambda word: self.text.encode(word, False))

    def _engine_fields(self, request: Any, settings: params.Settings) -> None:
        """``priority``, ``cache_salt``, ``thinking_token_budget``, ``vllm_xargs`` and
        ``kv_transfer_params`` into ``settings`` (server.validate.engine_fields)."""
        settings.priority, settings.cache_salt = engine_fields.apply(
            request, settings.sampling, self.scheduling_policy, self.reasoning_markers,
            settings.constraint, self._marker)

    def _marker(self, text: str) -> list[int]:
        ids = self._marker_ids.get(text)
        if ids is None:
            ids = self._marker_ids[text] = self.text.encode(text, False)
        return ids

    async def chat(self, body: bytes) -> Prompt:
        request = params.decode(body, chat=True)
        override = request.max_completion_tokens
        settings = params.validate(
            request, None if override is None else ("max_completion_tokens", override),
            self.limits.vocab_size)
        params.chat_logprobs(request, settings)
        self._engine_fields(request, settings)
        beam_search.check(settings, chat=True)
        settings.extras = extras.check(request, self.limits.max_model_len, self.truncate_left)
        self._check_model(settings.model)
        messages = params.chat_messages(request, self.text.has_chat_template)
        tools = tool_settings(request, self.tool_parser)
        forcing = tools.mode in ("required", "named")
        beam_search.check_tools(settings, choice_text(tools.mode, tools.name) if forcing else None)
        if forcing and settings.constraint is not None:
            raise bad_request(f"`tool_choice` {choice_text(tools.mode, tools.name)} cannot be "
                              f"combined with `{settings.constraint}`", "tool_choice")
        if forcing and settings.sampling.thinking_budget is not None:
            raise bad_request(f"`tool_choice` {choice_text(tools.mode, tools.name)} cannot be "
                              "combined with `thinking_token_budget`", "tool_choice")
        parser = self.tool_parser if tools.mode != "none" else None
        forced, tag = None, None
        if parser is not None and forces_natively(parser):
            fmt = TOOL_CALL_PARSERS[parser]
            forced, tag = prefill(fmt, tools), forced_tag(fmt, tools)
            if tools.mode == "named":
                settings.stop.append(fmt.end)  # one call, then stop
        elif parser is not None:  # format-independent forcing: JSON, no prefill
            tag = json_forced_tag(tools)
        if tag is not None:  # the call's format and arguments, enforced by the engine
            settings.sampling.structured_outputs = p.StructuredOutputs(structural_tag=tag)
            settings.constraint = "tools"
        continue_final = bool(request.continue_final_message)
        add_generation = request.add_generation_prompt
        text, ids = await self.off_loop(
            self.text.chat_prompt, messages, tools=tools.tools,
            add_generation_prompt=(not continue_final) if add_generation is None
            else add_generation,
            continue_final_message=continue_final,
            template_kwargs=extras.template_kwargs(request.chat_template_kwargs,
                                                   settings.extras.reasoning_effort),
            prefill=forced or "")
        last = messages[-1]
        echo = ""
        if request.echo and last.get("role") == "assistant":
            content = last.get("content") or ""
            echo = content if isinstance(content, str) else "\n".join(
                part["text"] for part in content)
        markers = self.reasoning_markers
        rendered = text[:len(text) - len(forced or "")]
        inside = markers is not None and starts_inside(markers, rendered)
        chat = ChatOutput(tools=tools, tool_parser=parser, prefilled=forcing,
                          reasoning_inside=inside,
                          echo=echo, constrained=settings.constraint is not None)
        await self._bad_words(settings)
        return self._finish(text, ids, settings, "messages", chat)

    async def completion(self, body: bytes) -> list[Prompt]:
        """The request's prompts (one per batched prompt), each with its own settings."""
        request = params.decode(body, chat=False)
        settings = params.validate(request, None, self.limits.vocab_size)
        params.completion_output(request, settings)
        self._engine_fields(request, settings)
        beam_search.check(settings, chat=False)
        settings.extras = extras.check(request, self.limits.max_model_len, self.truncate_left)
        self._check_model(settings.model)
        items = completion_prompts(request, self.limits.vocab_size, self.max_batch_prompts)
        await self._bad_words(settings)
        texts = [item for item in items if isinstance(item, str)]
        encoded: list[list[int]] = []
        if texts:
            encoded = await self.off_loop(
                lambda: [self.text.encode(item, True) for item in texts])
        out = []
        encodings = iter(encoded)
        for item in items:
            own = msgspec.structs.replace(settings, sampling=msgspec.structs.replace(
                settings.sampling))
            if isinstance(item, str):
                out.append(self._finish(item, next(encodings), own, "prompt"))
            else:
                out.append(self._finish(None, item, own, "prompt"))
        return out


def _timed(histogram: Histogram, work: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    try:
        return work()
    finally:
        histogram.observe(time.perf_counter() - start)
