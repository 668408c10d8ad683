"""A streamed chunk's bytes, built around a prefix encoded once per response.
Rust: rust/server/src/output/content_chunk.rs.

Every chunk of one response repeats the same envelope (``id``, ``object``, ``created``,
``model``): :class:`ChunkFrame` encodes it once, and each token's event is that prefix,
the one choice's JSON, and the closing bytes (with ``usage`` when continuous usage stats
are on). A chat choice's JSON is built the same way: its ``{"index":I,"delta":`` is kept
per index, and a delta that holds only content (the common token) encodes only its text.
The bytes are exactly msgspec's encoding of the chunk structs in ``server/openai.py``
(same keys, same order, no spaces): ``tests/server/test_chunk_frames.py`` checks them
against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from server import openai as s
from server.logprobs import ChatLogprobs

if TYPE_CHECKING:
    from server.output.choice import ChatDelta

_encode = msgspec.json.Encoder().encode
_EMPTY_CHOICES = b"[]}"
_CLOSE = b"]}\n\n"
_USAGE = b'],"usage":'
_END = b"}\n\n"
_NULL = b"null"
_LOGPROBS = b',"logprobs":'
_FINISH = b',"finish_reason":'
_TOKEN_IDS = b',"token_ids":'
_CONTENT_END = b'},"logprobs":null,"finish_reason":null}]}\n\n'
_CONTENT = b'{"content":'
# The finish reasons a chunk can carry, encoded once (any other is encoded when it comes).
_FINISHES: dict[str | None, bytes] = {None: _NULL} | {
    reason: _encode(reason) for reason in ("stop", "length", "tool_calls", "abort", "error")}


class ChunkFrame:
    """The ``data: {envelope,"choices":[`` prefix of one response's chunks (``envelope``:
    its chunk struct with no choices, usage or prompt logprobs)."""

    __slots__ = ("_prefix", "_heads", "_content_heads")

    def __init__(self, envelope: s.ChatCompletionChunk | s.Completion) -> None:
        encoded = _encode(envelope)
        if not encoded.endswith(_EMPTY_CHOICES):
            raise ValueError("a chunk frame's envelope must end with its empty choices")
        self._prefix = b"data: " + encoded[:-2]
        self._heads: list[bytes] = []
        self._content_heads: list[bytes] = []  # prefix + head + '{"content":' per index

    def event(self, choice: bytes, usage: s.Usage | None = None) -> bytes:
        """One SSE event holding the chunk with the single ``choice`` (its JSON)."""
        if usage is None:
            return b"".join((self._prefix, choice, _CLOSE))
        return b"".join((self._prefix, choice, _USAGE, _encode(usage), _END))

    def chat_event(self, index: int, delta: ChatDelta, usage: s.Usage | None) -> bytes:
        """The event of a chat chunk with choice ``index``'s ``delta`` (not empty)."""
        content_only = delta.content_only()
        if (content_only and usage is None and delta.logprobs is None and delta.finish is None
                and delta.token_ids is None):
            return self.content_event(index, delta.content)
        logprobs = None if delta.logprobs is None else ChatLogprobs(delta.logprobs)
        choice = self.chat_choice(index, delta.content if content_only else delta.delta(),
                                  logprobs, delta.finish, delta.token_ids)
        return self.event(choice, usage)

    def content_event(self, index: int, content: str) -> bytes:
        """The event of a chat chunk whose choice ``index`` has only ``content`` (not
        empty), no logprobs, no finish reason and no usage: the common token."""
        heads = self._content_heads
        while len(heads) <= index:
            heads.append(b"".join((self._prefix, self._head(len(heads)), _CONTENT)))
        return b"".join((heads[index], _encode(content), _CONTENT_END))

    def _head(self, index: int) -> bytes:
        heads = self._heads
        while len(heads) <= index:
            heads.append(b'{"index":%d,"delta":' % len(heads))
        return heads[index]

    def chat_choice(self, index: int, delta: s.Delta | str,
                    logprobs: ChatLogprobs | None, finish: str | None,
                    token_ids: list[int] | None = None) -> bytes:
        """A chat chunk choice's JSON; ``delta`` as a str is a delta of that content only;
        ``token_ids`` (return_token_ids) close it when given."""
        if isinstance(delta, str):
            delta_json = b"".join((_CONTENT, _encode(delta), b"}"))
        else:
            delta_json = _encode(delta)
        finish_json = _FINISHES.get(finish) or _encode(finish)
        ids = b"" if token_ids is None else _TOKEN_IDS + _encode(token_ids)
        return b"".join((self._head(index), delta_json, _LOGPROBS,
                         _NULL if logprobs is None else _encode(logprobs), _FINISH,
                         finish_json, ids, b"}"))
