"""The Responses API's store (``--enable-responses-store``; vLLM's
``VLLM_ENABLE_RESPONSES_API_STORE=1`` on the python server) on the Rust and Python
frontends, through the official `openai` SDK: store then retrieve, input_items, delete;
``previous_response_id`` continuing a conversation (its prompt the chat request with the
first turn, through `vrs render`); background then poll until completed; a background
stream and its replay (``starting_after``); cancel of a background run; the LRU bound.
With the store off (the default), vLLM's answers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.features import EXPECTED_SCRIPT, REPLIES
from tests.e2e.servers import MODEL, Pool, Server
from tests.e2e.test_render import RenderServer
from tests.e2e.test_responses_api import renderer, renderers  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

BOUND = 4  # --responses-store-max-entries


class StorePool(Pool):
    """One store-enabled server per mode (20 ms per token, so that a run can be
    cancelled); the python one enabled by vLLM's environment variable."""

    def get(self, mode: str) -> Server:
        if mode not in self.servers:
            replies = self.directory / "replies.json"
            replies.write_text(json.dumps([{"when": w, "reply": r} for w, r in REPLIES]))
            flag = () if mode == "python" else ("--enable-responses-store",)
            self.servers[mode] = Server(
                mode, self.model, self.directory / f"{mode}.log",
                env={"VLLM_ENABLE_RESPONSES_API_STORE": "1"} if not flag else None,
                cli_args=("--mock-step-delay-ms", "20", "--mock-replies", str(replies),
                          "--responses-store-max-entries", str(BOUND), *flag))
        return self.servers[mode]


@pytest.fixture(scope="module")
def store_pool(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    shared = StorePool(demo_model, tmp_path_factory.mktemp("store-servers"))
    yield shared
    shared.close()


@pytest.fixture
def store_server(store_pool: Pool, route_mode: str) -> Server:
    return store_pool.get(route_mode)


def create(server: Server, **kwargs: Any) -> Any:
    kwargs.setdefault("max_output_tokens", 60)
    return server.client().responses.create(model=MODEL, **kwargs)


def wait_done(client: openai.OpenAI, response_id: str) -> Any:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
        time.sleep(0.05)
    raise AssertionError(f"{response_id} did not finish")


def test_store_retrieve_items_delete(store_server: Server) -> None:
    client = store_server.client()
    response = create(store_server, input="[script] go", instructions="Be brief.")
    assert response.store is True and response.output_text == EXPECTED_SCRIPT
    assert response.usage.input_tokens_details.cache_write_tokens == 0
    again = client.responses.retrieve(response.id)
    assert again.model_dump() == response.model_dump()
    items = client.responses.input_items.list(response.id)
    assert [(i.type, i.role, i.content[0].text) for i in items.data] == [
        ("message", "user", "[script] go")]
    assert items.first_id == items.data[0].id and items.has_more is False
    assert httpx.delete(f"{store_server.url}/v1/responses/{response.id}").json() == {
        "id": response.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError) as info:
        client.responses.retrieve(response.id)
    assert info.value.body["message"] == f"Response with id '{response.id}' not found."
    # store=false: answered, not kept.
    unkept = create(store_server, input="[script] go", store=False)
    assert unkept.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unkept.id)
    # A stream is kept too, as its final event has it.
    events = list(create(store_server, input="[script] go", stream=True))
    final = events[-1].response
    assert final.store is True
    assert client.responses.retrieve(final.id).output_text == EXPECTED_SCRIPT


def test_previous_response_id_continues(store_server: Server,
                                        renderer: RenderServer) -> None:  # noqa: F811
    client = store_server.client()
    first = create(store_server, input="[script] go", instructions="Old rules.")
    second = create(store_server, input="and again", previous_response_id=first.id,
                    instructions="New rules.")
    assert second.previous_response_id == first.id and second.status == "completed"
    # The second prompt: the new instructions, the first turn (its instructions dropped),
    # its answer, the new input, as vLLM renders them.
    chat = {"model": MODEL, "messages": [
        {"role": "system", "content": "New rules."}, {"role": "user", "content": "[script] go"},
        {"role": "assistant", "content": EXPECTED_SCRIPT},
        {"role": "user", "content": "and again"}]}
    rendered = renderer.post("chat", chat).json()
    assert second.usage.input_tokens == len(rendered["prompt_token_ids"])
    # A chain: the third turn holds both earlier ones.
    third = create(store_server, input="once more", previous_response_id=second.id)
    chat["messages"] = chat["messages"][1:] + [
        {"role": "assistant", "content": second.output_text},
        {"role": "user", "content": "once more"}]
    rendered = renderer.post("chat", chat).json()
    assert third.usage.input_tokens == len(rendered["prompt_token_ids"])
    with pytest.raises(openai.NotFoundError) as info:
        create(store_server, input="x", previous_response_id="resp_nope")
    assert info.value.body["param"] == "previous_response_id"
    assert client.responses.retrieve(third.id).previous_response_id == second.id


def test_background_poll_and_stream(store_server: Server) -> None:
    client = store_server.client()
    queued = create(store_server, input="[script] go", background=True)
    assert queued.status == "queued" and queued.output == [] and queued.usage is None
    done = wait_done(client, queued.id)
    assert done.status == "completed" and done.output_text == EXPECTED_SCRIPT
    assert done.id == queued.id and done.usage.output_tokens > 0
    # Background + stream: the events as they come, then again from any point.
    events = list(create(store_server, input="[script] go", background=True, stream=True))
    assert events[-1].type == "response.completed"
    rid = events[-1].response.id
    assert [e.sequence_number for e in events] == list(range(len(events)))
    replay = list(client.responses.retrieve(rid, stream=True, starting_after=2))
    assert [e.sequence_number for e in replay] == list(range(3, len(events)))
    assert client.responses.retrieve(rid).output_text == EXPECTED_SCRIPT


def test_cancel_background(store_server: Server) -> None:
    client = store_server.client()
    running = create(store_server, input="ramble", background=True, max_output_tokens=1500)
    time.sleep(0.3)
    assert client.responses.retrieve(running.id).status == "in_progress"
    cancelled = client.responses.cancel(running.id)
    assert cancelled.status == "cancelled"
    time.sleep(0.2)
    assert client.responses.retrieve(running.id).status == "cancelled"
    load = httpx.get(f"{store_server.url}/load").json()
    assert load["server_load"] == 0  # the engine request ended with the run
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.cancel(running.id)
    assert info.value.body["message"] == "Cannot cancel a synchronous response."
    done = create(store_server, input="[script] go")
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(done.id)


def test_lru_bound(store_server: Server) -> None:
    client = store_server.client()
    ids = [create(store_server, input="[script] go").id for _ in range(BOUND + 1)]
    client.responses.retrieve(ids[1])  # used: the oldest is now ids[0], then ids[2]
    ids.append(create(store_server, input="[script] go").id)
    for gone in (ids[0], ids[2]):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(gone)
    for kept in (ids[1], *ids[3:]):
        assert client.responses.retrieve(kept).status == "completed"


def test_store_off_answers_as_vllm(feature_server: Server) -> None:
    """The default: ``store`` true is served unstored; background is vLLM's 400; an id
    is vLLM's 404 everywhere."""
    client = feature_server.client()
    response = create(feature_server, input="[script] go", store=True)
    assert response.store is False and response.output_text == EXPECTED_SCRIPT
    assert response.usage.input_tokens_details.cache_write_tokens == 0
    with pytest.raises(openai.BadRequestError) as info:
        create(feature_server, input="x", background=True)
    assert info.value.body["param"] == "background"
    assert "--enable-responses-store" in info.value.body["message"]
    with pytest.raises(openai.NotFoundError) as info:
        create(feature_server, input="x", previous_response_id="resp_1")
    assert info.value.body["message"] == "Response with id 'resp_1' not found."
    for call in (lambda: client.responses.retrieve(response.id),
                 lambda: client.responses.cancel(response.id),
                 lambda: client.responses.input_items.list(response.id)):
        with pytest.raises(openai.NotFoundError) as info:
            call()
        assert info.value.body["param"] == "response_id"
