"""The mock engine's logprobs and scripted replies, behind the real wire."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.process.launcher import start_engines
from tests.mock.test_mock_engine import Frontend, tokens

pytestmark = pytest.mark.e2e


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


def test_prompt_logprobs_and_times_come_with_the_first_output(tmp_path: Path,
                                                              demo_model: Path) -> None:
    """Synthetic but well formed: one entry per prompt token from the second on, the
    prompt token itself with its rank, k top tokens most likely first; the same prompt
    gets the same entries. Only the first output carries them and the queue / prefill
    times."""
    frontend, group = start(tmp_path, {"model": str(demo_model), "mock": True})
    prompt = [7, 1000, 2000, 3000, 2000, 9]
    try:
        frontend.add("pl", prompt, max_tokens=4, ignore_eos=True, prompt_logprobs=3)
        frontend.add("again", prompt, max_tokens=1, prompt_logprobs=3, seed=5)
        frontend.add("zero", prompt[:2], max_tokens=1, prompt_logprobs=0)
        frontend.add("none", prompt, max_tokens=2, ignore_eos=True)
        out = frontend.collect({"pl", "again", "zero", "none"})
    finally:
        group.stop(grace_s=2)
        frontend.close()
    first, *rest = out["pl"]
    entries = first.prompt_logprobs
    assert entries is not None and len(entries) == len(prompt) - 1
    for token, entry in zip(prompt[1:], entries, strict=True):
        assert entry.token_id == token and entry.rank >= 1 and entry.logprob < 0
        assert len(entry.top_token_ids) == len(set(entry.top_token_ids)) == 3
        assert entry.top_logprobs == sorted(entry.top_logprobs, reverse=True)
        assert sum(math.exp(lp) for lp in entry.top_logprobs) <= 1.0
        if entry.rank <= 3:
            assert entry.top_token_ids[entry.rank - 1] == token
            assert entry.top_logprobs[entry.rank - 1] == entry.logprob
        else:
            assert token not in entry.top_token_ids
    assert out["again"][0].prompt_logprobs == entries, "derived from the prompt's ids"
    assert out["zero"][0].prompt_logprobs is not None
    assert [e.top_token_ids for e in out["zero"][0].prompt_logprobs] == [[]]
    for outputs in out.values():
        head, *tail = outputs
        assert head.new_token_ids, "the times come with the first token"
        assert head.queue_time is not None and head.queue_time >= 0
        assert head.prefill_time is not None and head.prefill_time >= 0
        assert all(o.queue_time is None and o.prefill_time is None for o in tail)
        assert all(o.prompt_logprobs is None for o in tail)
        *middle, last = outputs
        assert last.finish_reason is not None
        assert last.decode_time is not None and last.decode_time >= 0, "with the final output"
        assert all(o.decode_time is None for o in middle)
    assert all(o.prompt_logprobs is None for o in out["none"])
    assert rest or len(first.new_token_ids) == 4


def test_scripted_replies_use_the_frontends_tokenizer(tmp_path: Path,
                                                      demo_model: Path) -> None:
    """With ``tokenizer`` (``--tokenizer``), replies are encoded with that
    tokenizer.json: here one with a token the model's own does not have."""
    import tokenizers

    own = tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))
    other = tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))
    other.add_special_tokens(["<zz-marker>"])
    marker = other.token_to_id("<zz-marker>")
    assert marker is not None and own.token_to_id("<zz-marker>") is None
    directory = tmp_path / "tokenizer"
    directory.mkdir()
    other.save(str(directory / "tokenizer.json"))
    reply = [{"when": "mark it", "reply": "ok <zz-marker>"}]
    prompt = own.encode("please mark it", add_special_tokens=False).ids
    scripted = {}
    for name, extra in (("own", {}), ("other", {"tokenizer": str(directory)})):
        config = {"model": str(demo_model), "mock": True, "mock_replies": reply, **extra}
        (tmp_path / name).mkdir()
        frontend, group = start(tmp_path / name, config)
        try:
            frontend.add(name, prompt, max_tokens=20)
            scripted[name] = tokens(frontend.collect({name})[name])
        finally:
            group.stop(grace_s=2)
            frontend.close()
    assert scripted["other"] == [*other.encode("ok <zz-marker>", add_special_tokens=False).ids, 1]
    assert marker in scripted["other"]
    assert scripted["own"] == [*own.encode("ok <zz-marker>", add_special_tokens=False).ids, 1]
    assert marker not in scripted["own"]
