"""Request body -> what the engine receives: the prompt, its token ids and the lowered
sampling parameters. One implementation for the serving routes (``app``) and the render
service (``render``); mirrors ``rust/cli/src/prompt.rs``.

Check order (the same in both frontends): JSON, keys, types, values (400) -> model (404)
-> messages / prompt (400) -> tools (render only) -> template + tokenization, off the
event loop (400 on a template error) -> context length (400), which also fills in
``max_tokens`` (default: what the context leaves after the prompt).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, Protocol

import msgspec

from engine.frontend import params
from engine.frontend.errors import bad_request, model_not_found
from engine.frontend.text import ModelText, TemplateError

# Policy fields that only render implements: the tools go into the template, and the
# output side (tool-call parsing) is not involved.
RENDER_ACCEPTS = frozenset({"tools", "tool_choice"})


class ModelLimits(Protocol):
    """What the engine reports at READY (the render service reads it from config.json)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def max_model_len(self) -> int: ...


class Prompt(msgspec.Struct):
    """A checked request, ready for the engine (``settings.sampling.max_tokens`` is set)."""

    text: str | None  # the rendered chat, or the completion prompt; None for token ids
    ids: list[int]
    settings: params.Settings


class PromptBuilder:
    """Builds :class:`Prompt` s for one model; ``tools`` accepts render's tool fields."""

    def __init__(self, text: ModelText, model_name: str, limits: ModelLimits,
                 executor: Executor, *, tools: bool = False) -> None:
        self.text = text
        self.model_name = model_name
        self.limits = limits
        self.executor = executor
        self._accept = RENDER_ACCEPTS if tools else frozenset()

    def _check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise model_not_found(model)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor,
                                              functools.partial(fn, *args, **kwargs))
        except TemplateError as exc:
            raise bad_request(str(exc)) from None

    def _finish(self, text: str | None, ids: list[int], settings: params.Settings,
                what: str) -> Prompt:
        settings.sampling.max_tokens = params.resolve_max_tokens(
            settings.max_tokens, len(ids), self.limits.max_model_len, what)
        return Prompt(text, ids, settings)

    async def chat(self, body: bytes) -> Prompt:
        request = params.decode(body, chat=True, accept=self._accept)
        override = request.max_completion_tokens
        settings = params.validate(
            request, None if override is None else ("max_completion_tokens", override),
            self.limits.vocab_size)
        self._check_model(settings.model)
        messages = params.chat_messages(request, self.text.has_chat_template)
        tools = params.chat_tools(request) if self._accept else None
        continue_final = bool(request.continue_final_message)
        add_generation = request.add_generation_prompt
        text, ids = await self._off_loop(
            self.text.chat_prompt, messages, tools=tools,
            add_generation_prompt=(not continue_final) if add_generation is None
            else add_generation,
            continue_final_message=continue_final,
            template_kwargs=request.chat_template_kwargs or {})
        return self._finish(text, ids, settings, "messages")

    async def completion(self, body: bytes) -> Prompt:
        request = params.decode(body, chat=False)
        settings = params.validate(request, None, self.limits.vocab_size)
        self._check_model(settings.model)
        prompt = params.completion_prompt(request, self.limits.vocab_size)
        if isinstance(prompt, str):
            ids = await self._off_loop(self.text.encode, prompt, True)
            return self._finish(prompt, ids, settings, "prompt")
        return self._finish(None, prompt, settings, "prompt")
