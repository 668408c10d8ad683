"""Chat template content format (``--chat-template-content-format``): how a message's content
reaches the chat template, and ``auto``'s detection (vLLM's ``_detect_content_format``,
vllm/entrypoints/chat_utils.py) on the template's syntax tree. Behaviour: docs/api.md,
"Content format".

Detection:

1. *messages names*: ``messages``, then every ``{% set NAME = E %}`` whose ``E`` reads a
   messages name, to a fixed point. ``E`` reads ``x`` when it is ``x``, or a filter or
   test applied to something that reads ``x`` (``x | reverse``), or a slice of it
   (``x[1:]``).
2. *message names*: the target of every ``{% for T in E %}`` whose ``E`` reads a messages
   name.
3. *content loops*: every ``{% for P in E %}`` whose ``E`` reads ``m.content`` or
   ``m['content']`` of a message name (through filters, tests and slices the same way),
   or is the bare name ``content`` (a macro parameter or variable of that name: vLLM's
   rule since vllm-project/vllm#42660, e.g. ``{% for part in content %}`` in a
   ``render_content(content)`` macro). ``openai`` when there is one.

Anything else is ``string``: a template that only prints or tests content, a loop over
another variable set from content (``{% set c = m.content %}{% for p in c %}``), over
``content | list``, or over ``messages[0].content``. A template that does not parse, a
``set`` of a tuple or namespace attribute from a messages name, a loop with a tuple target
over a messages name, or a tuple target on the first content loop also mean ``string``
(vLLM's walk gives up there). The same rule, on minijinja's tree, is
``rust/text/src/template/content_format.rs``; both are checked against
``tests/parser_cases/content_format.jsonl``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import jinja2
import jinja2.nodes as nodes

ContentFormat = Literal["string", "openai"]
CONTENT_FORMAT_CHOICES = ("auto", "string", "openai")


def check_option(value: str | None) -> str:
    """The option's value (None: ``auto``); ValueError naming the choices otherwise."""
    if value is None:
        return "auto"
    if value not in CONTENT_FORMAT_CHOICES:
        raise ValueError("chat_template_content_format must be one of "
                         f"{', '.join(CONTENT_FORMAT_CHOICES)}; got {value!r}")
    return value


def _parse(source: str) -> nodes.Template | None:
    # transformers' own environment (its extensions: loop controls, {% generation %}).
    from transformers.utils.chat_template_utils import _compile_jinja_template

    try:
        # transformers' helper is unannotated: its compiled template's environment is jinja2's
        environment: jinja2.Environment = _compile_jinja_template(source).environment
        return environment.parse(source)
    except (jinja2.TemplateError, ValueError, TypeError):
        return None


def _reads(expr: nodes.Node, name: str, key: str | None = None) -> bool:
    """Whether ``expr`` is ``name`` (or ``name.key`` / ``name['key']``), possibly under
    filters, tests and slices."""
    if isinstance(expr, nodes.Filter):
        return expr.node is not None and _reads(expr.node, name, key)
    if isinstance(expr, nodes.Test):
        return _reads(expr.node, name, key)
    if isinstance(expr, nodes.Getitem) and isinstance(expr.arg, nodes.Slice):
        return _reads(expr.node, name, key)
    if key is None:
        return isinstance(expr, nodes.Name) and expr.ctx == "load" and expr.name == name
    if isinstance(expr, nodes.Getattr):
        return _reads_name(expr.node, name) and expr.attr == key
    if isinstance(expr, nodes.Getitem):
        return (_reads_name(expr.node, name) and isinstance(expr.arg, nodes.Const)
                and expr.arg.value == key)
    return False


def _reads_name(expr: nodes.Node, name: str) -> bool:
    return isinstance(expr, nodes.Name) and expr.ctx == "load" and expr.name == name


class _GiveUp(Exception):
    """A target the walk does not follow: the template counts as ``string``."""


def _target(node: nodes.Assign | nodes.For) -> str:
    if not isinstance(node.target, nodes.Name):
        raise _GiveUp
    return node.target.name


def _messages_names(tree: nodes.Template) -> set[str]:
    names = {"messages"}
    assigns = list(tree.find_all(nodes.Assign))
    grew = True
    while grew:
        grew = False
        for assign in assigns:
            if any(_reads(assign.node, name) for name in names):
                target = _target(assign)
                if target not in names:
                    names.add(target)
                    grew = True
    return names


def _loops_over(loops: Iterable[nodes.For], names: set[str]) -> Iterable[nodes.For]:
    return (loop for loop in loops if any(_reads(loop.iter, name) for name in names))


def _content_loops(loops: Iterable[nodes.For], message: set[str]) -> Iterable[nodes.For]:
    return (loop for loop in loops
            if any(_reads(loop.iter, name, "content") for name in message)
            or (isinstance(loop.iter, nodes.Name) and loop.iter.name == "content"))


def detect(source: str) -> ContentFormat:
    """``openai`` when the template loops over a message's content, else ``string``."""
    tree = _parse(source)
    if tree is None:
        return "string"
    loops = list(tree.find_all(nodes.For))
    try:
        messages = _messages_names(tree)
        message = {_target(loop) for loop in _loops_over(loops, messages)}
        first = next(iter(_content_loops(loops, message)), None)
        if first is None:
            return "string"
        _target(first)
    except _GiveUp:
        return "string"
    return "openai"


def resolve(option: str, source: str | None) -> tuple[ContentFormat, str]:
    """The format for a template (``source``; None: no template) and why, for the log."""
    found = "string" if source is None else detect(source)
    if option != "auto":
        why = "--chat-template-content-format"
        if option != found:
            why += f"; auto would give {found}"
        return option, why  # type: ignore[return-value]
    if source is None:
        return "string", "auto: no chat template"
    why = ("the template loops over message content" if found == "openai"
           else "the template does not loop over message content")
    return found, f"auto: {why}"


def apply(messages: list[dict[str, Any]], fmt: ContentFormat) -> list[dict[str, Any]]:
    """The messages with their content in ``fmt`` (parts are already checked to be text
    parts, ``{"type": "text", "text": ...}``)."""
    if fmt == "string" and not any(isinstance(m.get("content"), list) for m in messages):
        return messages  # nothing to join
    out = []
    for message in messages:
        content = message.get("content")
        item = dict(message)
        if fmt == "string":
            if isinstance(content, list):
                item["content"] = "\n".join(part["text"] for part in content)
        elif isinstance(content, str):
            item["content"] = [{"type": "text", "text": content}]
        elif content is None:
            item["content"] = []
        else:
            item["content"] = [{"type": "text", "text": part["text"]} for part in content]
        out.append(item)
    return out
