"""One choice of a response: the pieces of its generation turned into the endpoint's deltas
(streamed) and accumulated into its final form (not streamed). Chat runs the text through
the reasoning parser, then the tool-call parser, and counts reasoning tokens
(``server/output/reasoning_tokens.py``); completions add the echoed prompt and prompt
logprobs. Mirrors ``rust/server/src/output/choice.rs``. Behaviour: docs/api.md, "Responses".
"""

from __future__ import annotations

from server import openai as s
from server.logprobs import (
    ChatLogprobs,
    CompletionLogprobs,
    PromptLogprobs,
    TokenLogprob,
    TokenTexts,
    extend,
)
from server.output.generation import Piece
from server.output.reasoning_tokens import ReasoningTokens
from server.parsers.reasoning import ReasoningMarkers, ReasoningParser
from server.parsers.tools import CallAccumulator, CallDelta, ToolCallParser
from server.validate.extras import Extras
from server.validate.prompt import ChatOutput


class ChatDelta:
    """What one piece adds to a chat choice."""

    __slots__ = ("reasoning", "content", "calls", "logprobs", "finish", "token_ids")

    def __init__(self, reasoning: str, content: str, calls: list[CallDelta],
                 logprobs: list[TokenLogprob] | None, finish: str | None,
                 token_ids: list[int] | None = None) -> None:
        self.reasoning = reasoning
        self.content = content
        self.calls = calls
        self.logprobs = logprobs
        self.finish = finish
        self.token_ids = token_ids  # return_token_ids: the piece's tokens

    def is_empty(self) -> bool:
        return not (self.reasoning or self.content or self.calls or self.logprobs
                    or self.finish or self.token_ids)

    def content_only(self) -> bool:
        """Whether the delta is just (non-empty) content: the common token's chunk."""
        return bool(self.content) and not (self.reasoning or self.calls)

    def delta(self) -> s.Delta:
        delta = s.Delta()
        if self.content:
            delta.content = self.content
        if self.reasoning:
            delta.reasoning_content = self.reasoning
        if self.calls:
            delta.tool_calls = [_wire(c) for c in self.calls]
        return delta


def _wire(call: CallDelta) -> s.ToolCallDelta:
    if call.id is None:
        return s.ToolCallDelta(index=call.index, function=s.FunctionDelta(
            arguments=call.arguments))
    return s.ToolCallDelta(index=call.index, id=call.id, type="function",
                           function=s.FunctionDelta(call.name or "", call.arguments))


def _merged(calls: list[CallDelta]) -> list[CallDelta]:
    """Deltas of one piece with the pieces of the same call merged (push + finish)."""
    out: list[CallDelta] = []
    for call in calls:
        if out and out[-1].index == call.index and call.id is None:
            out[-1] = CallDelta(call.index, out[-1].id, out[-1].name,
                                out[-1].arguments + call.arguments)
        else:
            out.append(call)
    return out


class ChatChoice:
    """A chat choice's parsers and, for a whole response, what it said so far."""

    __slots__ = ("index", "_reasoning", "_reasoning_tokens", "_tools", "_top", "_texts",
                 "_with_reasoning", "_shown", "echo", "content", "reasoning", "calls",
                 "logprobs", "finish", "token_ids")

    def __init__(self, index: int, chat: ChatOutput, reasoning_parser: ReasoningMarkers | None,
                 top_logprobs: int | None, texts: TokenTexts, *,
                 extras: Extras | None = None) -> None:
        self.index = index
        self._reasoning = (ReasoningParser(reasoning_parser, chat.reasoning_inside)
                           if reasoning_parser is not None and chat.splits_reasoning()
                           else None)
        self._reasoning_tokens = ReasoningTokens()
        parser = chat.tool_parser
        self._tools = ToolCallParser(parser, chat.tools) if parser is not None else None
        self._top = top_logprobs
        self._texts = texts
        self._with_reasoning = reasoning_parser is not None
        # vLLM's extensions: include_reasoning false (with a reasoning parser) withholds
        # the reasoning and, lest they show it, the logprobs and token ids
        self._shown = extras = extras or Extras()
        hidden = self._with_reasoning and not extras.include_reasoning
        if hidden:
            self._top = None
        self.token_ids: list[int] | None = [] if extras.token_ids and not hidden else None
        self.echo = chat.echo
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls = CallAccumulator()
        self.logprobs: list[TokenLogprob] = []
        self.finish: str | None = None

    def step(self, piece: Piece) -> ChatDelta:
        last = piece.finish is not None
        reasoning, content = "", piece.text
        if self._reasoning is not None:
            reasoning, content = self._reasoning.push(content)
            if last:
                more_reasoning, more_content = self._reasoning.finish()
                reasoning, content = reasoning + more_reasoning, content + more_content
            self._reasoning_tokens.count(self._reasoning, piece.token_offsets, last)
        calls: list[CallDelta] = []
        if self._tools is not None:
            out = self._tools.push(content)
            content, calls = out.content, out.calls
            if last:
                more = self._tools.finish()
                content, calls = content + more.content, _merged(calls + more.calls)
        finish = piece.finish
        if finish == "stop" and self._tools is not None and self._tools.calls_made:
            finish = "tool_calls"
        if not self._shown.include_reasoning:
            reasoning = ""
        elif not self._shown.separate_reasoning:
            reasoning, content = "", reasoning + content
        logprobs = None
        if self._top is not None:
            logprobs = self._texts.chat(piece.logprobs, self._top, self._shown.ids_as_tokens)
            self.logprobs += logprobs
        ids = None
        if self.token_ids is not None:
            ids = piece.token_ids
            self.token_ids += ids
        delta = ChatDelta(reasoning, content, calls, logprobs, finish, ids)
        self.content.append(content)
        self.reasoning.append(reasoning)
        self.calls.add(calls)
        self.finish = finish
        return delta

    @property
    def reasoning_tokens(self) -> int | None:
        """Its reasoning tokens so far when the server has a reasoning parser (0 where
        this request's answer is not split: a forced tool call, a structured-output
        constraint), None without one."""
        return self._reasoning_tokens.total if self._with_reasoning else None

    def choice(self) -> s.ChatChoice:
        """The whole choice (after the last piece)."""
        content = "".join(self.content)
        reasoning = "".join(self.reasoning)
        message = s.AssistantMessage("assistant", content)
        calls = self.calls.calls
        if not content and (calls or reasoning):
            message.content = None
        if self.echo:
            message.content = self.echo + (message.content or "")
        if self._with_reasoning:
            message.reasoning_content = reasoning or None
        if calls:
            message.tool_calls = [s.ToolCallOut(c.id, "function", s.Function(c.name, c.arguments))
                                  for c in calls]
        logprobs = None if self._top is None else ChatLogprobs(self.logprobs)
        choice = s.ChatChoice(self.index, message, logprobs, self.finish or "stop")
        if self.token_ids is not None:
            choice.token_ids = self.token_ids
        return choice


class CompletionChoice:
    """A completions choice: the echo before the first text, offsets for logprobs, the
    prompt logprobs (``prompt_logprobs``: how many of each position's top are shown)."""

    __slots__ = ("index", "_echo", "_top", "_texts", "_offset", "_ids", "_echo_logprobs",
                 "_prompt_top", "_first", "_as_ids", "text", "logprobs", "prompt_logprobs",
                 "finish", "token_ids")

    def __init__(self, index: int, echo: str | None, top: int | None, texts: TokenTexts,
                 *, prompt_ids: list[int] | None = None, echo_logprobs: bool = False,
                 prompt_logprobs: int | None = None, extras: Extras | None = None) -> None:
        self.index = index
        self._echo = echo
        self._top = top
        self._texts = texts
        self._offset = len(echo or "")
        self._ids = prompt_ids or []
        self._echo_logprobs = echo_logprobs and top is not None and bool(prompt_ids)
        self._prompt_top = prompt_logprobs
        self._first = True
        extras = extras or Extras()
        self._as_ids = extras.ids_as_tokens
        # return_token_ids: the generated tokens so far
        self.token_ids: list[int] | None = [] if extras.token_ids else None
        self.text: list[str] = []
        self.logprobs = CompletionLogprobs([], [], [], [])
        self.prompt_logprobs: PromptLogprobs | None = None
        self.finish: str | None = None

    def step(self, piece: Piece) -> s.CompletionChoice:
        """The piece as this choice's streamed chunk (and into the whole choice)."""
        first, self._first = self._first, False
        text = piece.text
        if self._echo is not None:
            text, self._echo = self._echo + text, None
        logprobs = None
        if self._top is not None:
            if first and self._echo_logprobs:
                logprobs, self._offset = self._texts.echo(self._ids, piece.prompt_logprobs or [],
                                                          self._top, self._as_ids)
                generated, self._offset = self._texts.completion(
                    piece.logprobs, self._top, self._offset, as_ids=self._as_ids)
                extend(logprobs, generated)
            else:
                logprobs, self._offset = self._texts.completion(
                    piece.logprobs, self._top, self._offset, as_ids=self._as_ids)
            extend(self.logprobs, logprobs)
        self.text.append(text)
        self.finish = piece.finish
        chunk = s.CompletionChoice(self.index, text, logprobs, piece.finish)
        if self.token_ids is not None:
            chunk.token_ids = piece.token_ids
            self.token_ids += piece.token_ids
        if first and self._prompt_top is not None:
            self.prompt_logprobs = self._texts.prompt(piece.prompt_logprobs or [],
                                                      self._prompt_top)
            chunk.prompt_logprobs = self.prompt_logprobs
        if first and self.token_ids is not None:
            chunk.prompt_token_ids = self._ids
        return chunk

    def choice(self) -> s.CompletionChoice:
        logprobs = None if self._top is None else self.logprobs
        choice = s.CompletionChoice(self.index, "".join(self.text), logprobs,
                                    self.finish or "stop")
        if self._prompt_top is not None:
            choice.prompt_logprobs = self.prompt_logprobs or [None]
        if self.token_ids is not None:
            choice.token_ids = self.token_ids
            choice.prompt_token_ids = self._ids
        return choice
