"""Reasoning (`--reasoning-parser deepseek_r1`) in both request modes: `<think>…</think>`
out of the answer into reasoning_content, streamed and not. The parsers' `auto` choice
(the default) and its start-up log line: the demo template gives `demo` and `qwen3`; a
template without markers leaves the tool-call parser to config.json (`hermes` for
model_type qwen3) and reasoning off, and such a server leaves the text alone. The usage
counts the reasoning tokens (`completion_tokens_details.reasoning_tokens`: the tokens from
the open block through `</think>`) where the server has a reasoning parser, and leaves the
details out where it has none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.features import user
from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e

# A template of my own without any tool-call or reasoning marker.
PLAIN = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"

THINKING = {"chat_template_kwargs": {"enable_thinking": True}}
REASONING = "Two plus two is 4, 四."
ANSWER = "The answer is 4."


def chat(server: Server, **kwargs: Any) -> Any:
    return server.client().chat.completions.create(
        model=MODEL, messages=user("[think] what is 2+2?"), max_tokens=60, **kwargs)


def test_reasoning_is_split_out(feature_server: Server) -> None:
    message = chat(feature_server, extra_body=THINKING).choices[0].message
    assert (message.reasoning_content, message.content) == (REASONING, ANSWER)
    reasoning, content, order = "", "", []
    for chunk in chat(feature_server, extra_body=THINKING, stream=True):
        delta = chunk.choices[0].delta
        piece = getattr(delta, "reasoning_content", None) or ""
        reasoning += piece
        content += delta.content or ""
        order += ["r"] * bool(piece) + ["c"] * bool(delta.content)
    assert (reasoning, content) == (REASONING, ANSWER)
    assert order == sorted(order, key=lambda k: k == "c"), "reasoning comes first"
    assert "</think>" not in reasoning + content


def test_usage_counts_the_reasoning_tokens(feature_server: Server, tokenizer: Any) -> None:
    reasoning = len(tokenizer.encode(REASONING + "</think>", add_special_tokens=False))
    answer = len(tokenizer.encode(ANSWER, add_special_tokens=False))
    usage = chat(feature_server, extra_body=THINKING).usage
    assert usage.completion_tokens_details.reasoning_tokens == reasoning
    assert usage.completion_tokens == reasoning + answer + 1  # the answer, then EOS
    options = {"include_usage": True, "continuous_usage_stats": True}
    counts = [chunk.usage.completion_tokens_details.reasoning_tokens
              for chunk in chat(feature_server, extra_body=THINKING, stream=True,
                                stream_options=options)]
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] == reasoning
    # A stop string in the answer ends it; the reasoning before it is counted all the same.
    stopped = chat(feature_server, extra_body=THINKING, stop=["answer"])
    assert stopped.choices[0].message.content == "The "
    assert stopped.usage.completion_tokens_details.reasoning_tokens == reasoning
    assert reasoning < stopped.usage.completion_tokens < reasoning + answer + 1
    # No open block, so no split: nothing is reasoning, and the server still says so.
    unsplit = chat(feature_server).usage
    assert unsplit.completion_tokens_details.reasoning_tokens == 0
    assert unsplit.completion_tokens == reasoning + answer + 1


def test_without_an_open_think_the_answer_is_content(feature_server: Server) -> None:
    message = chat(feature_server).choices[0].message
    assert message.reasoning_content is None
    assert message.content == REASONING + "</think>" + ANSWER
    plain = feature_server.client().chat.completions.create(
        model=MODEL, messages=user("hello"), seed=2, max_tokens=4)
    assert plain.choices[0].message.model_extra["reasoning_content"] is None


def test_the_default_server_picks_both_parsers_from_the_template(server: Server) -> None:
    log = server.log()
    assert ("tool-call parser: demo (auto: chat template has <｜tool▁call▁begin｜> and "
            "<｜tool▁call▁end｜>)") in log, log
    assert "reasoning parser: qwen3 (auto: chat template has <think> and enable_thinking)" in log
    message = chat(server, extra_body=THINKING).choices[0].message
    assert "reasoning_content" in (message.model_extra or {})


@pytest.fixture(scope="module")
def plain_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("templates") / "plain.jinja"
    path.write_text(PLAIN, encoding="utf-8")
    return path


def test_a_server_without_the_parser_leaves_the_text(route_mode: str, demo_model: Path,
                                                     plain_template: Path,
                                                     tmp_path: Path) -> None:
    server = Server(route_mode, demo_model, tmp_path / "server.log",
                    cli_args=("--mock-step-delay-ms", "1", "--chat-template", str(plain_template)))
    try:
        log = server.log()
        assert "tool-call parser: hermes (auto: config.json model_type qwen3)" in log, log
        assert ("reasoning parser: none (auto: the chat template has no reasoning markers; "
                "start with --reasoning-parser NAME to split reasoning out)") in log, log
        message = chat(server, extra_body=THINKING).choices[0].message
        assert message.content is not None
        assert "reasoning_content" not in (message.model_extra or {})
        usage = chat(server, extra_body=THINKING).usage
        assert usage.completion_tokens > 0 and usage.completion_tokens_details is None
    finally:
        server.stop()
