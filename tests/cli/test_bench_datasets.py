"""`vrs bench serve`'s datasets beyond random end to end against `vrs-rs serve --mock` (the
demo model): sharegpt (tests/cli/fixtures/sharegpt_sample.json), custom
(tests/cli/fixtures/custom_sample.jsonl) and sonnet (tests/cli/fixtures/sonnet_sample.txt),
samples written for this project, prefix_repetition and random with --random-prefix-len;
each prompt as sent is read back from the recording server of tests/cli/test_bench.py. With
`--ignore-eos` the mock generates exactly the asked tokens, so the result's totals show
that every request asked what the dataset says: the prompts' token counts (vLLM's
`tokenizer(prompt).input_ids`, through transformers here) and their output lengths."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_bench import (  # noqa: F401 - fixtures
    FakeOpenAI,
    MockServer,
    bench,
    demo_model,
    fake_server,
    run_vrs,
)

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures"
SHAREGPT = FIXTURES / "sharegpt_sample.json"
CUSTOM = FIXTURES / "custom_sample.jsonl"
SONNET = FIXTURES / "sonnet_sample.txt"
INSTRUCTION = "Pick as many lines as you can from these poem lines:\n"


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


def templated(tokenizer: Any, text: str) -> str:
    return str(tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                             add_generation_prompt=True, tokenize=False))


def sonnet_shape(tokenizer: Any, input_len: int, prefix_len: int) -> tuple[str, int]:
    """vLLM's sonnet scheme, recomputed with transformers: the shared head (the instruction
    and the file's first lines) and the number of lines of a prompt."""
    lines = SONNET.read_text().splitlines(keepends=True)
    mean = sum(len(tokenizer(line).input_ids) for line in lines) / len(lines)
    base = len(tokenizer(templated(tokenizer, INSTRUCTION)).input_ids)
    num_prefix = max(round((prefix_len - base) / mean), 0)
    return INSTRUCTION + "".join(lines[:num_prefix]), round((input_len - base) / mean)


SONNET_ARGS = ("--dataset-name", "sonnet", "--dataset-path", str(SONNET),
               "--sonnet-input-len", "160", "--sonnet-prefix-len", "80",
               "--sonnet-output-len", "6")


def test_sonnet_shares_the_first_lines_and_keeps_to_the_input_len(
        mock_server: str, fake_server: str, tokenizer: Any,  # noqa: F811
        tmp_path: Path) -> None:
    head, num_lines = sonnet_shape(tokenizer, 160, 80)
    assert head.count("\n") - 1 >= 2 and num_lines > head.count("\n"), "a prefix and more"
    head_len = len(tokenizer(templated(tokenizer, head)).input_ids)
    result = run(mock_server, tmp_path, *SONNET_ARGS, "--num-prompts", "12")
    assert (result["completed"], result["failed"]) == (12, 0), result["error_samples"]
    assert result["total_output_tokens"] == 12 * 6
    assert 12 * head_len < result["total_input_tokens"] <= 12 * 160
    # each prompt as sent: completions get the chat-templated text
    poem = set(SONNET.read_text().splitlines())
    FakeOpenAI.bodies.clear()
    result = run(fake_server, tmp_path, *SONNET_ARGS, "--num-prompts", "12")
    prompts = [body["prompt"] for body in FakeOpenAI.bodies[1:]]  # [0]: the test request
    assert len(prompts) == 12 and all(b["max_tokens"] == 6 for b in FakeOpenAI.bodies)
    assert sum(len(tokenizer(p).input_ids) for p in prompts) == result["total_input_tokens"]
    for prompt in prompts:
        assert prompt.startswith(templated(tokenizer, head).split(INSTRUCTION)[0] + head)
        assert len(tokenizer(prompt).input_ids) <= 160
        body = prompt.split(INSTRUCTION, 1)[1].splitlines()[:num_lines]
        assert set(body) <= poem, body
    assert len(set(prompts)) > 1, "the lines after the prefix are drawn at random"
    # a chat request sends the lines; the server applies the template it is counted in
    FakeOpenAI.bodies.clear()
    result = run(fake_server, tmp_path, *SONNET_ARGS, "--num-prompts", "6", "--backend",
                 "openai-chat")
    texts = [body["messages"][0]["content"] for body in FakeOpenAI.bodies[1:]]
    assert len(texts) == 6 and all(t.startswith(head) for t in texts)
    assert sum(len(tokenizer(templated(tokenizer, t)).input_ids)
               for t in texts) == result["total_input_tokens"]


def test_sonnet_errors_name_the_file_and_the_flags(mock_server: str, tmp_path: Path) -> None:
    missing = tmp_path / "absent.txt"
    out = run_vrs("bench", "serve", "--base-url", mock_server, "--dataset-name", "sonnet",
                  "--dataset-path", str(missing), "--num-prompts", "2")
    assert out.returncode != 0
    assert f"cannot read the sonnet dataset {missing}" in out.stdout + out.stderr
    out = run_vrs("bench", "serve", "--base-url", mock_server, *SONNET_ARGS,
                  "--sonnet-prefix-len", "300", "--num-prompts", "2")
    assert out.returncode != 0
    assert ("--sonnet-prefix-len (300) must not exceed --sonnet-input-len (160)"
            in " ".join((out.stdout + out.stderr).split()))
    out = run_vrs("bench", "serve", "--base-url", mock_server, *SONNET_ARGS,
                  "--random-prefix-len", "8", "--num-prompts", "2")
    assert out.returncode != 0 and "is for the random dataset" in out.stdout + out.stderr


def test_random_prefix_len_prompts_start_alike(mock_server: str, fake_server: str,  # noqa: F811
                                               tokenizer: Any, tmp_path: Path) -> None:
    args = ("--random-prefix-len", "16", "--random-input-len", "24", "--random-output-len",
            "3", "--num-prompts", "10")
    result = run(mock_server, tmp_path, *args)
    assert (result["completed"], result["failed"]) == (10, 0), result["error_samples"]
    # vLLM's: the prefix comes on top of the input length
    assert result["total_input_tokens"] == 10 * (16 + 24)
    assert result["total_output_tokens"] == 10 * 3
    assert result["random_prefix_len"] == 16
    FakeOpenAI.bodies.clear()
    run(fake_server, tmp_path, *args)
    prompts = [body["prompt"] for body in FakeOpenAI.bodies[1:]]
    ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    assert len(ids) == 10 and all(len(i) == 40 for i in ids)
    # the same text first: the prefix's 16 tokens (decoded together with each prompt's own
    # tokens, as vLLM does, its last tokens may merge with them: 15 at least)
    shared = os.path.commonprefix(prompts)
    assert len(tokenizer(shared, add_special_tokens=False).input_ids) >= 15, shared
    assert len({tuple(i[16:]) for i in ids}) == 10, "each its own 24 tokens"
