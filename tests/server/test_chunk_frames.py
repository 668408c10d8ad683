"""server/output/content_chunk.py: a chunk built around its pre-encoded prefix is byte for byte the
chunk struct's own encoding (keys, order, escapes), for chat and completions."""

from __future__ import annotations

import msgspec
import pytest

from server import openai as s
from server.logprobs import ChatLogprobs, CompletionLogprobs, TokenLogprob, TopLogprob
from server.output.choice import ChatDelta
from server.output.content_chunk import ChunkFrame
from server.parsers.tools import CallDelta

pytestmark = pytest.mark.unit

_encode = msgspec.json.Encoder().encode

TEXTS = ["hello", " world", "", "\u4f60\u597d", "\U0001f600", 'quote " and \\ and \n\t',
         "\x00\x1f control", "</script>", "\ud7ff"]
FINISHES = [None, "stop", "length", "tool_calls", "abort", "error", "content_filter"]
USAGES = [None, s.Usage.of(512, 7), s.Usage.of(3, 0, 2)]


def _struct_event(chunk: msgspec.Struct) -> bytes:
    return b"data: " + _encode(chunk) + b"\n\n"


def _logprobs() -> ChatLogprobs:
    top = [TopLogprob("a", -0.5, [97]), TopLogprob("\u00e9", -1.25, [195, 169])]
    return ChatLogprobs([TokenLogprob("a", -0.5, [97], top)])


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("finish", FINISHES)
@pytest.mark.parametrize("usage", USAGES)
def test_chat_content_chunk_matches_struct(text: str, finish: str | None,
                                           usage: s.Usage | None) -> None:
    rid, model = 'chatcmpl-"x"\u00e9', "m/\u00fc"
    frame = ChunkFrame(s.ChatCompletionChunk(id=rid, created=1700000000, model=model,
                                             choices=[]))
    for index in (2, 0, 1):
        for logprobs in (None, _logprobs()):
            delta = s.Delta(content=text) if text else s.Delta()
            expected = s.ChatCompletionChunk(
                id=rid, created=1700000000, model=model,
                choices=[s.ChatChunkChoice(index, delta, logprobs, finish)])
            if usage is not None:
                expected.usage = usage
            fast = text if text else delta  # the content-only path needs content
            got = frame.event(frame.chat_choice(index, fast, logprobs, finish), usage)
            assert got == _struct_event(expected)
            tokens = None if logprobs is None else logprobs.content
            delta_of = ChatDelta("", text, [], tokens, finish)
            if text or tokens or finish:  # an empty delta sends no chunk
                assert frame.chat_event(index, delta_of, usage) == _struct_event(expected)
            if text and logprobs is None and finish is None and usage is None:
                assert frame.content_event(index, text) == _struct_event(expected)


def test_chat_event_with_reasoning_or_calls_matches_struct() -> None:
    frame = ChunkFrame(s.ChatCompletionChunk(id="c", created=5, model="m", choices=[]))
    call = CallDelta(1, "call_9", "get", '{"x":')
    for delta in (ChatDelta("hmm", "", [], None, None), ChatDelta("a", "b", [], None, None),
                  ChatDelta("", "", [call], None, None), ChatDelta("", "t", [call], None, "stop")):
        expected = s.ChatCompletionChunk(id="c", created=5, model="m", choices=[
            s.ChatChunkChoice(0, delta.delta(), None, delta.finish)])
        assert frame.chat_event(0, delta, None) == _struct_event(expected)


def test_chat_event_with_token_ids_matches_struct() -> None:
    """return_token_ids: every chunk of a choice carries its tokens, an empty delta too."""
    frame = ChunkFrame(s.ChatCompletionChunk(id="c", created=5, model="m", choices=[]))
    for delta in (ChatDelta("", "hi", [], None, None, [7, 8]),
                  ChatDelta("", "", [], None, None, [9]),
                  ChatDelta("r", "", [], None, "stop", [1]),
                  ChatDelta("", "x", [], _logprobs().content, "length", [])):
        logprobs = None if delta.logprobs is None else ChatLogprobs(delta.logprobs)
        content_only = delta.content_only()
        wire = s.Delta(content=delta.content) if content_only else delta.delta()
        expected = s.ChatCompletionChunk(id="c", created=5, model="m", choices=[
            s.ChatChunkChoice(0, wire, logprobs, delta.finish, token_ids=delta.token_ids or [])])
        assert frame.chat_event(0, delta, None) == _struct_event(expected)
    assert ChatDelta("", "", [], None, None, []).is_empty()
    assert not ChatDelta("", "", [], None, None, [3]).is_empty()


def test_chat_full_delta_matches_struct() -> None:
    frame = ChunkFrame(s.ChatCompletionChunk(id="c", created=5, model="m", choices=[]))
    delta = s.Delta(content="x", reasoning_content="think",
                    tool_calls=[s.ToolCallDelta(index=0, id="call_1", type="function",
                                                function=s.FunctionDelta("f", "{\"a\""))])
    expected = s.ChatCompletionChunk(id="c", created=5, model="m",
                                     choices=[s.ChatChunkChoice(3, delta, None, "tool_calls")])
    assert frame.event(frame.chat_choice(3, delta, None, "tool_calls")) == \
        _struct_event(expected)


@pytest.mark.parametrize("usage", USAGES)
def test_completion_chunk_matches_struct(usage: s.Usage | None) -> None:
    frame = ChunkFrame(s.Completion(id="cmpl-1", created=9, model="m", choices=[]))
    logprobs = CompletionLogprobs(["\u4f60"], [-0.5], [{"\u4f60": -0.5}], [4])
    for choice in (s.CompletionChoice(0, "a\"b", None, None),
                   s.CompletionChoice(1, "", logprobs, "length")):
        expected = s.Completion(id="cmpl-1", created=9, model="m", choices=[choice])
        if usage is not None:
            expected.usage = usage
        assert frame.event(_encode(choice), usage) == _struct_event(expected)


def test_envelope_with_choices_is_refused() -> None:
    chunk = s.ChatCompletionChunk(id="c", created=5, model="m", choices=[], usage=s.Usage.of(1, 1))
    with pytest.raises(ValueError, match="empty choices"):
        ChunkFrame(chunk)
