"""The tool-call parser names (``--tool-call-parser``, vLLM's names) and each format's
marker strings, plus the prefill of the formats that force a call natively.
Rust: rust/server/src/parsers/tools/formats.rs.

The byte-level facts, per format (the parsers' modules hold the grammar):

* ``demo``: the demo template's ``<｜tool▁call▁begin｜>`` BODY ``<｜tool▁call▁end｜>``;
* ``hermes``: ``<tool_call>`` BODY ``</tool_call>`` (Hermes 2 Pro model card,
  https://huggingface.co/NousResearch/Hermes-2-Pro-Llama-3-8B; Qwen2.5 / Qwen3 chat
  templates, https://qwen.readthedocs.io/en/latest/framework/function_call.html);
* ``llama3_json``: an output starting with ``<|python_tag|>`` or ``{`` (Llama 3.1 model
  card, "JSON based tool calling",
  https://www.llama.com/docs/model-cards-and-prompt-formats/llama3_1/);
* ``mistral``: ``[TOOL_CALLS]`` (mistral-common tokenizer docs,
  https://docs.mistral.ai/guides/tokenization/; v11+ adds ``[ARGS]``);
* ``deepseek_v3``: ``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁sep｜>`` (DeepSeek-V3 chat
  template, https://huggingface.co/deepseek-ai/DeepSeek-V3);
* ``granite``: ``<|tool_call|>`` (IBM Granite 3.x model card,
  https://www.ibm.com/granite/docs/models/granite/);
* ``qwen3_coder``: ``<tool_call>`` ``<function=NAME>`` ``<parameter=P>`` (Qwen3-Coder model
  card, https://huggingface.co/Qwen/Qwen3-Coder-30B-A3B-Instruct);
* ``pythonic``: ``[f(a=1)]``, optionally in ``<|python_start|>`` / ``<|python_end|>``
  (Llama 3.2 / Llama 4 model cards, https://www.llama.com/docs/model-cards-and-prompt-formats/).

Only ``demo`` and ``hermes`` force a call natively (a prefill of the begin marker, see
:func:`prefill`); the others use the format-independent JSON forcing of
:mod:`server.parsers.tools.grammar`.
"""

from __future__ import annotations

import json

import msgspec

from server.parsers.tools.settings import ToolSettings


class ToolFormat(msgspec.Struct, frozen=True):
    """A format's call markers (``end`` is empty where calls have no end marker)."""

    begin: str
    end: str


DEMO_BEGIN, DEMO_END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
HERMES_BEGIN, HERMES_END = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
MISTRAL_CALLS, MISTRAL_ARGS = "[TOOL_CALLS]", "[ARGS]"
DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DEEPSEEK_SEP = "<｜tool▁sep｜>"
GRANITE_CALL = "<|tool_call|>"
PYTHON_START, PYTHON_END = "<|python_start|>", "<|python_end|>"

TOOL_CALL_PARSERS: dict[str, ToolFormat] = {
    "demo": ToolFormat(DEMO_BEGIN, DEMO_END),
    "hermes": ToolFormat(HERMES_BEGIN, HERMES_END),
    "llama3_json": ToolFormat(PYTHON_TAG, ""),
    "mistral": ToolFormat(MISTRAL_CALLS, ""),
    "deepseek_v3": ToolFormat(DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END),
    "qwen3_coder": ToolFormat(HERMES_BEGIN, HERMES_END),
    "pythonic": ToolFormat(PYTHON_START, PYTHON_END),
    "granite": ToolFormat(GRANITE_CALL, ""),
}
# The formats whose forced calls use their own markers (prefill + structural tag).
NATIVE_FORCING = ("demo", "hermes")


def forces_natively(parser: str) -> bool:
    return parser in NATIVE_FORCING


def prefill(fmt: ToolFormat, settings: ToolSettings) -> str | None:
    """Text appended to the prompt to force a call natively (None: nothing is forced)."""
    if settings.mode == "required":
        return fmt.begin
    if settings.mode == "named":
        return fmt.begin + call_prefix(settings.name or "")
    return None


def call_prefix(name: str, key: str = "arguments") -> str:
    """The start of a named call's JSON body, up to its arguments."""
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + f', "{key}": '
