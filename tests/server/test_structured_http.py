"""Structured outputs over HTTP (the Python server in-process, the mock engine): constrained
requests, streamed or not, with ``n`` > 1 and batched prompts, get their answers (a
constrained stream opens once the engine's first output is in), and the refusals come back
as JSON 400s naming the field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

USER = [{"role": "user", "content": "A person as JSON."}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def stream(server: PythonServer, path: str, body: dict[str, Any]) -> list[Any]:
    with httpx.stream(
        "POST", f"{server.url}{path}", json={"model": MODEL, "stream": True, **body}, timeout=60
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "text/event-stream"
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def test_constrained_chat_streams_with_n(python_server: PythonServer) -> None:
    for constraint in (
        {"response_format": {"type": "json_object"}},
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": SCHEMA},
            }
        },
        {"structured_outputs": {"choice": ["yes", "no"]}},
    ):
        chunks = stream(
            python_server,
            "/v1/chat/completions",
            {"messages": USER, "n": 2, "max_tokens": 8, **constraint},
        )
        assert "error" not in chunks[-1], chunks[-1]
        finishes = {
            c["choices"][0]["index"]: c["choices"][0]["finish_reason"]
            for c in chunks
            if c["choices"] and c["choices"][0]["finish_reason"]
        }
        assert set(finishes) == {0, 1}
        assert set(finishes.values()) <= {"stop", "length"}


def test_constrained_completions_whole_and_batched(python_server: PythonServer) -> None:
    body = {
        "model": MODEL,
        "prompt": ["a", "b"],
        "n": 2,
        "max_tokens": 4,
        "structured_outputs": {"regex": "[a-z]+"},
    }
    response = python_server.post("/v1/completions", body)
    assert response.status_code == 200, response.text
    assert [c["index"] for c in response.json()["choices"]] == [0, 1, 2, 3]
    chunks = stream(python_server, "/v1/completions", {**body, "prompt": "a", "n": 1})
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_refusals_are_json_400s(python_server: PythonServer) -> None:
    for stream_flag in (False, True):
        response = python_server.post(
            "/v1/chat/completions",
            {"messages": USER, "stream": stream_flag, "structured_outputs": {"json": "{not json"}},
        )
        assert response.status_code == 400
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"] == {
            "message": "`structured_outputs.json` must be a JSON Schema (an object, or a "
            "string holding one)",
            "type": "BadRequestError",
            "param": "structured_outputs.json",
            "code": 400,
        }
