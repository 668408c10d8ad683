"""Fixtures over the tiny random models of engine_kit.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.engine.engine_kit import BUILDERS, build_family


@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    return {family: build_family(family, root) for family in BUILDERS}


@pytest.fixture(scope="session")
def hf_models(model_dirs: dict[str, Path]) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    return {
        family: AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        for family, path in model_dirs.items()
    }


@pytest.fixture(params=sorted(BUILDERS))
def family(request: pytest.FixtureRequest) -> str:
    return request.param
