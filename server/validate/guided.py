"""vLLM's removed guided-decoding fields: ``guided_json``, ``guided_regex``,
``guided_choice``, ``guided_grammar`` and ``guided_whitespace_pattern`` stand for the
``structured_outputs`` keys of their names (checked by :mod:`server.validate.structured`,
errors naming the guided field); ``guided_decoding_backend`` is accepted (a string) and
ignored. vLLM 0.33 ignores them all with a warning, which leaves the output unconstrained;
vrs honours them and logs their deprecation once per process. A guided field next to
``response_format`` or ``structured_outputs`` is a 400. Mirrors
``rust/server/src/validate/structured/guided.rs``. Behaviour: docs/api.md, "Structured
outputs".
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from server import openai as s
from server.edge.error import bad_request

logger = logging.getLogger("vrs.frontend")

# Each guided field and the structured_outputs key it stands for, in the order their
# errors are looked for.
FIELDS = {
    "guided_json": "json",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
    "guided_whitespace_pattern": "whitespace_pattern",
}
BACKEND = "guided_decoding_backend"
_warned = False


class Guided(msgspec.Struct, frozen=True):
    """The ``structured_outputs`` object a request's guided fields stand for, and the
    guided field of each of its keys (what its errors name)."""

    value: dict[str, Any]
    names: dict[str, str]


def _deprecated(fields: list[str]) -> None:
    """The once-per-process deprecation warning."""
    global _warned
    if _warned:
        return
    _warned = True
    logger.warning("request fields %s are vLLM's removed guided decoding: mapped onto "
                   "structured_outputs (guided_decoding_backend ignored); send "
                   "structured_outputs or response_format instead (logged once)",
                   ", ".join(fields))


def _is_constraint(response_format: Any) -> bool:
    """Whether ``response_format`` asks for anything (null and type text do not)."""
    if response_format is None:
        return False
    return not (isinstance(response_format, dict) and response_format.get("type") == "text")


def of(request: s.ChatCompletionRequest | s.CompletionRequest) -> Guided | None:
    """The request's guided fields as structured_outputs (None: it sets none that
    constrains), or a 400: a guided field with ``response_format`` or
    ``structured_outputs``, a ``guided_decoding_backend`` that is not a string."""
    given = {field: getattr(request, field) for field in FIELDS}
    given = {field: value for field, value in given.items() if value is not None}
    backend = request.guided_decoding_backend
    if given or backend is not None:
        _deprecated([*given, *([BACKEND] if backend is not None else [])])
    if backend is not None and not isinstance(backend, str):
        raise bad_request(f"`{BACKEND}` must be a string", BACKEND)
    if not given:
        return None
    field = next(iter(given))
    for other, asks in (("response_format", _is_constraint(request.response_format)),
                        ("structured_outputs", request.structured_outputs is not None)):
        if asks:
            raise bad_request(f"`{field}` cannot be combined with `{other}`: `{field}` is "
                              f"vLLM's removed name of `structured_outputs.{FIELDS[field]}`; "
                              "send one constraint", field)
    return Guided({FIELDS[f]: value for f, value in given.items()},
                  {FIELDS[f]: f for f in given})
