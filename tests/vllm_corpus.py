"""vLLM's own test-suite request bodies (tests/vllm_bodies/, its README.md says where they
came from): loading them, sending one to a server over HTTP, and judging the answer
against what vLLM's test expects and against the SDKs' own response types.

tests/e2e/test_vllm_bodies.py replays every body against each frontend; the known gaps
(bodies a frontend cannot answer yet, with the field that blocks them) are
tests/vllm_bodies/known_gaps.json."""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic.types as anthropic_types
import httpx
import openai.types as openai_types
import openai.types.chat as openai_chat
import openai.types.responses as openai_responses
import pydantic

ROOT = Path(__file__).resolve().parents[1]
BODIES_DIR = ROOT / "tests" / "vllm_bodies"
GAPS_PATH = BODIES_DIR / "known_gaps.json"
# The most of the bodies vLLM answers with success that may be known gaps (issue #39).
MAX_GAP_SHARE = 0.05
# "$VOCAB", "$VOCAB-1", "$VOCAB+1": an id the vLLM test computed from its model's vocabulary.
_VOCAB_RE = re.compile(r"^\$VOCAB([+-]\d+)?$")
# "$RESPONSE_ID:<body id>": the id of the Responses answer to that earlier body.
RESPONSE_ID = "$RESPONSE_ID:"


@dataclass(frozen=True)
class Body:
    """One request of vLLM's tests (one line of a tests/vllm_bodies/*.jsonl file)."""

    id: str
    route: str
    method: str
    stream: bool
    expect: int | None  # None: vLLM's test expects success; else the 4xx it asserts
    source: str
    body: Any
    note: str | None


def load_bodies() -> list[Body]:
    """Every body of every tests/vllm_bodies/*.jsonl file, in file then line order."""
    bodies: list[Body] = []
    for path in sorted(BODIES_DIR.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            entry = json.loads(line)
            expect = entry["expect"]
            assert expect == "success" or (isinstance(expect, int) and 400 <= expect < 500), (
                f"{path.name}:{number}: expect must be \"success\" or a 4xx status")
            bodies.append(Body(entry["id"], entry["route"], entry.get("method", "POST"),
                               entry["stream"], None if expect == "success" else expect,
                               entry["source"], entry["body"], entry.get("note")))
    ids = [body.id for body in bodies]
    assert len(ids) == len(set(ids)), "tests/vllm_bodies: duplicate ids"
    seen: set[str] = set()
    for body in bodies:
        for earlier in references(body.body):
            assert earlier in seen, f"{body.id} refers to {earlier}, no earlier body"
        seen.add(body.id)
    return bodies


def references(value: Any) -> list[str]:
    """The body ids whose Responses answer ``value`` refers to ("$RESPONSE_ID:<id>")."""
    if isinstance(value, dict):
        return [ref for item in value.values() for ref in references(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in references(item)]
    if isinstance(value, str) and value.startswith(RESPONSE_ID):
        return [value.removeprefix(RESPONSE_ID)]
    return []


def load_gaps() -> dict[str, dict[str, str]]:
    """known_gaps.json: body id -> {frontend mode -> what blocks it}."""
    if not GAPS_PATH.exists():
        return {}
    gaps: dict[str, dict[str, str]] = json.loads(GAPS_PATH.read_text(encoding="utf-8"))
    return gaps


def write_gaps(mode: str, blocked: dict[str, str]) -> None:
    """Replace ``mode``'s entries in known_gaps.json with ``blocked`` (id -> reason)."""
    gaps = {body_id: {m: r for m, r in modes.items() if m != mode}
            for body_id, modes in load_gaps().items()}
    for body_id, reason in blocked.items():
        gaps.setdefault(body_id, {})[mode] = reason
    kept = {body_id: dict(sorted(modes.items())) for body_id, modes in sorted(gaps.items())
            if modes}
    GAPS_PATH.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n",
                         encoding="utf-8")


def substitute(value: Any, model: str, vocab_size: int,
               response_ids: dict[str, str | None] | None = None) -> Any:
    """The body with its placeholders filled: "$MODEL" is the served model's name; "$VOCAB",
    "$VOCAB-1", "$VOCAB+1" (a value, or a key as in logit_bias) a token id relative to the
    served model's vocabulary size; "$RESPONSE_ID:<body id>" the id this server gave its
    answer to that body (``response_ids``; a stand-in id when it gave none)."""
    if isinstance(value, dict):
        return {_fill_key(key, vocab_size): substitute(item, model, vocab_size, response_ids)
                for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, model, vocab_size, response_ids) for item in value]
    if value == "$MODEL":
        return model
    if isinstance(value, str) and (match := _VOCAB_RE.match(value)):
        return vocab_size + int(match.group(1) or 0)
    if isinstance(value, str) and value.startswith(RESPONSE_ID):
        given = (response_ids or {}).get(value.removeprefix(RESPONSE_ID))
        return given or "resp_never_answered"
    return value


def _fill_key(key: str, vocab_size: int) -> str:
    match = _VOCAB_RE.match(key)
    return str(vocab_size + int(match.group(1) or 0)) if match else key


@dataclass
class Outcome:
    """What a server answered: its status, and for a refusal what it names (the error's
    ``param``, else its message); ``problem`` is why a 200 answer is not well formed."""

    status: int
    refused: str | None = None
    problem: str | None = None
    response_id: str | None = None  # a Responses answer's id (what later bodies refer to)


def _events_by_type(union: Any) -> dict[str, type[pydantic.BaseModel]]:
    """The members of an SDK stream-event union (``Annotated[Union[...], discriminator]``),
    by the literal of their ``type`` field."""
    members = typing.get_args(typing.get_args(union)[0])
    return {typing.get_args(member.model_fields["type"].annotation)[0]: member
            for member in members}


_RESPONSE_EVENTS = _events_by_type(openai_responses.ResponseStreamEvent)
_MESSAGES_EVENTS = _events_by_type(anthropic_types.RawMessageStreamEvent)


def send(http: httpx.Client, base_url: str, body: Body, payload: Any) -> Outcome:
    """Send one body (``payload``: it with placeholders filled) and judge the answer."""
    url = base_url + body.route
    if body.method == "GET":
        response = http.get(url)
        return _judge_json(body, response.status_code, response.content)
    content = json.dumps(payload).encode()
    headers = {"content-type": "application/json"}
    if not body.stream:
        response = http.post(url, content=content, headers=headers)
        return _judge_json(body, response.status_code, response.content)
    with http.stream("POST", url, content=content, headers=headers) as response:
        if response.status_code != 200:
            return _judge_json(body, response.status_code, response.read())
        try:
            events = list(_sse_payloads(response.iter_lines()))
        except ValueError as exc:
            return Outcome(200, problem=f"malformed SSE: {exc}")
    created = next((event["response"].get("id") for event in events if isinstance(event, dict)
                    and event.get("type") == "response.created"
                    and isinstance(event.get("response"), dict)), None)
    return Outcome(200, problem=_check_events(body.route, events),
                   response_id=created if body.route == "/v1/responses" else None)


def _judge_json(body: Body, status: int, content: bytes) -> Outcome:
    try:
        answer = json.loads(content)
    except ValueError:
        return Outcome(status, problem=f"not JSON: {content[:120]!r}")
    if status != 200:
        return Outcome(status, refused=_refusal(answer))
    response_id = answer.get("id") if body.route == "/v1/responses" else None
    return Outcome(status, problem=_check_answer(body.route, answer),
                   response_id=response_id if isinstance(response_id, str) else None)


def _refusal(answer: Any) -> str:
    """What an error answer names: its ``param`` when it has one, else its message."""
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return f"(no error object: {str(answer)[:80]})"
    param = error.get("param")
    if isinstance(param, str) and param:
        return param
    return str(error.get("message", ""))[:120]


def _sse_payloads(lines: Iterator[str]) -> Iterator[Any]:
    """The JSON payloads of an SSE body (``event:`` lines and ``[DONE]`` skipped)."""
    for line in lines:
        if not line or line.startswith((":", "event:")):
            continue
        if not line.startswith("data:"):
            raise ValueError(f"unexpected line {line[:80]!r}")
        data = line.removeprefix("data:").strip()
        if data != "[DONE]":
            yield json.loads(data)


def _check_answer(route: str, answer: Any) -> str | None:
    """Why a 200 JSON answer is not what the SDK parses for ``route`` (None: it is)."""
    try:
        if route in ("/v1/chat/completions", "/v1/chat/completions/batch", "/invocations"):
            openai_chat.ChatCompletion.model_validate(answer)
        elif route == "/v1/completions":
            openai_types.Completion.model_validate(_echo_logprobs_filled(answer))
        elif route == "/v1/responses":
            openai_responses.Response.model_validate(answer)
        elif route == "/v1/messages":
            anthropic_types.Message.model_validate(answer)
        elif route == "/tokenize":
            assert isinstance(answer["tokens"], list) and answer["count"] == len(answer["tokens"])
        elif route == "/detokenize":
            assert isinstance(answer["prompt"], str)
        else:
            assert isinstance(answer, dict)
    except pydantic.ValidationError as exc:
        return f"not well formed: {_first_error(exc)}"
    except (AssertionError, KeyError, TypeError) as exc:
        return f"not well formed: {type(exc).__name__} {exc}"
    return None


def _first_error(exc: pydantic.ValidationError) -> str:
    """``<model>.<location>: <message>`` of a validation error's first complaint (and how
    many there are)."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{exc.title}.{where}: {first['msg']}{more}"


def _check_events(route: str, events: list[Any]) -> str | None:
    """Why a stream's events are not what the SDK parses for ``route`` (None: they are)."""
    if not events:
        return "an empty stream"
    for event in events:
        if isinstance(event, dict) and ("error" in event
                                        or event.get("type") in ("error", "response.failed")):
            return f"error event in the stream: {str(event)[:200]}"
        try:
            if route == "/v1/chat/completions":
                openai_chat.ChatCompletionChunk.model_validate(event)
            elif route == "/v1/completions":
                openai_types.Completion.model_validate(
                    _echo_logprobs_filled(_finish_reason_filled(event)))
            elif route in ("/v1/responses", "/v1/messages"):
                kinds = _RESPONSE_EVENTS if route == "/v1/responses" else _MESSAGES_EVENTS
                kind = event.get("type") if isinstance(event, dict) else None
                if kind == "ping" and route == "/v1/messages":
                    continue  # the SDK skips Anthropic's keep-alive
                if kind not in kinds:
                    return f"event of an unknown type: {str(event)[:200]}"
                kinds[kind].model_validate(event)
            else:
                return f"no stream type known for {route}"
        except pydantic.ValidationError as exc:
            return f"event not well formed: {_first_error(exc)}"
    return None


def _finish_reason_filled(chunk: Any) -> Any:
    """A completions chunk as the SDK's ``Completion`` takes it: that type has no null
    ``finish_reason``, but OpenAI's own stream (and vLLM's) sends null on every chunk but
    the last, and the SDK parses chunks without validating; a null is checked here as
    "stop" so that every other field is still validated."""
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        return chunk
    choices = [dict(choice, finish_reason="stop")
               if isinstance(choice, dict) and choice.get("finish_reason") is None else choice
               for choice in chunk["choices"]]
    return {**chunk, "choices": choices}


def _echo_logprobs_filled(answer: Any) -> Any:
    """A completion as the SDK's ``Completion`` takes it: that type has no null in
    ``logprobs.token_logprobs`` / ``top_logprobs``, but with ``echo`` the first prompt token
    has none (OpenAI's API and vLLM send null there; vLLM's test_echo_logprob_completion
    asserts it); such a null is checked as 0.0 / {} so that the rest is still validated."""
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        return answer
    choices = []
    for choice in answer["choices"]:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        if isinstance(logprobs, dict):
            filled = dict(logprobs)
            for key, empty in (("token_logprobs", 0.0), ("top_logprobs", {})):
                if isinstance(filled.get(key), list):
                    filled[key] = [empty if item is None else item for item in filled[key]]
            choice = {**choice, "logprobs": filled}
        choices.append(choice)
    return {**answer, "choices": choices}


def verdict(body: Body, outcome: Outcome) -> tuple[str, str | None]:
    """("ok", None) when the answer is what vLLM's test expects and well formed;
    ("gap", what) when a frontend refuses a body vLLM answers (or answers one vLLM
    refuses, or refuses it with another 4xx): the known-gaps kind; ("fail", why) otherwise
    (any 5xx, a malformed answer)."""
    if outcome.status >= 500:
        return "fail", f"{outcome.status}: {outcome.refused or outcome.problem}"
    if outcome.problem is not None:
        if body.expect is not None and outcome.problem.startswith("error event"):
            return "ok", None  # vLLM's test takes a streamed error as the refusal too
        return "fail", outcome.problem
    if body.expect is None:
        if outcome.status == 200:
            return "ok", None
        return "gap", f"{outcome.status} {outcome.refused}"
    if outcome.status == body.expect:
        return "ok", None
    if outcome.status == 200:
        return "gap", f"answered, vLLM refuses ({body.expect})"
    return "gap", f"{outcome.status} (vLLM {body.expect}) {outcome.refused}"
