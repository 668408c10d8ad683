"""One chat choice's deltas as an Anthropic message: content blocks (whole) and the
Messages SSE events (streamed). Mirrors ``rust/server/src/routes/messages/events.rs``.
Behaviour: docs/api.md, "Response".
"""

from __future__ import annotations

from typing import Any

import msgspec

from server import openai as s
from server.edge.error import APIError, Dialect
from server.output.choice import ChatChoice, ChatDelta
from server.output.generation import Generation, Piece

_encode = msgspec.json.Encoder().encode
STOP_REASONS = {"tool_calls": "tool_use", "length": "max_tokens"}


def sse(kind: str, data: dict[str, Any]) -> bytes:
    """One event: ``event: <kind>`` and its JSON."""
    return b"event: " + kind.encode() + b"\ndata: " + _encode(data) + b"\n\n"


def stop_reason(finish: str | None, stop_sequence: str | None) -> str:
    """The Anthropic stop reason of a chat finish reason."""
    if finish in STOP_REASONS:
        return STOP_REASONS[finish]
    return "stop_sequence" if stop_sequence is not None else "end_turn"


def tool_input(arguments: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class Block:
    """A content block being built: ``kind`` thinking / text / tool_use; ``call``: the chat
    tool call index of a tool_use block."""

    __slots__ = ("kind", "text", "call", "id", "name")

    def __init__(self, kind: str, call: int = -1, id: str = "", name: str = "") -> None:
        self.kind = kind
        self.text: list[str] = []
        self.call = call
        self.id = id
        self.name = name

    def opening(self) -> dict[str, Any]:
        """The block as ``content_block_start`` shows it (empty)."""
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": "", "signature": ""}
        if self.kind == "text":
            return {"type": "text", "text": ""}
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": {}}

    def whole(self) -> dict[str, Any]:
        text = "".join(self.text)
        if self.kind == "thinking":
            return {"type": "thinking", "thinking": text, "signature": ""}
        if self.kind == "text":
            return {"type": "text", "text": text}
        return {"type": "tool_use", "id": self.id, "name": self.name,
                "input": tool_input(text)}

    def delta(self, piece: str) -> dict[str, Any]:
        if self.kind == "thinking":
            return {"type": "thinking_delta", "thinking": piece}
        if self.kind == "text":
            return {"type": "text_delta", "text": piece}
        return {"type": "input_json_delta", "partial_json": piece}


class Blocks:
    """The blocks of one choice; ``push`` returns the stream events a delta makes."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.open = False  # the last block has not been stopped

    def _stop(self) -> bytes:
        if not self.open:
            return b""
        self.open = False
        return sse("content_block_stop", {"type": "content_block_stop",
                                          "index": len(self.blocks) - 1})

    def _start(self, block: Block) -> bytes:
        out = self._stop()
        self.blocks.append(block)
        self.open = True
        return out + sse("content_block_start", {"type": "content_block_start",
                                                 "index": len(self.blocks) - 1,
                                                 "content_block": block.opening()})

    def _add(self, block: Block, piece: str) -> bytes:
        block.text.append(piece)
        return sse("content_block_delta", {"type": "content_block_delta",
                                           "index": self.blocks.index(block),
                                           "delta": block.delta(piece)})

    def _text(self, kind: str, piece: str) -> bytes:
        if not piece:
            return b""
        out = b""
        if not (self.open and self.blocks[-1].kind == kind):
            out = self._start(Block(kind))
        return out + self._add(self.blocks[-1], piece)

    def push(self, delta: ChatDelta) -> bytes:
        out = self._text("thinking", delta.reasoning) + self._text("text", delta.content)
        for call in delta.calls:
            if call.id is not None:
                out += self._start(Block("tool_use", call.index, call.id, call.name or ""))
            block = next(b for b in reversed(self.blocks) if b.call == call.index)
            if call.arguments:
                out += self._add(block, call.arguments)
        return out

    def finish(self) -> bytes:
        return self._stop()

    def content(self) -> list[dict[str, Any]]:
        return [block.whole() for block in self.blocks]


def message_usage(usage: s.Usage | None, prompt_tokens: int) -> dict[str, int]:
    """Anthropic's usage: ``input_tokens`` are the prompt tokens the engine computed, those
    it found in its prefix cache ``cache_read_input_tokens`` (input + cache creation +
    cache read = the prompt; vrs writes no cache: creation 0). ``usage`` None:
    ``message_start``'s, sent before the engine's first output: the whole prompt, no
    cache keys (not known yet). Mirrors ``MessageUsage`` in
    rust/server/src/routes/messages/wire.rs."""
    if usage is None:
        return {"input_tokens": prompt_tokens, "output_tokens": 0}
    cached = min(usage.cached_tokens, usage.prompt_tokens)
    return {"input_tokens": usage.prompt_tokens - cached, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": usage.completion_tokens}


class MessageShapes:
    """The Anthropic message of one chat choice (``hex``: the request's 32 hex digits, the
    message id ``msg_<hex>``; ``prompt_tokens``: the prompt's length); a
    ``server.output.response.Shapes``."""

    dialect = Dialect.ANTHROPIC

    def __init__(self, hex: str, model: str, choice: ChatChoice, prompt_tokens: int) -> None:
        self.id = f"msg_{hex}"
        self.model = model
        self.choice = choice
        self.prompt_tokens = prompt_tokens
        self.blocks = Blocks()
        self.stop_sequence: str | None = None

    def message(self, content: list[dict[str, Any]], reason: str | None,
                usage: s.Usage | None) -> dict[str, Any]:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": reason,
                "stop_sequence": self.stop_sequence if reason == "stop_sequence" else None,
                "usage": message_usage(usage, self.prompt_tokens)}

    def stop_reason(self) -> str:
        return stop_reason(self.choice.finish, self.stop_sequence)

    def start(self) -> bytes:
        return (sse("message_start", {"type": "message_start",
                                      "message": self.message([], None, None)})
                + sse("ping", {"type": "ping"}))

    def push(self, delta: ChatDelta, stop_sequence: str | None) -> bytes:
        """The events of one piece's delta (``stop_sequence``: the piece's)."""
        if stop_sequence is not None:
            self.stop_sequence = stop_sequence
        return self.blocks.push(delta)

    def end(self, usage: s.Usage) -> bytes:
        """The stream's tail after the last piece."""
        reason = self.stop_reason()
        return (self.blocks.finish()
                + sse("message_delta", {"type": "message_delta", "delta": {
                    "stop_reason": reason,
                    "stop_sequence": self.stop_sequence if reason == "stop_sequence" else None},
                    "usage": message_usage(usage, self.prompt_tokens)})
                + sse("message_stop", {"type": "message_stop"}))

    def whole(self, usage: s.Usage) -> bytes:
        """The non-streamed body."""
        return _encode(self.message(self.blocks.content(), self.stop_reason(), usage))

    # ------------------------------------------------------------ response.Shapes

    def step(self, index: int, piece: Piece, completion_tokens: int = 0,
             cached_tokens: int = 0) -> bytes:
        return self.push(self.choice.step(piece), piece.stop_sequence)

    def whole_step(self, index: int, piece: Piece) -> None:
        self.push(self.choice.step(piece), piece.stop_sequence)

    def usage_of(self, generations: list[Generation]) -> s.Usage:
        first = generations[0]
        return s.Usage.of(self.prompt_tokens, first.completion_tokens, first.cached_tokens)

    def body(self, usage: s.Usage) -> bytes:
        return self.whole(usage)

    def finish(self, usage: s.Usage, include_usage: bool) -> bytes:
        return self.end(usage)

    def failure(self, error: APIError) -> bytes:
        """A failure after the start: an ``error`` event, and the stream ends."""
        return b"event: error\ndata: " + error.to_json(Dialect.ANTHROPIC) + b"\n\n"
