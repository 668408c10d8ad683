"""What vLLM's clients send, both request modes agree on (spec: docs/api.md "vLLM's
request extensions"), through the official openai SDK and the feature servers' scripted
replies: an agent's tool loop that sends the SDK's own assistant message back, token ids
and token-id logprobs (checked against transformers' tokenizer), ``reasoning_effort``,
``include_reasoning`` / ``separate_reasoning``, truncation, the ``guided_*`` fields, and
the Responses API's ``request_id`` and ``enable_response_messages``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.features import TOOL_RESULT, WEATHER_TOOL, user
from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e


def chat(server: Server, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    kwargs.setdefault("max_tokens", 60)
    return server.client().chat.completions.create(model=MODEL, messages=messages, **kwargs)


def test_a_tool_loop_sends_the_sdks_message_back(feature_server: Server) -> None:
    messages = user("[weather] in Paris?")
    first = chat(feature_server, messages, tools=[WEATHER_TOOL]).choices[0]
    assert first.finish_reason == "tool_calls"
    call = first.message.tool_calls[0]
    sent_back = first.message.model_dump()  # refusal, annotations, audio, function_call...
    assert {"refusal", "annotations", "audio", "function_call", "reasoning_content"} <= set(
        sent_back)
    messages += [sent_back, {"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT}]
    second = chat(feature_server, messages, tools=[WEATHER_TOOL]).choices[0]
    assert (second.message.content, second.finish_reason) == ("It is sunny in Paris.", "stop")
    # a key no message has is dropped, as vLLM does: the prompt is the same
    def prompt_ids(turns: list[dict[str, Any]]) -> list[int]:
        return list(chat(feature_server, turns, tools=[WEATHER_TOOL], max_tokens=1,
                         extra_body={"return_token_ids": True}).prompt_token_ids)

    tagged = [{**turn, "extra_field": "0"} for turn in messages]
    assert prompt_ids(tagged) == prompt_ids(messages)
    # vLLM's name of the reasoning, and a non-null function_call, are taken too
    sent_back.update(reasoning="I looked.", function_call={"name": "old", "arguments": "{}"})
    assert chat(feature_server, messages, tools=[WEATHER_TOOL]).choices[0].message.content == (
        "It is sunny in Paris.")


def test_token_ids_are_the_tokenizers(feature_server: Server, tokenizer: Any) -> None:
    messages = user("[script] go")
    response = chat(feature_server, messages, extra_body={"return_token_ids": True})
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                           return_dict=True)["input_ids"]
    assert response.prompt_token_ids == list(prompt)
    choice = response.choices[0]
    assert tokenizer.decode(choice.token_ids, skip_special_tokens=True) == choice.message.content
    assert len(choice.token_ids) == response.usage.completion_tokens
    streamed: list[int] = []
    for index, chunk in enumerate(chat(feature_server, messages, stream=True,
                                       extra_body={"return_token_ids": True})):
        extra = chunk.model_extra or {}
        assert ("prompt_token_ids" in extra) == (index == 0)
        streamed += (chunk.choices[0].model_extra or {}).get("token_ids") or []
    assert streamed == choice.token_ids
    completion = feature_server.client().completions.create(
        model=MODEL, prompt="[script] go", max_tokens=60, logprobs=1,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True})
    done = completion.choices[0]
    assert done.prompt_token_ids == tokenizer("[script] go")["input_ids"]
    assert done.logprobs.tokens == [f"token_id:{i}" for i in done.token_ids[
        :len(done.logprobs.tokens)]]


def test_reasoning_shown_as_asked(feature_server: Server) -> None:
    answer = "The answer is 4."
    shown = chat(feature_server, user("[reason] 2+2?")).choices[0].message
    assert shown.content == answer and shown.model_extra["reasoning_content"]
    hidden = chat(feature_server, user("[reason] 2+2?"), logprobs=True,
                  extra_body={"include_reasoning": False}).choices[0]
    assert (hidden.message.content, hidden.message.model_extra["reasoning_content"],
            hidden.logprobs) == (answer, None, None)
    merged = chat(feature_server, user("[reason] 2+2?"),
                  extra_body={"separate_reasoning": False}).choices[0].message
    assert merged.content == shown.model_extra["reasoning_content"] + answer
    streamed = "".join(c.choices[0].delta.content or "" for c in chat(
        feature_server, user("[reason] 2+2?"), stream=True,
        extra_body={"separate_reasoning": False}) if c.choices)
    assert streamed == merged.content


def test_reasoning_effort_and_truncation_shape_the_prompt(feature_server: Server,
                                                          tokenizer: Any) -> None:
    def prompt(**kwargs: Any) -> str:
        extra = {"return_token_ids": True, **kwargs.pop("extra_body", {})}
        ids = chat(feature_server, user("[script] go"), max_tokens=1, extra_body=extra,
                   **kwargs).prompt_token_ids
        return str(tokenizer.decode(ids))

    assert not prompt().endswith("<think>")
    assert prompt(reasoning_effort="low").endswith("<think>")  # the demo template's
    assert not prompt(reasoning_effort="none").endswith("<think>")
    full = chat(feature_server, user("[script] go"), max_tokens=1,
                extra_body={"return_token_ids": True}).prompt_token_ids
    cut = chat(feature_server, user("[script] go"), max_tokens=1,
               extra_body={"return_token_ids": True, "truncate_prompt_tokens": 3,
                           "truncation_side": "left"})
    assert (cut.prompt_token_ids, cut.usage.prompt_tokens) == (full[-3:], 3)


def test_guided_fields_constrain_the_answer(feature_server: Server) -> None:
    client = feature_server.client()
    for _ in range(3):
        text = client.completions.create(
            model=MODEL, prompt="pick", max_tokens=8,
            extra_body={"guided_choice": ["yes", "no"], "guided_decoding_backend": "auto"},
        ).choices[0].text
        assert text in ("yes", "no")
    assert feature_server.log().count("vLLM's removed guided decoding") == 1


def test_responses_request_id_and_raw_messages(feature_server: Server, tokenizer: Any) -> None:
    """vLLM's Responses extensions: ``request_id`` is the response's id; with
    ``enable_response_messages`` the final object has the prompt and the output as the model
    saw and wrote them (text and token ids), whole and streamed."""
    client = feature_server.client()
    extra = {"request_id": "my-call-7", "enable_response_messages": True}
    whole = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60,
                                    extra_body=extra)
    assert whole.id == "my-call-7" and whole.output_text
    got = whole.model_extra or {}
    prompt = tokenizer.apply_chat_template(user("[script] go"), add_generation_prompt=True,
                                           tokenize=False)
    assert got["input_messages"] == [{"message": prompt, "type": "raw_message_tokens",
                                      "tokens": tokenizer(prompt, add_special_tokens=False)[
                                          "input_ids"]}]
    [output] = got["output_messages"]
    assert output["type"] == "raw_message_tokens" and output["message"] == whole.output_text
    assert len(output["tokens"]) == whole.usage.output_tokens
    assert tokenizer.decode(output["tokens"], skip_special_tokens=True) == whole.output_text
    events = list(client.responses.create(model=MODEL, input="[script] go",
                                          max_output_tokens=60, stream=True, extra_body=extra))
    assert "input_messages" not in (events[0].response.model_extra or {})
    final = events[-1].response
    assert final.id == "my-call-7"
    assert (final.model_extra or {})["output_messages"] == got["output_messages"]
    plain = client.responses.create(model=MODEL, input="[script] go", max_output_tokens=60)
    assert plain.id.startswith("resp_") and "input_messages" not in (plain.model_extra or {})
