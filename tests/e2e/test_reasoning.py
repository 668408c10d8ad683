"""Reasoning (`--reasoning-parser deepseek_r1`) on every frontend mode: `<think>…</think>`
out of the answer into reasoning_content, streamed and not; a server without the parser
leaves the text alone."""

from __future__ import annotations

from typing import Any

from features import user
from servers import MODEL, Server

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


def test_a_server_without_the_parser_leaves_the_text(server: Server) -> None:
    message = chat(server, extra_body=THINKING).choices[0].message
    assert message.content is not None
    assert "reasoning_content" not in (message.model_extra or {})
