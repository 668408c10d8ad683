"""The Responses API's store (server/routes/responses/store.py): the LRU bound, the
stateful fields and vLLM's answers, the history ``previous_response_id`` continues, the
input items; as rust/server/src/routes/responses/store/tests.rs."""

from __future__ import annotations

from typing import Any

import pytest

from server.edge.error import APIError
from server.routes.responses.store import (
    Entry,
    ResponseStore,
    check,
    continued,
    history,
    input_items,
    known_calls,
    stateful,
)

pytestmark = pytest.mark.server


def done(rid: str) -> Entry:
    return Entry({"id": rid, "status": "completed", "output": []}, [], [])


def test_the_least_recently_used_goes_first() -> None:
    store = ResponseStore(True, 2)
    store.put("a", done("a"))
    store.put("b", done("b"))
    assert store.get("a") is not None  # now b is the oldest
    store.put("c", done("c"))
    assert store.get("b") is None
    assert store.get("a") is not None and store.get("c") is not None and len(store) == 2
    assert store.delete("a") is not None and store.get("a") is None


def test_stateful_fields_and_checks() -> None:
    off = ResponseStore(False, 4)
    asked = stateful(b'{"input": "x", "background": true}', off)
    assert asked.background and not asked.keep
    with pytest.raises(APIError) as info:
        check(asked, off)
    assert info.value.param == "background" and info.value.status == 400
    asked = stateful(b'{"input": "x", "previous_response_id": "resp_1"}', off)
    with pytest.raises(APIError) as info:
        check(asked, off)
    assert (info.value.status, info.value.message) == (
        404, "Response with id 'resp_1' not found.")
    on = ResponseStore(True, 4)
    assert stateful(b'{"input": "x"}', on).keep
    assert not stateful(b'{"input": "x", "store": false}', on).keep
    assert not stateful(b"not json", on).keep


def test_history_is_vllms_rendering_with_the_calls_kept() -> None:
    entry = Entry({"output": [
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hmm"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Hi."}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}]},
        [{"role": "system", "content": "old"}, {"role": "user", "content": "hello"}], [])
    call: Any = lambda i, n: {"id": i, "type": "function",  # noqa: E731
                              "function": {"name": n, "arguments": "{}"}}
    assert history(entry) == [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi."},
        {"role": "assistant", "tool_calls": [call("c1", "f"), call("c2", "g")]}]
    assert known_calls(entry) == {"c1", "c2"}
    messages = continued([{"role": "system", "content": "new"},
                          {"role": "user", "content": "next"}], True, entry)
    assert len(messages) == 5 and messages[1] == {"role": "user", "content": "hello"}
    assert messages[4] == {"role": "user", "content": "next"}


def test_input_items_get_ids_and_parts() -> None:
    items = input_items("hi")
    assert items[0]["type"] == "message" and items[0]["id"].startswith("msg_")
    assert items[0]["content"] == [{"type": "input_text", "text": "hi"}]
    items = input_items([{"role": "assistant", "content": "a", "id": "mine"},
                         {"type": "function_call_output", "call_id": "c", "output": "1"}])
    assert items[0]["id"] == "mine"
    assert items[0]["content"] == [{"type": "output_text", "text": "a"}]
    assert items[1]["id"].startswith("fco_")
