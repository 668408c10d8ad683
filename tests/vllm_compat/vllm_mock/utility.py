"""UTILITY calls: the answers a frontend needs at start-up, for /load and for admin routes.

A real engine runs ``getattr(EngineCore, method)(*args)`` and answers
``UtilityOutput(call_id, result=UtilityResult(value))``, or, when that raises,
``failure_message = f"Call to {method} method failed: {error}"``
(``EngineCoreProc._invoke_utility_method``). An unknown method fails the same way, with
the AttributeError a real engine would raise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vllm.v1.engine import UtilityOutput
from vllm.v1.serial_utils import UtilityResult


class MockState:
    """What utility calls can read or change on one mock engine."""

    def __init__(self) -> None:
        self.sleeping = False
        self.paused = False
        self.weight_version: str | None = None
        self.prefix_cache_resets = 0


def _reset_prefix_cache(state: MockState, *_args: Any) -> bool:
    state.prefix_cache_resets += 1
    return True


def _sleep(state: MockState, *_args: Any) -> None:
    state.sleeping = True


def _wake_up(state: MockState, *_args: Any) -> None:
    state.sleeping = False


def _pause(state: MockState, *_args: Any) -> None:
    state.paused = True


def _resume(state: MockState, *_args: Any) -> None:
    state.paused = False


def _set_weight_version(state: MockState, version: str | None = None, *_args: Any) -> None:
    state.weight_version = version


def _none(_state: MockState, *_args: Any) -> None:
    return None


METHODS: dict[str, Callable[..., Any]] = {
    "get_supported_tasks": lambda _s, *_a: ("generate",),
    "is_sleeping": lambda s, *_a: s.sleeping,
    "reset_prefix_cache": _reset_prefix_cache,
    "reset_mm_cache": _none,
    "reset_encoder_cache": _none,
    "sleep": _sleep,
    "wake_up": _wake_up,
    "release_kv_cache_memory": _none,
    "execute_dummy_batch": _none,
    "profile": _none,
    "pause_scheduler": _pause,
    "pause_generation": _pause,
    "resume_scheduler": _resume,
    "set_weight_version": _set_weight_version,
    "get_weight_version": lambda s, *_a: s.weight_version,
    "list_loras": lambda _s, *_a: set(),
    "add_lora": lambda _s, *_a: False,
    "remove_lora": lambda _s, *_a: False,
    "pin_lora": lambda _s, *_a: False,
}


def answer(state: MockState, call_id: int, method: str, args: Any) -> UtilityOutput:
    """The engine's ``UtilityOutput`` for one call."""
    out = UtilityOutput(call_id)
    fn = METHODS.get(method)
    try:
        if fn is None:
            raise AttributeError(f"'EngineCoreProc' object has no attribute '{method}'")
        out.result = UtilityResult(fn(state, *(args or ())))
    except Exception as error:  # the engine reports any failure to the caller
        out.failure_message = f"Call to {method} method failed: {error}"
    return out
