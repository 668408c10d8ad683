"""Typed reads of a raw Messages body: each 400 has the field path as its ``param`` (the
Anthropic error body says ``param: message``) and the same text as vrs-rs. Mirrors
``rust/server/src/routes/messages/json.rs``. Behaviour: docs/api.md, "Request fields".
"""

from __future__ import annotations

from typing import Any

from server.edge.error import APIError, bad_request
from server.validate.params import I64, I64_RANGE, out_of_range

# The keys a text block may carry (``cache_control`` and ``citations`` are accepted and
# ignored).
TEXT_KEYS = ("type", "text", "cache_control", "citations")
# A system text block that starts with this is Claude Code's per-request attribution
# header: dropped (as vLLM drops it), so the system prompt stays one cacheable prefix.
BILLING_HEADER = "x-anthropic-billing-header"


def field_required(path: str) -> APIError:
    return bad_request("Field required", path)


def expected(path: str, what: str) -> APIError:
    return bad_request(f"invalid value: expected {what}", path)


def unknown_field(path: str, name: str) -> APIError:
    return bad_request(f"unknown field '{name}'", path)


def not_supported(path: str, kind: str, whose: str = "") -> APIError:
    """``whose``: "" or " in a user message" / " in an assistant message"."""
    return bad_request(f"content block type '{kind}' is not supported{whose}", path)


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise expected(path, "a string")
    return value


def mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise expected(path, "an object")
    return value


def sequence(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise expected(path, "a list")
    return value


def integer(value: Any, path: str, least: int | None = None) -> int:
    """An integer (``least`` or more); a number outside the i64 range is refused as out of
    range, as in Rust."""
    if out_of_range(value, *I64):
        raise bad_request(f"invalid value: {I64_RANGE}", path)
    if least is None:
        if type(value) is not int:
            raise expected(path, "an integer")
        return value
    if type(value) is not int or value < least:
        raise expected(path, f"an integer >= {least}")
    return value


def number(value: Any, path: str) -> float | int:
    if type(value) is not int and type(value) is not float:
        raise expected(path, "a number")
    return value


def one_of(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    """One of ``allowed`` (a string); the message lists them."""
    if not isinstance(value, str):
        raise expected(path, "a string")
    if value not in allowed:
        quoted = [f"'{a}'" for a in allowed]
        listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
        raise expected(path, f"{listed}, got '{value}'")
    return value


def keys(item: dict[str, Any], allowed: tuple[str, ...], path: str) -> None:
    """A 400 for the first key of ``item`` not in ``allowed``."""
    for key in item:
        if key not in allowed:
            raise unknown_field(f"{path}.{key}", key)


def cache_control(item: dict[str, Any], path: str) -> None:
    """``cache_control``, where Anthropic takes it: ``{"type": "ephemeral", "ttl"?: "5m" |
    "1h"}`` or null; accepted and ignored (the prefix cache needs no breakpoints)."""
    value = item.get("cache_control")
    if value is None:
        return
    at = f"{path}.cache_control" if path else "cache_control"
    control = mapping(value, at)
    keys(control, ("type", "ttl"), at)
    if control.get("type") is None:
        raise field_required(f"{at}.type")
    one_of(control["type"], f"{at}.type", ("ephemeral",))
    if control.get("ttl") is not None:
        one_of(control["ttl"], f"{at}.ttl", ("5m", "1h"))


def block_type(block: Any, path: str) -> str:
    block = mapping(block, path)
    if block.get("type") is None:
        raise field_required(f"{path}.type")
    return string(block["type"], f"{path}.type")


def text_of(block: dict[str, Any], path: str) -> str:
    """The text of a text block (its ``type`` already read)."""
    keys(block, TEXT_KEYS, path)
    if block.get("text") is None:
        raise field_required(f"{path}.text")
    text = string(block["text"], f"{path}.text")
    cache_control(block, path)
    return text


def text_blocks(value: Any, path: str) -> list[str]:
    """The texts of a list of text blocks (any other block type is a 400)."""
    if not isinstance(value, list):
        raise expected(path, "a string or a list of text blocks")
    texts = []
    for k, block in enumerate(value):
        kind = block_type(block, f"{path}[{k}]")
        if kind != "text":
            raise not_supported(f"{path}[{k}].type", kind)
        texts.append(text_of(block, f"{path}[{k}]"))
    return texts


def texts(value: Any, path: str) -> str:
    """A string, or a list of text blocks joined with "\\n" (a tool result's content)."""
    if isinstance(value, str):
        return value
    return "\n".join(text_blocks(value, path))


def system_text(value: Any, path: str, strip_string: bool) -> str:
    """A system prompt: a string, or text blocks concatenated (as vLLM joins them), the
    billing header blocks left out (``strip_string``: a string that is the header is left
    out too, as vLLM does for a system message but not for ``system``)."""
    if isinstance(value, str):
        return "" if strip_string and value.startswith(BILLING_HEADER) else value
    return "".join(text for text in text_blocks(value, path)
                   if not text.startswith(BILLING_HEADER))
