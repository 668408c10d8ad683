"""The OpenAI Agents SDK (``openai-agents``), unchanged, on the Rust and Python frontends:
its Responses calls with ``reasoning.effort`` (every call of a Codex-style agent carries it)
and a function-tool loop the SDK runs itself (the model's call, the tool's output sent back
as a ``function_call_output`` item with the call's id, the final answer). The mock engine
answers from the feature servers' scripted replies; each test runs once per request
mode."""

from __future__ import annotations

import asyncio
from typing import Any

import agents
import pytest
from openai import AsyncOpenAI
from openai.types.shared import Reasoning

from tests.e2e.features import EXPECTED_SCRIPT, TOOL_RESULT
from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def no_tracing() -> None:
    """The SDK would otherwise export its traces to OpenAI (no network here)."""
    agents.set_tracing_disabled(True)


def run(server: Server, prompt: str, tools: list[Any], effort: str = "low") -> Any:
    """The agent's run to its final output (its client closed within the run's loop)."""

    async def go() -> Any:
        async with AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0,
                               timeout=60) as client:
            model = agents.OpenAIResponsesModel(model=MODEL, openai_client=client)
            settings = agents.ModelSettings(
                reasoning=Reasoning(effort=effort),  # type: ignore[arg-type]
                max_tokens=60)
            agent = agents.Agent(name="helper", instructions="Be brief.", model=model,
                                 model_settings=settings, tools=tools)
            return await agents.Runner.run(agent, prompt)

    return asyncio.run(go())


def test_an_agent_with_reasoning_effort_answers(feature_server: Server) -> None:
    """An effort other than ``none`` turns the demo template's thinking on (the prompt opens
    ``<think>``): the scripted reply's reasoning comes back as a reasoning item; ``none``
    turns it off, and the whole reply is the answer."""
    for effort in ("low", "high"):
        result = run(feature_server, "[think] 2+2?", [], effort)
        assert result.final_output == "The answer is 4."
        assert [item.type for item in result.new_items] == ["reasoning_item",
                                                            "message_output_item"]
        [response] = result.raw_responses
        assert response.usage.output_tokens > 0
    result = run(feature_server, "[script] go", [], "none")
    assert result.final_output == EXPECTED_SCRIPT
    assert [item.type for item in result.new_items] == ["message_output_item"]


def test_an_agent_runs_a_function_tool_loop(feature_server: Server) -> None:
    calls: list[tuple[str, list[int]]] = []

    @agents.function_tool
    def get_weather(city: str, days: list[int]) -> str:
        """The weather in a city."""
        calls.append((city, days))
        return TOOL_RESULT

    # effort none: the template's thinking stays off, so the scripted call is the answer's
    result = run(feature_server, "[weather] in Paris?", [get_weather], "none")
    assert calls == [("Paris", [1, 2])]
    assert result.final_output == "It is sunny in Paris."
    kinds = [item.type for item in result.new_items]
    assert kinds == ["message_output_item", "tool_call_item", "tool_call_output_item",
                     "message_output_item"]
    assert len(result.raw_responses) == 2
