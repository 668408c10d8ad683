"""CORS, request ids and SSE keep-alive (docs/api.md, "Production edge") in each request
mode, on one server per mode with an API key, one allowed origin and credentials,
``--enable-request-id-headers``, ``--sse-keep-alive-interval 0.5`` and a mock engine that
takes 2 s per step and answers each of 64 prompts with its own scripted reply. ``vrs
frontend`` (the same vrs-rs, its flags handed over by the Python supervisor) and the
render service (both frontends) get the CORS and request-id checks too."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.servers import MODEL, Pool, Server
from tests.e2e.test_render import RenderServer

pytestmark = pytest.mark.e2e

ORIGIN = "https://app.example"
KEY = "edge-key"
CLIENTS = 64
AUTH = {"Authorization": f"Bearer {KEY}"}


def reply(i: int) -> str:
    return f"ok {i:02d}"


class EdgePool(Pool):
    """One middleware server per mode (see the module docstring)."""

    def get(self, mode: str) -> Server:
        if mode not in self.servers:
            replies = self.directory / "replies.json"
            replies.write_text(json.dumps([{"when": f"[req {i:02d}]", "reply": reply(i)}
                                           for i in range(CLIENTS)]), encoding="utf-8")
            self.servers[mode] = Server(mode, self.model, self.directory / f"{mode}.log",
                                        cli_args=(
                "--mock-step-delay-ms", "2000", "--mock-replies", str(replies),
                "--api-key", KEY, "--allowed-origins", json.dumps([ORIGIN]),
                "--allow-credentials", "--enable-request-id-headers",
                "--sse-keep-alive-interval", "0.5"))
        return self.servers[mode]


@pytest.fixture(scope="module")
def edge_pool(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    shared = EdgePool(demo_model, tmp_path_factory.mktemp("edge-servers"))
    yield shared
    shared.close()


@pytest.fixture
def edge(edge_pool: Pool, route_mode: str) -> Server:
    return edge_pool.get(route_mode)


def sdk(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0, timeout=120)


def chat_body(i: int, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": f"[req {i:02d}]"}],
            "max_tokens": 16, **extra}


def preflight(url: str, origin: str) -> httpx.Response:
    return httpx.options(url, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-request-id"})


def test_preflight_allowed_origin_only(edge: Server) -> None:
    url = f"{edge.url}/v1/chat/completions"
    allowed = preflight(url, ORIGIN)  # no API key: a preflight never carries one
    assert allowed.status_code == 200, allowed.text
    headers = allowed.headers
    assert headers["access-control-allow-origin"] == ORIGIN
    assert headers["access-control-allow-credentials"] == "true"
    assert "POST" in headers["access-control-allow-methods"].split(",")
    assert headers["access-control-allow-headers"] == "authorization,content-type,x-request-id"
    assert headers["access-control-max-age"] == "600"
    refused = preflight(url, "https://evil.example")
    assert "access-control-allow-origin" not in refused.headers
    # The actual requests: the page may read the answer (and its request id), a 401 too.
    models = httpx.get(f"{edge.url}/v1/models", headers={"Origin": ORIGIN, **AUTH})
    assert models.status_code == 200
    assert models.headers["access-control-allow-origin"] == ORIGIN
    assert models.headers["access-control-expose-headers"].lower() == "x-request-id"
    denied = httpx.get(f"{edge.url}/v1/models", headers={"Origin": ORIGIN})
    assert denied.status_code == 401
    assert denied.headers["access-control-allow-origin"] == ORIGIN
    other = httpx.get(f"{edge.url}/v1/models", headers={"Origin": "https://evil.example", **AUTH})
    assert "access-control-allow-origin" not in other.headers
    plain = httpx.get(f"{edge.url}/v1/models", headers=AUTH)
    assert not [k for k in plain.headers if k.startswith("access-control")]


def test_request_id_echoed_and_logged(edge: Server) -> None:
    given = "client-req.42:abc"
    response = httpx.post(f"{edge.url}/v1/chat/completions", timeout=60,
                          headers={**AUTH, "X-Request-Id": given},
                          json=chat_body(1, max_tokens=1))
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == given
    assert response.json()["id"] == f"chatcmpl-{given}"
    lines = [line for line in edge.log().splitlines() if "accepted" in line and given in line]
    assert len(lines) == 1, edge.log()[-3000:]
    assert re.search(rf"request_id=chatcmpl-{re.escape(given)}\b", lines[0]), lines[0]
    # Unusable ids (too long, not visible ASCII) and none at all: a fresh id, echoed.
    for headers in ({"X-Request-Id": "x" * 129}, {"X-Request-Id": "two words"}, {}):
        models = httpx.get(f"{edge.url}/v1/models", headers={**AUTH, **headers})
        assert re.fullmatch("[0-9a-f]{32}", models.headers["x-request-id"]), models.headers
    longest = "y" * 128
    models = httpx.get(f"{edge.url}/v1/models", headers={**AUTH, "X-Request-Id": longest})
    assert models.headers["x-request-id"] == longest
    fresh = httpx.post(f"{edge.url}/v1/completions", headers=AUTH, timeout=60,
                       json={"model": MODEL, "prompt": "[req 02]", "max_tokens": 1})
    assert fresh.json()["id"] == f"cmpl-{fresh.headers['x-request-id']}"


def test_frontend_mode_carries_cors_and_request_ids(edge_pool: Pool) -> None:
    server = edge_pool.get("rust-frontend")
    test_preflight_allowed_origin_only(server)
    test_request_id_echoed_and_logged(server)


def test_shared_client_id_keeps_requests_apart(edge: Server) -> None:
    """64 concurrent requests, half streamed, all with one X-Request-Id: each gets its own
    scripted reply (a shared engine request would merge or lose outputs)."""

    async def one(client: httpx.AsyncClient, i: int) -> tuple[str, str, str]:
        headers = {**AUTH, "X-Request-Id": "shared"}
        if i % 2:
            body = chat_body(i, stream=True)
            text, ids = "", set()
            async with client.stream("POST", "/v1/chat/completions", json=body,
                                     headers=headers) as response:
                assert response.status_code == 200
                echoed = response.headers["x-request-id"]
                async for line in response.aiter_lines():
                    data = line.removeprefix("data: ")
                    if not line.startswith("data: ") or data == "[DONE]":
                        continue
                    chunk = json.loads(data)
                    ids.add(chunk["id"])
                    text += "".join(c["delta"].get("content") or "" for c in chunk["choices"])
            (rid,) = ids
            return echoed, rid, text
        response = await client.post("/v1/chat/completions", json=chat_body(i), headers=headers)
        assert response.status_code == 200, response.text
        answer = response.json()
        return (response.headers["x-request-id"], answer["id"],
                answer["choices"][0]["message"]["content"])

    async def run() -> list[tuple[str, str, str]]:
        limits = httpx.Limits(max_connections=CLIENTS)
        async with httpx.AsyncClient(base_url=edge.url, timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, i) for i in range(CLIENTS)))

    results = asyncio.run(run())
    assert [text for _, _, text in results] == [reply(i) for i in range(CLIENTS)]
    assert {(echoed, rid) for echoed, rid, _ in results} == {("shared", "chatcmpl-shared")}
    engine_ids = re.findall(r"engine_request_id=(chatcmpl-shared-[0-9a-f]{32})\b", edge.log())
    assert len(set(engine_ids)) == CLIENTS, engine_ids


def test_keep_alive_comments_while_waiting(edge: Server) -> None:
    """Each engine step takes 2 s: with a 0.5 s interval, comment frames fill the waits,
    before the first token too, and the openai SDK still reads the stream (the three
    streams run at once, sharing the engine's steps)."""

    def raw() -> list[str]:
        with httpx.stream("POST", f"{edge.url}/v1/completions", headers=AUTH, timeout=60,
                          json={"model": MODEL, "prompt": "[req 03]", "max_tokens": 16,
                                "stream": True}) as response:
            assert response.status_code == 200
            return [line for line in response.iter_lines() if line]

    def sdk_completion() -> str:
        stream = sdk(edge).completions.create(model=MODEL, prompt="[req 04]", max_tokens=16,
                                              stream=True)
        return "".join(c.choices[0].text for c in stream if c.choices)

    def sdk_chat() -> list[Any]:
        return list(sdk(edge).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "[req 05]"}], max_tokens=16,
            stream=True, stream_options={"include_usage": True}))

    with ThreadPoolExecutor(3) as pool:
        lines, text, chunks = (f.result() for f in
                               [pool.submit(raw), pool.submit(sdk_completion),
                                pool.submit(sdk_chat)])
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data: "))
    assert first_data >= 2 and set(lines[:first_data]) == {": keep-alive"}, lines
    assert lines.count(": keep-alive") >= 4, lines
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line.removeprefix("data: ")) for line in lines
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert "".join(e["choices"][0]["text"] for e in events) == reply(3)
    assert text == reply(4)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == reply(5)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


@pytest.mark.parametrize("frontend", ["rust", "python"])
def test_render_service_cors_and_request_ids(frontend: str, demo_model: Path,
                                             tmp_path: Path) -> None:
    server = RenderServer(frontend, demo_model, tmp_path / "render.log", extra_args=(
        "--allowed-origins", json.dumps([ORIGIN]), "--enable-request-id-headers"))
    try:
        url = f"{server.url}/v1/chat/completions/render"
        assert preflight(url, ORIGIN).headers["access-control-allow-origin"] == ORIGIN
        assert "access-control-allow-origin" not in preflight(url, "https://evil.example").headers
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(url, json=body, headers={"X-Request-Id": "render-1", "Origin": ORIGIN})
        assert answer.status_code == 200, answer.text
        assert answer.headers["x-request-id"] == "render-1"
        assert answer.headers["access-control-allow-origin"] == ORIGIN
        assert answer.json()["request_id"] == "chatcmpl-render-1"
    finally:
        server.stop()
