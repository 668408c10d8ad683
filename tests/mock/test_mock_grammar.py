"""The mock engine honours structured outputs (random tokens from the allowed set), behind
the real wire, with the demo model's real tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import protocol as p
from engine.process.launcher import start_engines
from tests.mock.test_mock_engine import Frontend, tokens
from tests.structured_cases import SCHEMAS, cases, check, schema_text

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="module")
def tokenizer(demo_model: Path):  # noqa: ANN201
    import tokenizers

    return tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))


def serve(tmp_path: Path, config: dict) -> tuple[Frontend, object]:
    frontend = Frontend(tmp_path)
    group = start_engines(config, frontend.input_address, frontend.output_address)
    frontend.wait_ready()
    return frontend, group


def test_every_kind_is_honoured_next_to_free_requests(
    tmp_path: Path, demo_model: Path, tokenizer
) -> None:  # noqa: ANN001
    frontend, group = serve(tmp_path, {"model": str(demo_model), "mock": True})
    checks = {}
    try:
        for name, spec, kind, rule in cases():
            for seed in (1, 2):
                frontend.add(
                    f"{name}-{seed}", [5, 6], max_tokens=200, seed=seed, structured_outputs=spec
                )
                checks[f"{name}-{seed}"] = (kind, rule)
        frontend.add("free", [5, 6], max_tokens=30, ignore_eos=True, seed=3)
        out = frontend.collect({*checks, "free"}, timeout=120)
    finally:
        group.stop(grace_s=2)
        frontend.close()
    assert len(tokens(out["free"])) == 30
    for rid, (kind, rule) in checks.items():
        assert out[rid][-1].finish_reason == "stop", (rid, out[rid][-1])
        check(kind, rule, tokenizer.decode(tokens(out[rid]), skip_special_tokens=True))


def test_a_bad_spec_is_an_invalid_request(tmp_path: Path, demo_model: Path) -> None:
    frontend, group = serve(tmp_path, {"model": str(demo_model), "mock": True})
    try:
        frontend.add(
            "bad",
            [5],
            max_tokens=5,
            structured_outputs=p.StructuredOutputs(grammar="root ::= nothing"),
        )
        frontend.add(
            "good", [5], max_tokens=5, structured_outputs=p.StructuredOutputs(choice=["x"])
        )
        out = frontend.collect({"bad", "good"}, timeout=60)
    finally:
        group.stop(grace_s=2)
        frontend.close()
    (bad,) = out["bad"]
    assert (bad.finish_reason, bad.error_kind) == ("error", "invalid_request")
    assert (bad.error_message or "").startswith("the grammar does not compile: ")
    assert out["good"][-1].finish_reason == "stop"


def test_a_scripted_reply_is_followed_while_the_grammar_takes_it(
    tmp_path: Path, demo_model: Path, tokenizer
) -> None:  # noqa: ANN001
    replies = [{"when": "color", "reply": '{"color": "green", "size": 2} and more'}]
    config = {"model": str(demo_model), "mock": True, "mock_replies": replies}
    frontend, group = serve(tmp_path, config)
    prompt = tokenizer.encode("pick a color", add_special_tokens=False).ids
    spec = p.StructuredOutputs(json=schema_text(SCHEMAS["enum"]))
    try:
        frontend.add("scripted", prompt, max_tokens=50, structured_outputs=spec)
        out = frontend.collect({"scripted"}, timeout=60)
    finally:
        group.stop(grace_s=2)
        frontend.close()
    text = tokenizer.decode(tokens(out["scripted"]), skip_special_tokens=True)
    assert text == '{"color": "green", "size": 2}'  # the rest broke the grammar
    assert out["scripted"][-1].finish_reason == "stop"
