"""The mock engine's logprobs and scripted replies, behind the real wire."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_mock_engine import Frontend, tokens

from engine.process.launcher import start_engines


@pytest.fixture(scope="module")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


def start(tmp_path: Path, config: dict) -> tuple[Frontend, object]:
    frontend = Frontend(tmp_path)
    group = start_engines(config, frontend.input_address, frontend.output_address)
    frontend.wait_ready()
    return frontend, group


def test_logprobs_are_well_formed_and_do_not_change_tokens(tmp_path: Path,
                                                            demo_model: Path) -> None:
    frontend, group = start(tmp_path, {"model": str(demo_model), "mock": True})
    try:
        frontend.add("plain", [5, 6], max_tokens=30, ignore_eos=True, seed=11)
        frontend.add("lp", [5, 6], max_tokens=30, ignore_eos=True, seed=11, logprobs=4)
        frontend.add("lp0", [5, 6], max_tokens=5, ignore_eos=True, seed=2, logprobs=0)
        out = frontend.collect({"plain", "lp", "lp0"})
    finally:
        group.stop(grace_s=2)
        frontend.close()
    assert tokens(out["plain"]) == tokens(out["lp"]), "logprobs must not change sampling"
    assert all(o.new_logprobs is None for o in out["plain"])
    ranks = set()
    for output in out["lp"]:  # steps the output thread merged carry several tokens
        assert output.new_logprobs is not None
        assert len(output.new_logprobs) == len(output.new_token_ids) >= 1
        for token, entry in zip(output.new_token_ids, output.new_logprobs, strict=True):
            assert entry.token_id == token
            assert len(entry.top_token_ids) == len(entry.top_logprobs) == 4
            assert len(set(entry.top_token_ids)) == 4
            assert entry.top_logprobs == sorted(entry.top_logprobs, reverse=True)
            assert all(lp < 0 for lp in entry.top_logprobs)
            assert sum(math.exp(lp) for lp in entry.top_logprobs) <= 1.0
            assert entry.rank >= 1 and entry.logprob < 0
            if entry.rank <= 4:
                assert entry.top_token_ids[entry.rank - 1] == entry.token_id
                assert entry.top_logprobs[entry.rank - 1] == entry.logprob
            else:
                assert entry.token_id not in entry.top_token_ids
                assert entry.logprob < entry.top_logprobs[-1]
            ranks.add(entry.rank)
    assert sum(len(o.new_token_ids) for o in out["lp"]) == 30
    assert 1 in ranks and len(ranks) > 1, "ranks should vary"
    for output in out["lp0"]:
        assert output.new_logprobs is not None
        assert all(entry.top_token_ids == [] for entry in output.new_logprobs)


def test_scripted_reply_then_eos(tmp_path: Path, demo_model: Path) -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(demo_model)
    reply = 'Sure.<｜tool▁call▁begin｜>{"name": "f", "arguments": {}}<｜tool▁call▁end｜>'
    config = {"model": str(demo_model), "mock": True,
              "mock_replies": [{"when": "call f", "reply": reply},
                               {"when": "never", "reply": "x"}]}
    frontend, group = start(tmp_path, config)
    try:
        frontend.add("hit", tok.encode("please call f now"), max_tokens=100)
        frontend.add("cut", tok.encode("please call f now"), max_tokens=3)
        frontend.add("miss", tok.encode("something else"), max_tokens=5, ignore_eos=True)
        out = frontend.collect({"hit", "cut", "miss"})
    finally:
        group.stop(grace_s=2)
        frontend.close()
    hit = tokens(out["hit"])
    assert hit[-1] == 1 and out["hit"][-1].stop_token_id == 1
    assert out["hit"][-1].finish_reason == "stop"
    assert tok.decode(hit[:-1]) == reply
    assert 128808 in hit, "the marker is one added token"
    assert len(tokens(out["cut"])) == 3 and out["cut"][-1].finish_reason == "length"
    assert tokens(out["cut"]) == hit[:3]
    assert len(tokens(out["miss"])) == 5
    assert tok.decode(tokens(out["miss"])) != reply[:5]
