"""``POST /invocations``, vLLM's SageMaker entry point: the body decides the endpoint
(``messages``: chat, else ``prompt``: completions), which then runs exactly as on its own
path. Rust: rust/server/src/routes/invocations.rs. Behaviour: docs/api.md, "Routes".
"""

from __future__ import annotations

import msgspec

from server.dispatch import generate
from server.edge import Receive, Scope, Send
from server.edge.error import bad_request
from server.output import response
from server.routes import chat_completions, completions
from server.state import State
from server.validate import params
from server.validate.prompt import Prompt

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


async def invocations(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    """A chat or a completions request, as the body decides."""
    kind: list[bool | None] = [None]

    async def build(body: bytes) -> list[Prompt]:
        if kind[0] is None:
            kind[0] = is_chat(body)
        if kind[0]:
            return await chat_completions.build(state, body)
        return await completions.build(state, body)

    def shapes_of(prompts: list[Prompt], rid: str) -> response.Shapes:
        if kind[0]:
            return chat_completions.shapes(state, prompts, rid)
        return completions.shapes(state, prompts, rid)

    await generate(state, receive, send, build, shapes_of,
                   lambda: chat_completions.ID_PREFIX if kind[0] else completions.ID_PREFIX)
