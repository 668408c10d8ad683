"""The bad-request table, ``tests/request_cases/bad_requests.json`` (its README says the
format), as the Python tests read it: the in-process server test
(tests/server/test_bad_requests.py) and the e2e one (tests/e2e/test_errors.py) run its
cases, as rust/server/src/routes/tests/bad_requests.rs does, with the same checks
(``assert_error``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import msgspec

ROOT = Path(__file__).resolve().parents[1]
TABLE_PATH = ROOT / "tests" / "request_cases" / "bad_requests.json"
REPEAT = "$repeat"


class Settings(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What the cases assume of the server (each run configures or asserts it)."""

    model: str
    max_model_len: int
    vocab_size: int
    max_batch_prompts: int
    chat_template: str  # a path from the repository root


class Case(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    id: str
    path: str
    status: int
    param: str | None
    words: str
    body: Any = msgspec.UNSET
    raw: str | msgspec.UnsetType = msgspec.UNSET

    def content(self) -> bytes:
        """The bytes posted: ``raw`` as it is, else ``body``'s JSON, ``$repeat`` expanded."""
        if isinstance(self.raw, str):
            return self.raw.encode()
        return json.dumps(expand(self.body)).encode()


ANTHROPIC_PATHS = "/v1/messages"  # the routes that answer in Anthropic's error shape


class Table(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    settings: Settings
    error_types: dict[str, str]
    anthropic_error_types: dict[str, str]
    cases: list[Case]

    def error_type(self, status: int) -> str:
        return self.error_types[str(status)]


def expand(value: Any) -> Any:
    """``{"$repeat": item, "times": n}`` anywhere in ``value`` becomes ``n`` items."""
    if isinstance(value, dict):
        if REPEAT in value:
            if set(value) != {REPEAT, "times"} or not isinstance(value["times"], int):
                raise ValueError(f"a {REPEAT} object has an integer `times` and nothing "
                                 f"else, not {sorted(value)}")
            return [expand(value[REPEAT])] * value["times"]
        return {key: expand(item) for key, item in value.items()}
    if isinstance(value, list):
        return [expand(item) for item in value]
    return value


def _too_wide(value: Any) -> bool:
    """An integer that serde_json would not send back unchanged (outside 64 bits)."""
    if isinstance(value, dict):
        return any(_too_wide(item) for item in value.values())
    if isinstance(value, list):
        return any(_too_wide(item) for item in value)
    return (isinstance(value, int) and not isinstance(value, bool)
            and not -(2**63) <= value < 2**64)


def load_table(path: Path = TABLE_PATH) -> Table:
    """The table, each case checked against the format (one of body/raw, unique ids)."""
    table = msgspec.convert(json.loads(path.read_text(encoding="utf-8")), Table)
    seen: set[str] = set()
    for case in table.cases:
        if case.id in seen:
            raise ValueError(f"{path}: case id {case.id!r} appears twice")
        seen.add(case.id)
        if (case.body is msgspec.UNSET) == (case.raw is msgspec.UNSET) or case.body is None:
            raise ValueError(f"{path}: case {case.id!r} must give exactly one of `body` "
                             "and `raw` (a null body is written `\"raw\": \"null\"`)")
        if _too_wide(case.body):
            raise ValueError(f"{path}: case {case.id!r} has an integer outside 64 bits in "
                             "`body`; write the body as `raw` text")
        types = (table.anthropic_error_types if case.path.startswith(ANTHROPIC_PATHS)
                 else table.error_types)
        if str(case.status) not in types:
            raise ValueError(f"{path}: case {case.id!r} expects status {case.status}, "
                             "which has no entry in its error types")
    return table


TABLE = load_table()


def post(url: str, path: str, content: bytes) -> httpx.Response:
    return httpx.post(f"{url}{path}", content=content,
                      headers={"content-type": "application/json"}, timeout=60)


def assert_error(resp: httpx.Response, status: int, param: str | None, words: str) -> None:
    """An error answer: ``status``, a JSON ``error`` of exactly message, type (the
    table's for the status), param and code, and ``words`` in its message."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (
        TABLE.error_type(status), status, param), error
    assert words in error["message"], error["message"]


def assert_anthropic_error(resp: httpx.Response, status: int, param: str | None,
                           words: str) -> None:
    """An error answer in Anthropic's shape: ``status``, ``{"type": "error", "error":
    {"type", "message"}}`` (the type the table's for the status), the message starting
    ``param: `` when the error names a field, and ``words`` in it."""
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    body = resp.json()
    assert set(body) == {"type", "error"} and body["type"] == "error", body
    error = body["error"]
    assert set(error) == {"type", "message"}, error
    assert error["type"] == TABLE.anthropic_error_types[str(status)], error
    if param is not None:
        assert error["message"].startswith(f"{param}: "), error["message"]
    assert words in error["message"], error["message"]


def assert_case(url: str, case: Case) -> None:
    """``case`` posted to the server at ``url`` gets its error (in Anthropic's shape on the
    ``/v1/messages`` routes)."""
    check = assert_anthropic_error if case.path.startswith(ANTHROPIC_PATHS) else assert_error
    check(post(url, case.path, case.content()), case.status, case.param, case.words)
