"""The feature servers: one per frontend mode with scripted mock replies (tool calls,
reasoning, fixed texts) and a reasoning parser, for the feature suites
(test_openai_features, test_tools, test_reasoning, test_endpoints)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.servers import Pool, Server

CALL_BEGIN, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
CLOCK_TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
TOOL_RESULT = "[tool result: sunny]"
# (trigger in the prompt, reply): the first match wins, so forced-call triggers (which
# only the prefilled prompts contain) come first.
REPLIES = [
    # test_client_fields' tool loop: its second turn (which holds the first's call) first
    (TOOL_RESULT, "It is sunny in Paris."),
    ('"name": "get_weather", "arguments": ', '{"city": "Oslo"}}' + CALL_END),
    ("</think>" + CALL_BEGIN,
     '{"name": "get_weather", "arguments": {"city": "Rome"}}' + CALL_END),
    ("[two calls]", CALL_BEGIN + '{"name": "get_weather", "arguments": {"city": "Lima"}}'
     + CALL_END + CALL_BEGIN + '{"name": "get_time", "arguments": {}}' + CALL_END),
    ("[broken call]", "Hmm " + CALL_BEGIN + '{"name": "get_weather", "arguments": '),
    ("[weather]", "Let me check." + CALL_BEGIN
     + '{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}' + CALL_END),
    ("[think]", "Two plus two is 4, 四.</think>The answer is 4."),
    ("[reason]", "<think>Two plus two is 4, 四.</think>The answer is 4."),
    ("[special]", "a<｜begin▁of▁sentence｜>b"),
    ("[script]", "alpha beta gamma delta epsilon"),
]
EXPECTED_SCRIPT = "alpha beta gamma delta epsilon"


class FeaturePool(Pool):
    """One feature server per mode (see the module docstring)."""

    def __init__(self, model: Path, directory: Path) -> None:
        super().__init__(model, directory)
        self.replies = directory / "replies.json"
        self.replies.write_text(json.dumps([{"when": w, "reply": r} for w, r in REPLIES]),
                                encoding="utf-8")

    def get(self, mode: str) -> Server:
        if mode not in self.servers:
            self.servers[mode] = Server(
                mode, self.model, self.directory / f"{mode}.log",
                cli_args=("--mock-step-delay-ms", "1", "--mock-replies", str(self.replies),
                          "--reasoning-parser", "deepseek_r1"))
        return self.servers[mode]


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]
