"""Fixtures of the end-to-end suite: the demo model, its tokenizer, transformers' fp32 copy
of it, one shared mock server per frontend mode (started on first use, stopped and checked
at the end), and one server per request mode on the real engine, shared by every real-engine
suite (started on first use, stopped and checked once its tests are done).

``mode`` runs a test in the three modes (the launch-path suites); ``route_mode``, and the
``server`` / ``feature_server`` / ``real_server`` fixtures, in ``ROUTE_MODES`` (servers.py
says why)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.features import FeaturePool
from tests.e2e.servers import MODES, REAL_ENGINE_ARGS, ROUTE_MODES, Pool, Server


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="session")
def tokenizer(demo_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_model)


@pytest.fixture(scope="session")
def reference(demo_model: Path) -> Any:
    """The demo model in transformers, fp32: what the real engine must agree with."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(demo_model, dtype=torch.float32).eval()


@pytest.fixture(scope="session", params=ROUTE_MODES)
def real_server(request: pytest.FixtureRequest, demo_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo model on the real engine (no --mock) behind each request mode, with a small
    prefill budget so that prompts prefill in chunks. Session-scoped: pytest runs every
    real-engine test of one mode (test_evaluation, test_lm_eval, test_real_engine,
    test_structured_outputs) against one server, then stops it; every such test asks
    only for its own answers, so sharing the engine changes none of them."""
    log = tmp_path_factory.mktemp("real") / f"{request.param}.log"
    server = Server(request.param, demo_model, log, mock=False, cli_args=REAL_ENGINE_ARGS)
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


@pytest.fixture(scope="session")
def pool(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    shared = Pool(demo_model, tmp_path_factory.mktemp("servers"))
    yield shared
    shared.close()


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """Each of the three modes (a test that starts its own servers to check the launch)."""
    return request.param


@pytest.fixture(params=ROUTE_MODES)
def route_mode(request: pytest.FixtureRequest) -> str:
    """Each request mode (a test of what a server answers)."""
    return request.param


@pytest.fixture
def server(pool: Pool, route_mode: str) -> Server:
    """The shared server of ``route_mode`` (every test using it runs once per request
    mode)."""
    return pool.get(route_mode)


@pytest.fixture(scope="session")
def feature_pool(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    shared = FeaturePool(demo_model, tmp_path_factory.mktemp("feature-servers"))
    yield shared
    shared.close()


@pytest.fixture
def feature_server(feature_pool: Pool, route_mode: str) -> Server:
    """The shared feature server of ``route_mode`` (scripted replies, reasoning parser)."""
    return feature_pool.get(route_mode)
