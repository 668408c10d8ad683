"""Fixtures of the end-to-end suite: the demo model, its tokenizer, and one shared mock
server per frontend mode (started on first use, stopped and checked at the end)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from features import FeaturePool
from servers import MODES, Pool, Server


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="session")
def tokenizer(demo_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(demo_model)


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
