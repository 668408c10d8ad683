"""The request fields the engine acts on beyond sampling (vLLM's): ``priority``,
``cache_salt``, ``thinking_token_budget``, ``vllm_xargs`` and ``kv_transfer_params``,
checked (a 400 naming the field) and lowered for the engine. Mirrors
``rust/server/src/validate/engine_fields.rs`` rule for rule, message for message.
Behaviour: docs/api.md, "Chat and completions request fields".

Check order, after the other value checks: ``priority`` (an integer; non-zero needs
``--scheduling-policy priority``), ``cache_salt``, ``kv_transfer_params``,
``vllm_xargs``, ``thinking_token_budget`` (needs a reasoning parser, and no
structured-output constraint).
"""

from __future__ import annotations

from typing import Any

from engine import protocol as p
from server.edge.error import bad_request
from server.parsers.reasoning import ReasoningMarkers

I64 = (-(2**63), 2**63 - 1)
# The msgpack integers (vLLM's extra_args rule); beyond them a JSON integer is read as a
# float, as vrs-rs's JSON parser reads it.
_MSGPACK_INT = (-(2**63), 2**64 - 1)
U32_MAX = 2**32 - 1
MAX_CACHE_SALT = 128  # characters (vLLM's _MAX_CACHE_SALT_LENGTH)
_SALT_FORBIDDEN = frozenset("@/\\\x00")
_XARGS_SHAPE = ("`vllm_xargs` must be an object whose values are strings, numbers, or lists "
                "of strings and numbers")


def _integer(value: Any) -> bool:
    return type(value) is int


def priority(value: Any, scheduling_policy: str | None) -> int:
    """The checked ``priority`` (0 when unset). ``scheduling_policy`` None: no engine to
    schedule (the render service), any priority is taken."""
    if value is None:
        return 0
    if not _integer(value) or not I64[0] <= value <= I64[1]:
        raise bad_request(f"`priority` must be an integer in [{I64[0]}, {I64[1]}]", "priority")
    if value != 0 and scheduling_policy == "fcfs":
        # vLLM's words (its engine's check): the server schedules first come, first served.
        raise bad_request(f"Got priority {value} but Priority scheduling is not enabled. "
                          "Start the server with --scheduling-policy priority", "priority")
    return int(value)


def cache_salt(value: Any) -> str | None:
    """The checked ``cache_salt`` (vLLM's rule)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise bad_request("Parameter 'cache_salt' must be a non-empty string if provided.",
                          "cache_salt")
    if len(value) > MAX_CACHE_SALT or any(c in _SALT_FORBIDDEN for c in value):
        raise bad_request(f"Parameter 'cache_salt' must be at most {MAX_CACHE_SALT} characters "
                          "and must not contain '@', '/', '\\\\', or NUL.", "cache_salt")
    return value


def _json_number(value: Any) -> Any:
    """A number as both frontends carry it: an integer beyond msgpack's is a float."""
    if _integer(value) and not _MSGPACK_INT[0] <= value <= _MSGPACK_INT[1]:
        return float(value)
    return value


def _any_json(value: Any) -> Any:
    """Any JSON value, its out-of-range integers as floats (see :func:`_json_number`)."""
    if isinstance(value, dict):
        return {key: _any_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_any_json(item) for item in value]
    return _json_number(value)


def _scalar(value: Any) -> Any:
    """A ``vllm_xargs`` scalar (vLLM's ``str | int | float``; a boolean is an integer to
    its validation), or None when ``value`` is not one."""
    if isinstance(value, str):
        return value
    if type(value) is bool:
        return int(value)
    if type(value) in (int, float):
        return _json_number(value)
    return None


def vllm_xargs(value: Any) -> dict[str, Any] | None:
    """The checked ``vllm_xargs``: an object of strings, numbers and lists of them."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request(_XARGS_SHAPE, "vllm_xargs")
    out: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, list):
            items = [_scalar(x) for x in item]
            if any(x is None for x in items):
                raise bad_request(f"{_XARGS_SHAPE}; `{key}` holds another value", "vllm_xargs")
            out[key] = items
            continue
        scalar = _scalar(item)
        if scalar is None:
            raise bad_request(f"{_XARGS_SHAPE}; `{key}` is another value", "vllm_xargs")
        out[key] = scalar
    return out


def kv_transfer_params(value: Any) -> dict[str, Any] | None:
    """The checked ``kv_transfer_params``: any JSON object."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request("`kv_transfer_params` must be an object", "kv_transfer_params")
    result: dict[str, Any] = _any_json(value)
    return result


def extra_args(xargs: dict[str, Any] | None,
               kv: dict[str, Any] | None) -> dict[str, Any] | None:
    """vLLM's ``SamplingParams.extra_args``: ``vllm_xargs``, then a non-empty
    ``kv_transfer_params`` under that key (replacing an xargs entry of the name in its
    place); None when empty."""
    out = dict(xargs or {})
    if kv:
        out["kv_transfer_params"] = kv
    return out or None


def thinking_token_budget(value: Any) -> int | None:
    """The checked ``thinking_token_budget`` (vLLM's rule: -1 means no budget)."""
    if value is None:
        return None
    if not _integer(value) or not -1 <= value <= I64[1]:
        raise bad_request("`thinking_token_budget` must be a non-negative integer or -1 for "
                          "unlimited.", "thinking_token_budget")
    return None if value == -1 else int(value)


def thinking_budget(budget: int, markers: ReasoningMarkers | None,
                    constraint: str | None,
                    encode: Any) -> p.ThinkingBudget:
    """The engine's budget spec: ``budget`` with the reasoning parser's markers tokenized
    by ``encode`` (text -> ids, without special tokens)."""
    if markers is None:
        raise bad_request("`thinking_token_budget` needs a reasoning parser: start the server "
                          "with --reasoning-parser", "thinking_token_budget")
    if constraint is not None:
        raise bad_request(f"`thinking_token_budget` cannot be combined with `{constraint}`: "
                          "the grammar applies from the first generated token",
                          "thinking_token_budget")
    return p.ThinkingBudget(budget=min(budget, U32_MAX),
                            start_token_ids=[encode(m) for m in markers.start],
                            end_token_ids=[encode(m) for m in markers.end])


def apply(request: Any, sampling: p.SamplingParams, scheduling_policy: str | None,
          markers: ReasoningMarkers | None, constraint: str | None,
          encode: Any) -> tuple[int, str | None]:
    """The fields of ``request`` checked, the sampling ones into ``sampling``; returns the
    engine request's own (priority, cache_salt)."""
    level = priority(request.priority, scheduling_policy)
    salt = cache_salt(request.cache_salt)
    kv = kv_transfer_params(request.kv_transfer_params)
    sampling.extra_args = extra_args(vllm_xargs(request.vllm_xargs), kv)
    budget = thinking_token_budget(request.thinking_token_budget)
    if budget is not None:
        sampling.thinking_budget = thinking_budget(budget, markers, constraint, encode)
    return level, salt
