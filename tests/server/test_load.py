"""``GET /load``: vLLM's ``server_load``, and each engine's tensor-parallel ranks from the
READY messages the engine client keeps, by engine index. The same body as
rust/server/src/routes/tests/load.rs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from engine import protocol as p
from server.routes.health import load_body
from tests.server.server_kit import PythonServer

pytestmark = pytest.mark.server


def _engine(engine_index: int, ranks: list[p.RankMemory]) -> p.Ready:
    return p.Ready(engine_index=engine_index, max_model_len=64, vocab_size=11, block_size=16,
                   num_kv_blocks=0, eos_token_ids=[1], model_name="tiny", is_mock=True,
                   ranks=ranks)


def test_load_body_lists_each_engines_ranks_by_engine_index() -> None:
    # Two tensor-parallel ranks on engine 1 (READY before engine 0's), none on engine 2.
    readies = {
        1: _engine(1, [p.RankMemory(0, "cuda:2", 8_053_063_680, 1 << 33),
                       p.RankMemory(1, "cuda:3", 8_053_063_681, 1 << 33)]),
        2: _engine(2, []),
        0: _engine(0, [p.RankMemory(0, "cpu", 1, 0)]),
    }
    assert msgspec.json.encode(load_body(3, readies.values())).decode() == (
        '{"server_load":3,"engines":['
        '{"engine_index":0,"ranks":[{"rank":0,"device":"cpu","weight_bytes":1,'
        '"kv_cache_bytes":0}]},'
        '{"engine_index":1,"ranks":['
        '{"rank":0,"device":"cuda:2","weight_bytes":8053063680,"kv_cache_bytes":8589934592},'
        '{"rank":1,"device":"cuda:3","weight_bytes":8053063681,"kv_cache_bytes":8589934592}]},'
        '{"engine_index":2,"ranks":[]}]}'
    )


@pytest.fixture(scope="module")
def two_engines(demo_model: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[PythonServer]:
    server = PythonServer(demo_model, tmp_path_factory.mktemp("load") / "server.log",
                          data_parallel_size=2)
    yield server
    assert server.stop() == 0, server.log()


def test_load_lists_every_engine(two_engines: PythonServer) -> None:
    # The mock engines' READY report no ranks.
    response = httpx.get(f"{two_engines.url}/load", timeout=10)
    assert response.status_code == 200, response.text
    assert response.text == ('{"server_load":0,"engines":[{"engine_index":0,"ranks":[]},'
                             '{"engine_index":1,"ranks":[]}]}')
