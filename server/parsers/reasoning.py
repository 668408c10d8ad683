"""Reasoning: ``--reasoning-parser`` splits ``<think>…</think>`` out of a chat answer into
``reasoning_content``. Mirrors ``rust/server/src/parsers/reasoning.rs``.

``deepseek_r1`` and ``qwen3`` (vLLM's names) are the same parser here. Where the
answer starts is read from the prompt: when the rendered prompt leaves a ``<think>``
open (e.g. the demo template with ``enable_thinking``), the output starts inside the
reasoning. Otherwise it starts as content, and a ``<think>`` in the output opens the
reasoning. After the first ``</think>`` everything is content. Partial markers at the
end of a piece are held back until the next piece decides them; at the end of the
output whatever is held is given to the side it was on.
"""

from __future__ import annotations

from server.parsers.markers import held_suffix

REASONING_PARSERS = ("deepseek_r1", "qwen3")
THINK_START = "<think>"
THINK_END = "</think>"

_BEFORE, _INSIDE, _AFTER = 0, 1, 2


def check_parser(setting: str | None) -> str | None:
    """The ``--reasoning-parser`` value checked (None: no reasoning parsing)."""
    if setting is None or setting in REASONING_PARSERS:
        return setting
    raise ValueError(f"reasoning_parser must be one of {', '.join(REASONING_PARSERS)}; "
                     f"got {setting!r}")


def starts_inside(prompt: str) -> bool:
    """Whether the prompt leaves a reasoning block open for the answer."""
    return prompt.rfind(THINK_START) > prompt.rfind(THINK_END)


class ReasoningParser:
    """Splits streamed text into (reasoning, content) pieces."""

    __slots__ = ("_state", "_buffer")

    def __init__(self, inside: bool) -> None:
        self._state = _INSIDE if inside else _BEFORE
        self._buffer = ""

    def push(self, text: str) -> tuple[str, str]:
        """(reasoning, content) safe to emit now."""
        if self._state == _AFTER:
            return "", text
        buffer = self._buffer + text
        content = ""
        if self._state == _BEFORE:
            start = buffer.find(THINK_START)
            if start == -1:
                keep = held_suffix(buffer, THINK_START)
                self._buffer = buffer[len(buffer) - keep:]
                return "", buffer[:len(buffer) - keep]
            content = buffer[:start]
            buffer = buffer[start + len(THINK_START):]
            self._state = _INSIDE
        end = buffer.find(THINK_END)
        if end == -1:
            keep = held_suffix(buffer, THINK_END)
            self._buffer = buffer[len(buffer) - keep:]
            return buffer[:len(buffer) - keep], content
        self._state, self._buffer = _AFTER, ""
        return buffer[:end], content + buffer[end + len(THINK_END):]

    def finish(self) -> tuple[str, str]:
        """Whatever is held back, on the side it was on."""
        buffer, self._buffer = self._buffer, ""
        return (buffer, "") if self._state == _INSIDE else ("", buffer)
