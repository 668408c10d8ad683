"""Reasoning (`--reasoning-parser deepseek_r1`) in both request modes: `<think>…</think>`
out of the answer into reasoning_content, streamed and not. The parsers' `auto` choice
(the default) and its start-up log line: the demo template gives `demo` and `qwen3`; a
template without markers leaves the tool-call parser to config.json (`hermes` for
model_type qwen3) and reasoning off, and such a server leaves the text alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from features import user
from servers import MODEL, Server

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
    finally:
        server.stop()
