"""The text path: tokenizer, chat template, incremental detokenizer, stop strings.

The Rust crate ``rust/text`` implements the same algorithms; for the same model files
both must give identical prompts, token ids and streamed text (docs/internals.md,
"Text"). The contract:

Tokenizer
    The model directory's ``tokenizer.json`` (loaded through transformers'
    ``AutoTokenizer``, fast only). Encoding and decoding call the underlying
    ``tokenizers.Tokenizer`` directly, which is the library the Rust ``tokenizers`` crate
    is. Chat prompts are encoded with ``add_special_tokens=False`` (the template writes
    them), completion prompts with ``add_special_tokens=True``.

Chat template
    ``--chat-template FILE`` if given, else the tokenizer's own, rendered by
    ``apply_chat_template(tokenize=False)``: messages with ``None`` values dropped and
    content in the template's content format (:mod:`server.text.content_format`: text parts
    joined with newlines, or the list of parts),
    ``tools`` (render only, for now), ``add_generation_prompt``, ``continue_final_message``
    and the request's ``chat_template_kwargs`` (plus the tokenizer's special tokens, e.g.
    ``bos_token``) as template variables. Any rendering failure is the user's error (HTTP
    400 carrying the template's message).

Incremental detokenization (vLLM's prefix_offset / read_offset, on ids)
    Mirrors ``rust/text/src/detokenizer.rs``. State: ``ids`` (the window), ``prefix_offset``,
    ``read_offset``, ``prefix_len`` (length of ``decode(ids[prefix_offset:read_offset])``)
    and ``emitted_len`` (length of the window's text already accounted for). Seed:
    ``ids = prompt_ids[-5:]``, ``read_offset = len(ids)``,
    ``prefix_len = emitted_len = len(decode(ids))``. ``push(new_ids)`` (all the new ids of
    one engine output at once): ``text = decode(ids[prefix_offset:])``; emit
    ``text[emitted_len:stable]`` where ``stable`` excludes trailing U+FFFD (an incomplete
    UTF-8 sequence); if nothing was trailing and ``len(text) > prefix_len`` the window
    slides: ``prefix_offset = read_offset``, ``read_offset = len(ids)``,
    ``prefix_len = emitted_len = len(decode(ids[prefix_offset:read_offset]))``.
    ``finish()`` emits ``text[emitted_len:]`` including any trailing U+FFFD. ``decode``
    honours ``skip_special_tokens``. A token that ended the request as a stop token (EOS,
    ``stop_token_ids``) is counted but never decoded.

Stop strings (mirrors ``rust/text/src/stop.rs``)
    Each piece of decoded text is appended to a pending buffer. The earliest occurrence
    of any stop string (ties: the longest) ends the request: the text before it is
    emitted, the rest dropped, the engine request aborted, finish_reason ``stop``.
    Otherwise everything is emitted except the longest suffix of the buffer that is a
    proper prefix of some stop string (so at most ``len(stop) - 1`` characters wait).
    When the request ends for another reason the buffer is emitted whole.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import tokenizers

from server.text.content_format import ContentFormat
from server.text.content_format import apply as apply_content_format
from server.text.content_format import resolve as resolve_content_format

# vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET: prompt tokens that seed the decoder.
PROMPT_SEED_TOKENS = 5
_REPLACEMENT = "\ufffd"

# Template variables the renderer sets, and apply_chat_template's own arguments: a
# request's chat_template_kwargs may not set them.
RESERVED_TEMPLATE_KWARGS = frozenset({
    "messages", "tools", "documents", "add_generation_prompt",
    "conversation", "chat_template", "continue_final_message", "tokenize",
    "sanitize_control_tokens", "padding", "truncation", "max_length", "return_tensors",
    "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs",
})
# The conversation that tells whether the template takes a system message after the first.
INLINE_SYSTEM_PROBE: list[dict[str, Any]] = [
    {"role": role, "content": "t"} for role in ("system", "user", "system", "user")]
NO_CHAT_TEMPLATE = ("this model has no chat template, so /v1/chat/completions is unavailable; "
                    "start the server with --chat-template or use /v1/completions")


class TextError(ValueError):
    """The model directory cannot provide a usable tokenizer or template."""


class TemplateError(ValueError):
    """The chat template failed on this request; the message is the template's."""


class ModelText:
    """Tokenizer and chat template of one directory: the model's, or the args-json's
    ``tokenizer`` (``--tokenizer``)."""

    def __init__(self, model_dir: str, chat_template_path: str | None = None,
                 content_format_option: str | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from transformers import AutoTokenizer

        if not (Path(model_dir) / "tokenizer.json").is_file():
            # transformers would build an empty tokenizer from config.json alone.
            raise TextError(f"cannot load the tokenizer of {model_dir}: it has no "
                            "tokenizer.json")
        try:
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
        except (OSError, ValueError) as exc:
            raise TextError(f"cannot load the tokenizer of {model_dir}: {exc}") from exc
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if not isinstance(backend, tokenizers.Tokenizer):
            raise TextError(f"{model_dir} has no fast tokenizer (tokenizer.json is required)")
        if chat_template_path is not None:
            try:
                tokenizer.chat_template = Path(chat_template_path).read_text(encoding="utf-8")
            except OSError as exc:
                raise TextError(f"cannot read the chat template {chat_template_path}: "
                                f"{exc.strerror or exc}") from exc
        self.tokenizer = tokenizer
        self.directory = Path(model_dir)
        self.chat_template_path = None if chat_template_path is None else Path(chat_template_path)
        self.backend: tokenizers.Tokenizer = backend
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        # (format, why) for requests without tools and with them (a tool_use template);
        # no option (None): content goes to the template as given, as transformers takes it
        self._convert = content_format_option is not None
        self.content_formats = tuple(
            resolve_content_format(content_format_option or "auto", self._template_for(tools))
            for tools in (False, True))

    def _template_for(self, tools: bool) -> str | None:
        """The template source ``apply_chat_template`` uses (``tool_use`` with tools)."""
        if not self.tokenizer.chat_template:
            return None
        try:
            return self.tokenizer.get_chat_template(None, tools=[{}] if tools else None)
        except ValueError:
            return None

    def content_format_line(self) -> str:
        """The start-up log line of the content format (and the tool_use template's)."""
        (plain, why), (with_tools, tools_why) = self.content_formats
        line = f"chat template content format: {plain} ({why})"
        if (with_tools, tools_why) != (plain, why):
            line += f"; with tools (tool_use template): {with_tools} ({tools_why})"
        return line

    def content_format(self, tools: bool) -> ContentFormat:
        """How message content reaches the template (``tools``: the request has tools)."""
        return self.content_formats[tools][0]

    @property
    def has_chat_template(self) -> bool:
        return bool(self.tokenizer.chat_template)

    # ------------------------------------------------------------ prompts

    def encode(self, text: str, add_special_tokens: bool) -> list[int]:
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def render_chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
        continue_final_message: bool = False,
        template_kwargs: dict[str, Any] | None = None,
    ) -> str:
        """The chat prompt as text; raises TemplateError with the template's message."""
        if continue_final_message and add_generation_prompt:
            raise TemplateError(
                "continue_final_message and add_generation_prompt are not compatible")
        kwargs = template_kwargs or {}
        for name in kwargs:
            if name in RESERVED_TEMPLATE_KWARGS:
                raise TemplateError(f"chat_template_kwargs may not set {json.dumps(name)}")
        if self._convert:
            messages = apply_content_format(messages, self.content_format(tools is not None))
        # transformers takes list[dict | Callable] (a list is invariant: a list of dicts is
        # not one), so the template gets its own list of the same tools
        template_tools: list[dict[str, Any] | Callable[..., Any]] | None = (
            None if tools is None else [*tools])
        try:
            prompt = self.tokenizer.apply_chat_template(
                messages,
                tools=template_tools,
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
                continue_final_message=continue_final_message,
                **kwargs,
            )
        except Exception as exc:  # noqa: BLE001 - any failure here comes from the user's input
            raise TemplateError(str(exc)) from exc
        # tokenize=False (reserved: chat_template_kwargs cannot set it) and one conversation
        assert isinstance(prompt, str)
        return prompt

    def chat_prompt(self, messages: list[dict[str, Any]], prefill: str = "",
                    **options: Any) -> tuple[str, list[int]]:
        """Render then tokenize a chat (the template writes the special tokens);
        ``prefill`` is appended to the rendered text (a forced tool call's start)."""
        prompt = self.render_chat(messages, **options) + prefill
        return prompt, self.encode(prompt, add_special_tokens=False)

    @property
    def chat_template_source(self) -> str | None:
        template = self.tokenizer.chat_template
        return template if isinstance(template, str) else None

    @functools.cached_property
    def merges_inline_system(self) -> bool:
        """Whether a system message after the first must join the leading system prompt:
        the template fails on [system, user, system, user] (vLLM's probe, e.g. a
        ``loop.first`` guard), or there is no template."""
        try:
            self.render_chat(INLINE_SYSTEM_PROBE, add_generation_prompt=False)
        except TemplateError:
            return True
        return False

    def chat_prompt_ids(self, messages: list[dict[str, Any]], **options: Any) -> list[int]:
        return self.chat_prompt(messages, **options)[1]

    # ------------------------------------------------------------ outputs

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def detokenizer(self, prompt_ids: Sequence[int],
                    skip_special_tokens: bool = True) -> IncrementalDetokenizer:
        return IncrementalDetokenizer(self.backend, prompt_ids, skip_special_tokens)


class IncrementalDetokenizer:
    """Turns generated ids into text pieces; never emits an incomplete UTF-8 sequence."""

    __slots__ = ("_backend", "_skip", "_ids", "_prefix_offset", "_read_offset", "_prefix_len",
                 "_emitted_len")

    def __init__(self, backend: tokenizers.Tokenizer, prompt_ids: Sequence[int],
                 skip_special_tokens: bool = True) -> None:
        self._backend = backend
        self._skip = skip_special_tokens
        self._ids = list(prompt_ids[len(prompt_ids) - PROMPT_SEED_TOKENS:]
                         if len(prompt_ids) > PROMPT_SEED_TOKENS else prompt_ids)
        self._prefix_offset = 0
        self._read_offset = len(self._ids)
        self._prefix_len = len(self._decode(self._ids)) if self._ids else 0
        self._emitted_len = self._prefix_len

    def _decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=self._skip)

    def push(self, new_ids: Sequence[int]) -> str:
        """Adds generated ids; returns the newly stable text (maybe empty)."""
        if not new_ids:
            return ""
        ids = self._ids
        ids.extend(new_ids)
        text = self._decode(ids[self._prefix_offset:])
        stable = len(text.rstrip(_REPLACEMENT))
        out = self._take(text, stable)
        if stable == len(text) and len(text) > self._prefix_len:
            # Everything up to here is final: the window restarts at the old read offset.
            del ids[:self._read_offset]
            self._prefix_offset = 0
            self._read_offset = len(ids)
            self._prefix_len = self._emitted_len = len(self._decode(ids))
        return out

    def finish(self) -> str:
        """Whatever is still held back (e.g. an incomplete character at the very end)."""
        text = self._decode(self._ids[self._prefix_offset:])
        return self._take(text, len(text))

    def _take(self, text: str, end: int) -> str:
        if end <= self._emitted_len:
            return ""
        start, self._emitted_len = self._emitted_len, end
        return text[start:end]


class StopMatcher:
    """Finds the first stop string in a stream of text pieces (see the module docstring)."""

    __slots__ = ("_stops", "_longest", "_pending", "stopped", "matched")

    def __init__(self, stops: Sequence[str]) -> None:
        self._stops = tuple(stop for stop in stops if stop)
        self._longest = max((len(stop) for stop in self._stops), default=0)
        self._pending = ""
        self.stopped = False
        self.matched: str | None = None  # the stop string that matched

    def push(self, text: str) -> tuple[str, bool]:
        """Returns (text safe to emit now, whether a stop string matched)."""
        if self.stopped:
            return "", False
        if not self._stops:
            return text, False
        pending = self._pending + text
        first, first_len = -1, 0
        for stop in self._stops:
            index = pending.find(stop)
            if index != -1 and (first == -1 or index < first
                                or (index == first and len(stop) > first_len)):
                first, first_len = index, len(stop)
        if first != -1:
            self.stopped = True
            self.matched = pending[first:first + first_len]
            self._pending = ""
            return pending[:first], True
        hold = self._partial_suffix_len(pending)
        cut = len(pending) - hold
        self._pending = pending[cut:]
        return pending[:cut], False

    def flush(self) -> str:
        """Releases the held-back text at the end of the stream (no stop matched)."""
        rest, self._pending = self._pending, ""
        return "" if self.stopped else rest

    def _partial_suffix_len(self, pending: str) -> int:
        for n in range(min(self._longest - 1, len(pending)), 0, -1):
            suffix = pending[-n:]
            if any(len(stop) > n and stop.startswith(suffix) for stop in self._stops):
                return n
        return 0

