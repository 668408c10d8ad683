"""The Responses API's store (``--enable-responses-store``, or vLLM's
``VLLM_ENABLE_RESPONSES_API_STORE=1``): the responses kept in memory, bounded (the least
recently used dropped first, never one still running), with what ``previous_response_id``
continues from (the chat messages of the request and its output) and a background run's
task and events. Mirrors ``rust/server/src/routes/responses/store.rs``. Behaviour:
docs/api.md, "Responses API: store and background".
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Any

import msgspec

from server.edge.error import APIError, ErrorKind, bad_request

TERMINAL = ("completed", "incomplete", "failed", "cancelled")
ENDING_EVENTS = (b"event: response.completed\n", b"event: response.incomplete\n",
                 b"event: error\n")
NO_STORE = ("This server does not support `store=True` and therefore does not support the "
            "background mode. To enable these features, start it with "
            "--enable-responses-store (or VLLM_ENABLE_RESPONSES_API_STORE=1).")


class Entry:
    """A kept response: the object a GET answers (updated while a background run goes
    on), the chat messages its prompt was rendered from, its input items (ids added), and
    for a background run its task and (when streamed) its events."""

    __slots__ = ("response", "messages", "items", "task", "events", "changed")

    def __init__(self, response: dict[str, Any], messages: list[dict[str, Any]],
                 items: list[dict[str, Any]]) -> None:
        self.response = response
        self.messages = messages
        self.items = items
        self.task: asyncio.Task[None] | None = None
        self.events: list[bytes] | None = None
        self.changed = asyncio.Event()

    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def add_event(self, event: bytes) -> None:
        if self.events is not None:
            self.events.append(event)
        self.changed.set()


class ResponseStore:
    """The kept responses by id, at most ``max_entries`` (``enabled`` False: none)."""

    def __init__(self, enabled: bool, max_entries: int) -> None:
        self.enabled = enabled
        self.max_entries = max_entries
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, response_id: str) -> Entry | None:
        entry = self._entries.get(response_id)
        if entry is not None:
            self._entries.move_to_end(response_id)
        return entry

    def put(self, response_id: str, entry: Entry) -> None:
        self._entries[response_id] = entry
        self._entries.move_to_end(response_id)
        self.evict()

    def delete(self, response_id: str) -> Entry | None:
        return self._entries.pop(response_id, None)

    def evict(self) -> None:
        """Drops the least recently used entries over the bound (a running one stays:
        running ones are bounded by admission)."""
        excess = len(self._entries) - self.max_entries
        if excess <= 0:
            return
        for key in [k for k, e in self._entries.items() if not e.running()][:excess]:
            del self._entries[key]

    def found(self, response_id: str) -> Entry:
        """The entry, else vLLM's 404."""
        entry = self.get(response_id)
        if entry is None:
            raise not_found(response_id, "response_id")
        return entry


def not_found(response_id: str, param: str) -> APIError:
    return APIError(ErrorKind.NOT_FOUND, f"Response with id '{response_id}' not found.", param)


class _Peek(msgspec.Struct):
    """The stateful fields of a body, read before it is translated (their types are
    checked there)."""

    store: Any = True
    background: Any = False
    previous_response_id: Any = None


class Stateful(msgspec.Struct):
    """What a Responses request asks of the store."""

    keep: bool  # store the response (store on, and the request's store true)
    background: bool
    previous_id: str | None
    previous: Entry | None


def stateful(body: bytes, store: ResponseStore) -> Stateful:
    """The body's stateful fields (a body that does not decode asks for nothing: its
    translation refuses it)."""
    try:
        peek = msgspec.json.decode(body, type=_Peek)
    except msgspec.DecodeError:
        return Stateful(False, False, None, None)
    previous_id = peek.previous_response_id
    if not isinstance(previous_id, str):
        previous_id = None
    previous = store.get(previous_id) if previous_id is not None else None
    return Stateful(store.enabled and peek.store is True, peek.background is True,
                    previous_id, previous)


def check(asked: Stateful, store: ResponseStore) -> None:
    """vLLM's answers, after the body's own checks: background without the store is a
    400; an unknown ``previous_response_id`` a 404."""
    if asked.background and not store.enabled:
        raise bad_request(NO_STORE, "background")
    if asked.previous_id is not None and asked.previous is None:
        raise not_found(asked.previous_id, "previous_response_id")


def known_calls(entry: Entry | None) -> frozenset[str]:
    """The function-call ids ``entry``'s history declared (a new input may answer them)."""
    if entry is None:
        return frozenset()
    ids = {call["id"] for m in history(entry) for call in m.get("tool_calls", ())}
    return frozenset(ids)


def history(entry: Entry) -> list[dict[str, Any]]:
    """What a request continuing ``entry`` renders before its own input, as vLLM renders
    it: the entry's chat messages without their system ones (instructions do not carry
    over), then its output: each output text an assistant message (reasoning is not
    carried); function calls (which vLLM drops) an assistant message's tool calls, so
    that the new input may answer them."""
    out = [m for m in entry.messages if m.get("role") != "system"]
    calls: list[dict[str, Any]] | None = None
    for item in entry.response.get("output", ()):
        kind = item.get("type")
        if kind == "message":
            calls = None
            out.extend({"role": "assistant", "content": part.get("text", "")}
                       for part in item.get("content", ()))
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            if calls is None:
                calls = []
                out.append({"role": "assistant", "tool_calls": calls})
            calls.append(call)
    return out


def continued(chat_messages: list[dict[str, Any]], instructions: bool,
              entry: Entry | None) -> list[dict[str, Any]]:
    """The translated messages with ``entry``'s history after the instructions."""
    if entry is None:
        return chat_messages
    head = 1 if instructions else 0
    return chat_messages[:head] + history(entry) + chat_messages[head:]


def input_items(raw_input: Any) -> list[dict[str, Any]]:
    """A request's input as items with ids (``GET .../input_items``): a string is one
    user message."""
    if isinstance(raw_input, str):
        raw_input = [{"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": raw_input}]}]
    items = []
    for item in raw_input if isinstance(raw_input, list) else ():
        item = dict(item)
        kind = item.setdefault("type", "message")
        if "id" not in item:
            prefix = {"message": "msg", "function_call": "fc", "reasoning": "rs",
                      "function_call_output": "fco"}.get(kind, "item")
            item["id"] = f"{prefix}_{uuid.uuid4().hex}"
        if kind == "message" and isinstance(item.get("content"), str):
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": part, "text": item["content"]}]
        items.append(item)
    return items


def failed(entry: Entry, message: str) -> None:
    """A background run that ended without its response: ``failed``, with the error."""
    if entry.response.get("status") not in TERMINAL:
        entry.response["status"] = "failed"
        entry.response["error"] = {"code": "server_error", "message": message}
    entry.changed.set()
