"""Fixtures of the end-to-end suite: the demo model, its tokenizer, transformers' fp32 copy
of it, one shared mock server per frontend mode (started on first use, stopped and checked
at the end), and per test module a server per mode on the real engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from features import FeaturePool
from servers import MODES, REAL_ENGINE_ARGS, Pool, Server


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


@pytest.fixture(scope="module", params=MODES)
def real_server(request: pytest.FixtureRequest, demo_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo model on the real engine (no --mock) behind each frontend, with a small
    prefill budget so that prompts prefill in chunks."""
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
    return request.param


@pytest.fixture
def server(pool: Pool, mode: str) -> Server:
    """The shared server of ``mode`` (every test using it runs once per frontend)."""
    return pool.get(mode)


@pytest.fixture(scope="session")
def feature_pool(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    shared = FeaturePool(demo_model, tmp_path_factory.mktemp("feature-servers"))
    yield shared
    shared.close()


@pytest.fixture
def feature_server(feature_pool: Pool, mode: str) -> Server:
    """The shared feature server of ``mode`` (scripted replies, reasoning parser)."""
    return feature_pool.get(mode)
