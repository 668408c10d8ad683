"""vLLM's own test-suite request bodies (tests/vllm_bodies/), replayed against each
frontend: vrs-rs and the Python server, over real HTTP on loopback, each on the mock engine
and the demo model, one server per frontend for the whole module.

Each body must get what vLLM's test expects (success, or the same 4xx), never a 5xx, and
each successful answer must parse as the SDK's own type for its route (openai's
ChatCompletion / ChatCompletionChunk, Completion, Response / ResponseStreamEvent;
anthropic's Message / RawMessageStreamEvent). A body a frontend cannot answer yet is listed
in tests/vllm_bodies/known_gaps.json with what blocks it; any other mismatch fails, and so
does a listed body that is answered now or refused for another reason (the list is stale).
At most 5 % of the bodies vLLM answers with success may be listed (MAX_GAP_SHARE).

``VRS_VLLM_GAPS=write`` rewrites known_gaps.json from the run instead of checking it
(tests/vllm_bodies/README.md). Each run writes a summary (answered / total, the refused
fields ranked by count, the failures) to ``summary.txt`` in the module's pytest temp dir
and prints it."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, ROUTE_MODES, Server
from tests.vllm_corpus import (
    BODIES_DIR,
    MAX_GAP_SHARE,
    Body,
    Outcome,
    load_bodies,
    load_gaps,
    references,
    send,
    substitute,
    verdict,
    write_gaps,
)

pytestmark = pytest.mark.e2e

BODIES = load_bodies()
GAPS = load_gaps()
WRITE_GAPS = os.environ.get("VRS_VLLM_GAPS") == "write"
WORKERS = 8  # requests in flight at once: the bodies that refer to no earlier answer
# The flags vLLM's test servers run with that the bodies need (tests/vllm_bodies/README.md):
# the Responses store (VLLM_ENABLE_RESPONSES_API_STORE=1 in the stateful and harmony tests)
# and GET /tokenizer_info (--enable-tokenizer-info-endpoint in the tokenization tests); and
# the replies a model gives the turns of a continued conversation (a short answer, then
# EOS, where the mock's random tokens would fill the context the next turn needs).
SERVER_FLAGS = ("--enable-responses-store", "--enable-tokenizer-info-endpoint",
                "--mock-replies", str(BODIES_DIR / "mock_replies.json"))
REGENERATE = ("regenerate it: VRS_VLLM_GAPS=write pytest tests/e2e/test_vllm_bodies.py "
              "(tests/vllm_bodies/README.md)")


@dataclass
class Replay:
    """Every body's outcome and verdict on one frontend."""

    mode: str
    outcomes: dict[str, Outcome]
    verdicts: dict[str, tuple[str, str | None]]


def _send_one(http: httpx.Client, url: str, body: Body, vocab_size: int,
              answered: dict[str, Outcome]) -> Outcome:
    ids = {body_id: outcome.response_id for body_id, outcome in answered.items()}
    try:
        return send(http, url, body, substitute(body.body, MODEL, vocab_size, ids))
    except httpx.HTTPError as exc:
        return Outcome(0, problem=f"{type(exc).__name__}: {exc}")


def replay_all(http: httpx.Client, url: str, vocab_size: int) -> dict[str, Outcome]:
    """Every body's outcome: those that refer to no earlier answer side by side, then the
    rest one by one in corpus order (a continued conversation needs its previous answer)."""
    later = [body for body in BODIES if references(body.body)]
    outcomes: dict[str, Outcome] = {}
    with ThreadPoolExecutor(WORKERS) as pool:
        first = [body for body in BODIES if body not in later]
        for body, outcome in zip(first, pool.map(
                lambda body: _send_one(http, url, body, vocab_size, {}), first), strict=True):
            outcomes[body.id] = outcome
    for body in later:
        outcomes[body.id] = _send_one(http, url, body, vocab_size, outcomes)
    return {body.id: outcomes[body.id] for body in BODIES}


def summarize(replay: Replay, seconds: float) -> str:
    """answered / total, what the refusals name ranked by count, then every failure."""
    kinds = Counter(kind for kind, _ in replay.verdicts.values())
    refused = Counter(replay.outcomes[body_id].refused or "(answered; vLLM refuses)"
                      for body_id, (kind, _) in replay.verdicts.items() if kind == "gap")
    lines = [f"{replay.mode}: {kinds['ok']} / {len(BODIES)} answered as vLLM's tests expect, "
             f"{kinds['gap']} gaps, {kinds['fail']} failures ({seconds:.1f} s)",
             "refused, by what the refusal names:"]
    lines += [f"  {count:4d}  {what}" for what, count in refused.most_common()]
    lines += ["failures:"] + [f"  {body_id}: {why}" for body_id, (kind, why)
                              in replay.verdicts.items() if kind == "fail"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module", params=ROUTE_MODES)
def replay(request: pytest.FixtureRequest, demo_model: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    """One server of the mode, every body sent to it; the summary written and printed."""
    mode: str = request.param
    directory = tmp_path_factory.mktemp(f"vllm-bodies-{mode}")
    vocab_size = json.loads((demo_model / "config.json").read_text())["vocab_size"]
    server = Server(mode, demo_model, directory / "server.log", cli_args=SERVER_FLAGS)
    try:
        start = time.monotonic()
        with httpx.Client(timeout=120) as http:
            outcomes = replay_all(http, server.url, vocab_size)
        seconds = time.monotonic() - start
    except BaseException:
        server.stop()
        raise
    result = Replay(mode, outcomes,
                    {body.id: verdict(body, outcomes[body.id]) for body in BODIES})
    summary = summarize(result, seconds)
    (directory / "summary.txt").write_text(summary, encoding="utf-8")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n{summary}(also in {directory / 'summary.txt'})", flush=True)
    if WRITE_GAPS:
        write_gaps(mode, {body_id: why or "" for body_id, (kind, why) in result.verdicts.items()
                          if kind == "gap"})
    yield result
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


@pytest.mark.parametrize("body", BODIES, ids=[body.id for body in BODIES])
def test_vllm_body(replay: Replay, body: Body) -> None:
    kind, why = replay.verdicts[body.id]
    known = GAPS.get(body.id, {}).get(replay.mode)
    where = f"{replay.mode}, {body.route}, from {body.source}"
    assert kind != "fail", f"{where}: {why}\nbody: {json.dumps(body.body)[:2000]}"
    if WRITE_GAPS:
        return
    if kind == "gap":
        assert known is not None, (f"{where}: {why}, not a known gap; fix the frontend or "
                                   f"list it in known_gaps.json: {REGENERATE}")
        assert known == why, (f"{where}: {why}, but known_gaps.json says {known!r} (the "
                              f"blocking field moved on); {REGENERATE}")
    else:
        assert known is None, (f"{where}: answered now, but known_gaps.json lists it "
                               f"({known}); the list is stale: {REGENERATE}")


@pytest.mark.skipif(WRITE_GAPS, reason="the gaps are being rewritten")
def test_known_gaps_are_bodies() -> None:
    """Every known gap names a body of the corpus and a frontend mode. The list is exact
    (test_body fails on a new gap and on a stale one), so it can only shrink by fixes; of the
    bodies vLLM answers with success, at most MAX_GAP_SHARE may be gaps (issue #39's goal)."""
    ids = {body.id for body in BODIES}
    assert set(GAPS) <= ids, f"gaps of no body: {sorted(set(GAPS) - ids)}; {REGENERATE}"
    modes = {mode for blocked in GAPS.values() for mode in blocked}
    assert modes <= set(ROUTE_MODES), f"unknown modes {modes - set(ROUTE_MODES)}"
    answered = [body.id for body in BODIES if body.expect is None]
    share = len(set(GAPS) & set(answered)) / len(answered)
    fields = Counter(reason.split(" ", 1)[-1] for blocked in GAPS.values()
                     for reason in set(blocked.values()))
    print(f"known gaps: {len(GAPS)} of {len(BODIES)} bodies, {share:.1%} of the "
          f"{len(answered)} vLLM answers (goal {MAX_GAP_SHARE:.0%}); the most common: "
          f"{fields.most_common(10)}")
    assert share <= MAX_GAP_SHARE, f"{share:.1%} of vLLM's answered bodies are gaps"
