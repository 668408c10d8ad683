"""server/engine_client/ RequestStream: outputs reach the one consumer in batches, a
waiting consumer is woken by the next output or by a failure, a consumer that stops
reading fails the stream past the limit, and a cancelled wait loses nothing."""

from __future__ import annotations

import asyncio

import pytest

from engine import protocol as p
from server.edge.error import APIError
from server.engine_client import ClientDisconnected, RequestStream

pytestmark = pytest.mark.unit


def _out(token: int) -> p.EngineCoreOutput:
    return p.EngineCoreOutput("r", [token])


def test_outputs_queued_before_get_come_in_one_batch() -> None:
    async def run() -> list[list[int]]:
        stream = RequestStream("r", b"\x00\x00")
        assert stream.put(_out(1), 10) and stream.put(_out(2), 10)
        first = await stream.get()
        assert stream.put(_out(3), 10)
        return [[o.new_token_ids[0] for o in first],
                [o.new_token_ids[0] for o in await stream.get()]]

    assert asyncio.run(run()) == [[1, 2], [3]]


def test_a_waiting_consumer_is_woken_by_each_put() -> None:
    async def run() -> list[int]:
        stream = RequestStream("r", b"\x00\x00")
        got: list[int] = []

        async def consume() -> None:
            while len(got) < 3:
                got.extend(o.new_token_ids[0] for o in await stream.get())

        consumer = asyncio.create_task(consume())
        for token in (7, 8, 9):
            await asyncio.sleep(0)  # the consumer is waiting again
            stream.put(_out(token), 10)
        await asyncio.wait_for(consumer, 5)
        return got

    assert asyncio.run(run()) == [7, 8, 9]


def test_fail_wakes_the_waiting_consumer_after_what_was_queued() -> None:
    async def run() -> None:
        stream = RequestStream("r", b"\x00\x00")
        waiting = asyncio.create_task(stream.get())
        await asyncio.sleep(0)
        stream.fail(ClientDisconnected())
        with pytest.raises(ClientDisconnected):
            await asyncio.wait_for(waiting, 5)
        stream.put(_out(4), 10)  # queued outputs still come first
        assert [o.new_token_ids for o in await stream.get()] == [[4]]
        with pytest.raises(ClientDisconnected):
            await stream.get()

    asyncio.run(run())


def test_a_consumer_that_does_not_read_fails_past_the_limit() -> None:
    async def run() -> None:
        stream = RequestStream("r", b"\x00\x00")
        assert stream.put(_out(1), 2) and stream.put(_out(2), 2)
        assert not stream.put(_out(3), 2)
        with pytest.raises(APIError, match="not reading"):
            await stream.get()

    asyncio.run(run())


def test_a_cancelled_wait_loses_no_output() -> None:
    async def run() -> list[list[int]]:
        stream = RequestStream("r", b"\x00\x00")
        waiting = asyncio.create_task(stream.get())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        stream.put(_out(5), 10)
        return [o.new_token_ids for o in await asyncio.wait_for(stream.get(), 5)]

    assert asyncio.run(run()) == [[5]]
