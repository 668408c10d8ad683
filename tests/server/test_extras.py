"""vLLM's request extensions checked and applied without an engine (spec: docs/api.md
"vLLM's request extensions"): the value checks of ``server/validate/extras.py`` with the
same words as the Rust unit tests of ``validate/extras.rs``, the ``reasoning_effort`` rule
for the template's kwargs, truncation, the messages' ``reasoning`` alias and the fields the
openai SDK sends back, and ``return_tokens_as_token_ids`` in the logprobs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import protocol as p
from server.edge.error import APIError
from server.logprobs import TokenTexts
from server.validate import extras, params

pytestmark = pytest.mark.unit

USER = [{"role": "user", "content": "hi"}]


def checked(chat: bool = True, left: bool = False, **fields: Any) -> extras.Extras:
    body = {"messages": USER} if chat else {"prompt": "x"}
    request = params.decode(json.dumps({**body, **fields}).encode(), chat)
    return extras.check(request, 2048, left)


def refused(**fields: Any) -> tuple[str | None, str]:
    with pytest.raises(APIError) as info:
        checked(**fields)
    assert info.value.status == 400
    return info.value.param, info.value.message


def test_nothing_asked_is_the_default() -> None:
    assert checked() == extras.Extras()
    assert checked(return_token_ids=None, truncate_prompt_tokens=None, reasoning_effort=None,
                   include_reasoning=None, separate_reasoning=None) == extras.Extras()
    got = checked(return_token_ids=True, return_tokens_as_token_ids=True,
                  include_reasoning=False, separate_reasoning=False, reasoning_effort="xhigh")
    assert got.token_ids and got.ids_as_tokens
    assert not got.include_reasoning and not got.separate_reasoning
    assert got.reasoning_effort == "xhigh"
    assert checked(False, return_token_ids=True).token_ids


def test_truncation_takes_minus_one_up_to_the_context_and_a_side() -> None:
    def of(left: bool = False, **fields: Any) -> tuple[int | None, bool]:
        got = checked(left=left, **fields)
        return got.truncate, got.truncate_left

    assert of(truncate_prompt_tokens=-1) == (2047, False)
    assert of(truncate_prompt_tokens=2048) == (2048, False)
    assert of(True, truncate_prompt_tokens=0) == (0, True)
    assert of(truncate_prompt_tokens=5, truncation_side="left") == (5, True)
    assert of(True, truncate_prompt_tokens=5, truncation_side="right") == (5, False)
    # The same words as rust/server/src/validate/extras/tests.rs.
    assert refused(truncate_prompt_tokens=-2) == (
        "truncate_prompt_tokens",
        "`truncate_prompt_tokens` must be -1 (the context length less one) or at least 0, "
        "got -2")
    assert refused(truncate_prompt_tokens=2049) == (
        "truncate_prompt_tokens",
        "`truncate_prompt_tokens` 2049 cannot be greater than max_model_len = 2048; request a "
        "smaller truncation size")
    assert refused(truncate_prompt_tokens=5, truncation_side="middle") == (
        "truncation_side", "`truncation_side` must be `left` or `right`, got `middle`")


def test_reasoning_effort_takes_vllms_values() -> None:
    for effort in extras.REASONING_EFFORTS:
        assert checked(reasoning_effort=effort).reasoning_effort == effort
    assert refused(reasoning_effort="extreme") == (
        "reasoning_effort",
        "`reasoning_effort` must be one of `none`, `minimal`, `low`, `medium`, `high`, "
        "`xhigh`, `max`, got `extreme`")


def test_the_effort_reaches_the_template_as_vllm_gives_it() -> None:
    kwargs = extras.template_kwargs
    assert kwargs(None, "low") == {"reasoning_effort": "low", "enable_thinking": True}
    assert kwargs({"reasoning_effort": "high", "x": 1}, "none") == {
        "reasoning_effort": "none", "enable_thinking": False, "x": 1}
    # the request's own enable_thinking stays, whatever its value
    assert kwargs({"enable_thinking": None}, "high") == {
        "reasoning_effort": "high", "enable_thinking": None}
    assert kwargs({"reasoning_effort": "high"}, None) == {"reasoning_effort": "high"}
    assert kwargs(None, None) == {}


def test_truncation_keeps_the_first_or_the_last_tokens() -> None:
    ids = [1, 2, 3, 4, 5]

    def cut(keep: int | None, left: bool) -> list[int] | None:
        return extras.truncated(ids, extras.Extras(truncate=keep, truncate_left=left))

    assert cut(2, False) == [1, 2] and cut(2, True) == [4, 5] and cut(0, True) == []
    assert cut(5, False) is None and cut(9, True) is None and cut(None, True) is None


def messages_of(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    request = params.decode(json.dumps({"messages": list(messages)}).encode(), True)
    return params.chat_messages(request, True)


def test_an_sdk_message_sent_back_reaches_the_template_as_vllm_gives_it() -> None:
    # what openai's ChatCompletionMessage.model_dump() holds, with vrs's reasoning_content
    sdk = {"role": "assistant", "content": "Let me check.", "refusal": None,
           "annotations": None, "audio": None, "function_call": None,
           "tool_calls": [{"id": "call_1", "type": "function",
                           "function": {"name": "f", "arguments": "{}"}}],
           "reasoning_content": "think"}
    # the tool call's arguments reach the template parsed, as vLLM gives them
    assert messages_of(sdk) == [{
        "role": "assistant", "content": "Let me check.",
        "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "f", "arguments": {}}}],
        "reasoning": "think", "reasoning_content": "think"}]
    # vLLM drops what it does not read, values included; `reasoning` wins over the old name
    given = {"role": "assistant", "content": "a", "refusal": "no", "annotations": [{"x": 1}],
             "audio": {"id": "audio_1"}, "function_call": {"name": "f", "arguments": "{}"},
             "reasoning": "new", "reasoning_content": "old"}
    assert messages_of(given) == [{"role": "assistant", "content": "a", "reasoning": "new",
                                   "reasoning_content": "new"}]
    # other roles' reasoning is not given to the template (vLLM's renderer)
    assert messages_of({"role": "user", "content": "q", "reasoning": "r"}) == [
        {"role": "user", "content": "q"}]


def test_return_tokens_as_token_ids_names_tokens_by_id(demo_text: TokenTexts) -> None:
    entry = p.TokenLogprobs(token_id=9, logprob=-0.5, rank=1, top_token_ids=[9, 11],
                            top_logprobs=[-0.5, -1.0])
    named = demo_text.chat([entry], 2, as_ids=True)[0]
    plain = demo_text.chat([entry], 2)[0]
    assert (named.token, [t.token for t in named.top_logprobs]) == (
        "token_id:9", ["token_id:9", "token_id:11"])
    assert named.bytes == plain.bytes == list(demo_text.text(9).encode())  # the text's
    assert named.top_logprobs[1].bytes == list(b"token_id:11")  # the name's, as vLLM's
    logprobs, end = demo_text.completion([entry, entry], 2, 3, as_ids=True)
    assert logprobs.tokens == ["token_id:9", "token_id:9"]
    assert logprobs.top_logprobs == [{"token_id:9": -0.5, "token_id:11": -1.0}] * 2
    assert (logprobs.text_offset, end) == ([3, 13], 23)  # offsets count the names
    echoed, after = demo_text.echo([4, 9], [entry], 1, as_ids=True)
    assert echoed.tokens == ["token_id:4", "token_id:9"]
    assert echoed.top_logprobs == [None, {"token_id:9": -0.5}]
    assert (echoed.text_offset, after) == ([0, 10], 20)


@pytest.fixture(scope="module")
def demo_text(demo_model: Any) -> TokenTexts:
    import tokenizers

    return TokenTexts(tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json")))
