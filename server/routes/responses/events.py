"""One chat choice's deltas as Responses API output items and typed SSE events. Mirrors
``rust/server/src/routes/responses/events.rs``. Behaviour: docs/api.md, "Responses API".
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import msgspec

from server import openai as s
from server.edge.error import APIError, Dialect
from server.logprobs import TokenLogprob
from server.output.choice import ChatChoice
from server.output.generation import Generation, Piece
from server.output.sse import typed_event
from server.routes.responses.request import Echo

_encode = msgspec.json.Encoder().encode


def _fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def streamed(logprobs: list[TokenLogprob]) -> list[dict[str, Any]]:
    """Logprobs as the text delta and done events carry them (no ``bytes``)."""
    return [{"token": lp.token, "logprob": lp.logprob, "top_logprobs": [
        {"token": top.token, "logprob": top.logprob} for top in lp.top_logprobs]}
        for lp in logprobs]


class _Item:
    """An output item being generated: its kind, id and text (arguments for a call), and a
    message's logprobs (those of the pieces its text came from)."""

    __slots__ = ("kind", "id", "text", "call_id", "name", "logprobs")

    def __init__(self, kind: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.id = _fresh({"message": "msg", "reasoning": "rs", "function_call": "fc"}[kind])
        self.text = ""
        self.call_id = call_id
        self.name = name
        self.logprobs: list[TokenLogprob] = []

    def part(self) -> dict[str, Any]:
        if self.kind == "reasoning":
            return {"type": "reasoning_text", "text": self.text}
        return {"type": "output_text", "text": self.text, "annotations": [],
                "logprobs": self.logprobs}

    def json(self, done: bool) -> dict[str, Any]:
        status = "completed" if done else "in_progress"
        if self.kind == "reasoning":
            return {"id": self.id, "type": "reasoning", "summary": [],
                    "content": [self.part()] if done else [], "status": status}
        if self.kind == "message":
            return {"id": self.id, "type": "message", "status": status, "role": "assistant",
                    "content": [self.part()] if done else []}
        return {"id": self.id, "type": "function_call", "status": status,
                "call_id": self.call_id, "name": self.name,
                "arguments": self.text if done else ""}


class ResponseShapes:
    """The response of one chat choice (n = 1) in the Responses API's shapes."""

    dialect = Dialect.OPENAI

    def __init__(self, hex_id: str, created: int, model: str, choice: ChatChoice,
                 prompt: tuple[str | None, list[int]], echo: Echo) -> None:
        """``prompt``: the prompt's text (None when it has none) and token ids."""
        self.rid = echo.request_id if echo.request_id is not None else f"resp_{hex_id}"
        self.created = created
        self.model = model
        self.choice = choice
        self.prompt = prompt
        self.prompt_tokens = len(prompt[1])
        self.echo = echo
        self._output: tuple[list[str], list[int]] = ([], [])  # the raw text and token ids
        self.items: list[_Item] = []
        self._open = False  # the last item has not ended
        self._sequence = 0
        # The stateful fields (server/routes/responses/store.py): what the object echoes,
        # and who keeps the final object (with --enable-responses-store).
        self.store = False
        self.previous_response_id: str | None = None
        self.keep: Callable[[dict[str, Any]], None] | None = None

    # ------------------------------------------------------------------ objects

    def response(self, status: str, usage: s.Usage | None) -> dict[str, Any]:
        """The response object (``usage`` None: in progress, no output yet)."""
        echo = self.echo
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.rid, "object": "response", "created_at": self.created,
            "status": status, "error": None, "incomplete_details": incomplete,
            "instructions": echo.instructions, "max_output_tokens": echo.max_output_tokens,
            "model": self.model,
            "output": [] if usage is None else [item.json(True) for item in self.items],
            "parallel_tool_calls": echo.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": echo.effort, "summary": echo.summary}, "store": self.store,
            "temperature": echo.temperature, "text": {"format": echo.text_format},
            "tool_choice": echo.tool_choice, "tools": echo.tools,
            "top_logprobs": echo.top_logprobs, "top_p": echo.top_p,
            "truncation": "disabled",
            "usage": None if usage is None else {
                "input_tokens": usage.prompt_tokens,
                "input_tokens_details": {"cached_tokens": usage.cached_tokens,
                                         "cache_write_tokens": 0},
                "output_tokens": usage.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
                "total_tokens": usage.total_tokens},
            "user": echo.user, "metadata": echo.metadata, **self._messages(usage is not None)}

    def _messages(self, done: bool) -> dict[str, Any]:
        """vLLM's ``enable_response_messages``: the prompt and the output as the model saw
        and wrote them (text and token ids), in the final object."""
        if not (done and self.echo.response_messages):
            return {}
        text, ids = self._output
        output = [{"message": "".join(text), "tokens": ids, "type": "raw_message_tokens"}]
        return {"input_messages": [{"message": self.prompt[0] or "", "tokens": self.prompt[1],
                                    "type": "raw_message_tokens"}],
                "output_messages": output if text or ids else []}

    def status(self) -> str:
        return "incomplete" if self.choice.finish == "length" else "completed"

    # ------------------------------------------------------------------ events

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return typed_event(kind, data)

    def _end(self) -> bytes:
        """The events that end the open item."""
        if not self._open:
            return b""
        self._open = False
        index = len(self.items) - 1
        item = self.items[index]
        out = b""
        if item.kind == "function_call":
            out += self._event("response.function_call_arguments.done", item_id=item.id,
                               output_index=index, name=item.name, arguments=item.text)
        else:
            done = ("response.reasoning_text.done" if item.kind == "reasoning"
                    else "response.output_text.done")
            text: dict[str, Any] = {"text": item.text}
            if item.kind == "message":
                text["logprobs"] = streamed(item.logprobs)
            out += self._event(done, item_id=item.id, output_index=index, content_index=0,
                               **text)
            out += self._event("response.content_part.done", item_id=item.id,
                               output_index=index, content_index=0, part=item.part())
        return out + self._event("response.output_item.done", output_index=index,
                                 item=item.json(True))

    def _begin(self, item: _Item) -> bytes:
        out = self._end()
        self.items.append(item)
        self._open = True
        index = len(self.items) - 1
        out += self._event("response.output_item.added", output_index=index,
                           item=item.json(False))
        if item.kind != "function_call":
            out += self._event("response.content_part.added", item_id=item.id,
                               output_index=index, content_index=0, part=item.part())
        return out

    def _text(self, kind: str, text: str, logprobs: list[TokenLogprob] | None = None) -> bytes:
        """Reasoning or message text (a message's with the logprobs of its piece's tokens)
        to the open item of that kind, or a new one."""
        if not text:
            return b""
        out = b""
        if not (self._open and self.items[-1].kind == kind):
            out = self._begin(_Item(kind))
        item = self.items[-1]
        item.text += text
        index = len(self.items) - 1
        if kind == "reasoning":
            return out + self._event("response.reasoning_text.delta", item_id=item.id,
                                     output_index=index, content_index=0, delta=text)
        item.logprobs += logprobs or []
        return out + self._event("response.output_text.delta", item_id=item.id,
                                 output_index=index, content_index=0, delta=text,
                                 logprobs=streamed(logprobs or []))

    def start(self) -> bytes:
        progress = self.response("in_progress", None)
        return (self._event("response.created", response=progress)
                + self._event("response.in_progress", response=progress))

    def step(self, index: int, piece: Piece, completion_tokens: int = 0,
             cached_tokens: int = 0) -> bytes:
        delta = self.choice.step(piece)
        if self.echo.response_messages:
            self._output[0].append(piece.text)
            self._output[1].extend(piece.token_ids or ())
        calls = delta.calls
        ongoing = 0  # the arguments that continue the call in progress come first
        while ongoing < len(calls) and calls[ongoing].id is None:
            ongoing += 1
        out = b"".join(self._arguments(call.arguments) for call in calls[:ongoing])
        out += self._text("reasoning", delta.reasoning)
        out += self._text("message", delta.content, delta.logprobs)
        for call in calls[ongoing:]:
            if call.id is not None:
                out += self._begin(_Item("function_call", call.id, call.name or ""))
            out += self._arguments(call.arguments)
        return out

    def _arguments(self, arguments: str) -> bytes:
        item = self.items[-1] if self.items else None
        if not arguments or item is None or item.kind != "function_call" or not self._open:
            return b""
        item.text += arguments
        return self._event("response.function_call_arguments.delta", item_id=item.id,
                           output_index=len(self.items) - 1, delta=arguments)

    def whole_step(self, index: int, piece: Piece) -> None:
        self.step(index, piece)

    # ------------------------------------------------------------------ ends

    def usage_of(self, generations: list[Generation]) -> s.Usage:
        completion = sum(g.completion_tokens for g in generations)
        return s.Usage.of(self.prompt_tokens, completion, generations[0].cached_tokens,
                          self.choice.reasoning_tokens)

    def finish(self, usage: s.Usage, include_usage: bool = False) -> bytes:
        """The stream's tail: the open item's end, then ``response.completed`` (or
        ``response.incomplete``)."""
        status = self.status()
        out = self._end()
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return out + self._event(kind, response=self._final(status, usage))

    def failure(self, error: APIError) -> bytes:
        """An error after the stream began: an ``error`` event (the stream then ends)."""
        return self._event("error", code=error.kind.type_name, message=error.message,
                           param=None)

    def body(self, usage: s.Usage) -> bytes:
        self._end()
        return _encode(self._final(self.status(), usage))

    def _final(self, status: str, usage: s.Usage) -> dict[str, Any]:
        """The final response object, handed to ``keep`` when it is kept."""
        final = self.response(status, usage)
        if self.keep is not None:
            self.keep(final)
        return final
