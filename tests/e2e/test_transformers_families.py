"""Families vrs has no decoder for, served end to end by the transformers backend.

`vrs serve <checkpoint>` (``--model-impl auto`` picks the backend) on each tiny family of
tests/engine/transformers_kit.py, with the demo model's tokenizer files beside the
weights (every id the models produce, below 512, is one of its tokens): greedy
completions of token-id prompts, sent concurrently (batched in the engine; the long one
prefills in chunks of 32 and passes every sliding window), must be transformers'
generate() tokens, read back with vLLM's ``return_token_ids``. Both frontends (vrs-rs and
the Python server) serve every family. One more run serves Gemma 2 with two data-parallel
engines (the three requests spread over both).
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, Server
from tests.engine.engine_kit import hf_greedy
from tests.engine.transformers_kit import FAMILIES, build

pytestmark = pytest.mark.e2e

MAX_TOKENS = 8
CASES = [(mode, family) for mode in ("rust-serve", "python") for family in sorted(FAMILIES)]
DATA_PARALLEL = ("rust-serve", "gemma2", 2)  # and one run with two engines
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@pytest.fixture(scope="module")
def family_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("transformers-families")


@pytest.fixture(scope="module")
def references() -> Iterator[dict[str, Any]]:
    cache: dict[str, Any] = {}
    yield cache
    cache.clear()


def checkpoint(family: str, root: Path, demo_model: Path,
               builder: Callable[[str, Path], Path] = build) -> Path:
    """``family``'s tiny checkpoint under ``root`` (``builder`` writes it on first use),
    with the demo model's tokenizer files."""
    path = root / family
    if not path.exists():
        builder(family, root)
        for name in TOKENIZER_FILES:
            shutil.copy(demo_model / name, path / name)
    return path


def prompts() -> list[list[int]]:
    rng = random.Random(34)
    return [[rng.randrange(3, 512) for _ in range(n)] for n in (5, 19, 45)]


@pytest.mark.parametrize(("mode", "family", "engines"),
                         [(mode, family, 1) for mode, family in CASES] + [DATA_PARALLEL])
def test_greedy_equals_transformers(mode: str, family: str, engines: int, family_root: Path,
                                    demo_model: Path, references: dict[str, Any],
                                    tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    path = checkpoint(family, family_root, demo_model)
    if family not in references:
        references[family] = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32).eval()
    expected = [hf_greedy(references[family], ids, MAX_TOKENS) for ids in prompts()]
    server = Server(mode, path, tmp_path / "server.log", mock=False, max_model_len=512,
                    engine_count=engines,
                    cli_args=(*REAL_ENGINE_ARGS, "--data-parallel-size", str(engines)))
    try:
        def complete(ids: list[int]) -> dict[str, Any]:
            reply = httpx.post(f"{server.url}/v1/completions", timeout=120, json={
                "model": MODEL, "prompt": ids, "max_tokens": MAX_TOKENS, "temperature": 0,
                "ignore_eos": True, "return_token_ids": True})
            assert reply.status_code == 200, reply.text
            body: dict[str, Any] = reply.json()
            return body

        with ThreadPoolExecutor(len(expected)) as pool:
            replies = list(pool.map(complete, prompts()))
        for ids, want, body in zip(prompts(), expected, replies, strict=True):
            choice = body["choices"][0]
            assert choice["prompt_token_ids"] == ids
            assert choice["token_ids"] == want, f"{len(ids)}-token prompt"
            assert choice["finish_reason"] == "length"
        assert "transformers backend" in server.log()
    finally:
        assert server.stop() == 0, server.log()
        server.assert_all_gone()
