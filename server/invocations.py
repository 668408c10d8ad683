"""``POST /invocations``, vLLM's SageMaker entry point: the body decides the endpoint. A
body with ``messages`` is a chat completion request (``/v1/chat/completions``), one with
``prompt`` a completion request (``/v1/completions``), tried in that order as vLLM does;
anything else is a 400 naming both. The chosen endpoint then runs exactly as on its own
path (admission, checks, streaming, error bodies). ``GET|POST /ping`` is ``App.health``.
Mirrors ``rust/server/src/routes/invocations.rs``.
"""

from __future__ import annotations

import msgspec

from server import params
from server.error import bad_request

NO_HANDLER = ("Cannot find suitable handler for request. Expected one of: a chat completion "
              "request (with `messages`), a completion request (with `prompt`)")

_probe = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode  # top-level keys; values unbuilt


def is_chat(body: bytes) -> bool:
    """True for a chat body (``messages`` not null), False for a completion (``prompt`` not
    null), else a 400; a body that is not a JSON object gets the endpoints' own 400."""
    try:
        keys = _probe(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        params.decode(body, chat=True)  # raises the endpoints' error for this body
        raise bad_request("the request body must be a JSON object") from None

    def given(key: str) -> bool:
        raw = keys.get(key)
        return raw is not None and bytes(raw) != b"null"

    if given("messages"):
        return True
    if given("prompt"):
        return False
    raise bad_request(NO_HANDLER)
