"""`vrs bench serve`'s datasets beyond random end to end against `vrs-rs serve --mock` (the
demo model): sharegpt (tests/cli/fixtures/sharegpt_sample.json) and custom
(tests/cli/fixtures/custom_sample.jsonl), samples written for this project, and
prefix_repetition. With
`--ignore-eos` the mock generates exactly the asked tokens, so the result's totals show
that every request asked what the dataset says: the prompts' token counts (vLLM's
`tokenizer(prompt).input_ids`, through transformers here) and their output lengths."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import MockServer, bench, demo_model, run_vrs  # noqa: F401

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures"
SHAREGPT = FIXTURES / "sharegpt_sample.json"
CUSTOM = FIXTURES / "custom_sample.jsonl"


@pytest.fixture(scope="module")
def mock_server(demo_model: Path,  # noqa: F811 - the imported fixture
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = MockServer(demo_model, tmp_path_factory.mktemp("vrs-rs") / "serve.log")
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
def tokenizer(demo_model: Path) -> Any:  # noqa: F811
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo_model))


def usable_sharegpt(tokenizer: Any) -> list[tuple[int, int]]:
    """(prompt tokens, answer tokens) of the entries vLLM keeps (two turns or more; a
    prompt of 4 to 1024 tokens, an answer of 4 or more, 2048 in all)."""
    kept = []
    for entry in json.loads(SHAREGPT.read_text()):
        turns = entry.get("conversations", [])
        if len(turns) < 2:
            continue
        prompt = len(tokenizer(turns[0]["value"]).input_ids)
        answer = len(tokenizer(turns[1]["value"]).input_ids)
        if prompt >= 4 and answer >= 4 and prompt <= 1024 and prompt + answer <= 2048:
            kept.append((prompt, answer))
    return kept


def run(url: str, tmp: Path, *extra: str) -> dict[str, Any]:
    return bench(url, tmp / "r.json", "--ignore-eos", "--max-concurrency", "4", *extra)


def test_sharegpt_asks_what_the_conversations_say(mock_server: str, tokenizer: Any,
                                                  tmp_path: Path) -> None:
    kept = usable_sharegpt(tokenizer)
    # of the sample's 7 entries: "Hi" (2 tokens), a single turn and a non-ShareGPT entry go
    assert len(kept) == 4
    # as many requests as usable entries: each exactly once
    result = run(mock_server, tmp_path, "--dataset-name", "sharegpt", "--dataset-path",
                 str(SHAREGPT), "--num-prompts", str(len(kept)))
    assert (result["completed"], result["failed"]) == (4, 0), result["error_samples"]
    assert result["total_input_tokens"] == sum(p for p, _ in kept)
    assert result["total_output_tokens"] == sum(a for _, a in kept)
    # more requests than entries: drawn again; a fixed output length for every one
    result = run(mock_server, tmp_path, "--dataset-name", "sharegpt", "--dataset-path",
                 str(SHAREGPT), "--num-prompts", "10", "--sharegpt-output-len", "5")
    assert (result["completed"], result["total_output_tokens"]) == (10, 50)
    assert result["total_input_tokens"] >= 10 * min(p for p, _ in kept)


def test_custom_takes_each_lines_prompt_and_output(mock_server: str, tokenizer: Any,
                                                   tmp_path: Path) -> None:
    lines = [json.loads(line) for line in CUSTOM.read_text().splitlines()]
    result = run(mock_server, tmp_path, "--dataset-name", "custom", "--dataset-path",
                 str(CUSTOM), "--num-prompts", str(len(lines)), "--custom-output-len", "-1",
                 "--skip-chat-template")
    assert (result["completed"], result["failed"]) == (len(lines), 0), result["error_samples"]
    assert result["total_output_tokens"] == sum(line["output_tokens"] for line in lines)
    assert result["total_input_tokens"] == sum(
        len(tokenizer(line["prompt"]).input_ids) for line in lines)
    # by default each prompt is one user turn of the model's chat template
    result = run(mock_server, tmp_path, "--dataset-name", "custom", "--dataset-path",
                 str(CUSTOM), "--num-prompts", str(len(lines)), "--custom-output-len", "2")
    templated = [tokenizer.apply_chat_template([{"role": "user", "content": line["prompt"]}],
                                               add_generation_prompt=True, tokenize=False)
                 for line in lines]
    assert result["total_input_tokens"] == sum(len(tokenizer(t).input_ids) for t in templated)
    assert result["total_output_tokens"] == 2 * len(lines)


def test_a_bad_dataset_line_is_named(mock_server: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine", "output_tokens": 3}\n{"prompt": 5}\n')
    out = run_vrs("bench", "serve", "--base-url", mock_server, "--dataset-name", "custom",
                  "--dataset-path", str(bad), "--custom-output-len", "-1", "--num-prompts", "2")
    assert out.returncode != 0
    assert f'{bad} line 2: no string "prompt"' in out.stdout + out.stderr


def test_prefix_repetition_shares_prefixes(mock_server: str, tmp_path: Path) -> None:
    # 3 prefixes x (10 // 3) suffixes: 9 requests, as vLLM counts them
    result = run(mock_server, tmp_path, "--dataset-name", "prefix_repetition",
                 "--num-prompts", "10", "--prefix-repetition-prefix-len", "24",
                 "--prefix-repetition-suffix-len", "8", "--prefix-repetition-num-prefixes",
                 "3", "--prefix-repetition-output-len", "4")
    assert (result["completed"], result["failed"]) == (9, 0), result["error_samples"]
    assert result["total_output_tokens"] == 9 * 4
    assert result["total_input_tokens"] == 9 * (24 + 8)
