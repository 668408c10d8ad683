"""Profiler labels around the parts of an engine step, and the split of a profile by them.

``install_labels`` wraps, on one ``ModelEngine`` (its instances, and the decoder module's
attention function), each part in a ``torch.profiler.record_function`` label ``vrs.<part>``.
A hook whose target does not exist (the code moved) is left out and reported, and the
split falls back on op names for what it would have labelled.

``split_profile`` turns the profiler's events into shares of the profiled wall time: each
op's self time goes to the part of its nearest label (matmul-like or attention-like op
names go to those parts wherever they run), each label's self time (Python between its
ops) to its own part, and what no event covers to ``step other`` (the step's own glue).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch

PARTS = ("schedule", "prepare", "attention", "matmul", "forward other", "sample", "update",
         "step other")
LABEL_PART = {"vrs.schedule": "schedule", "vrs.prepare": "prepare",
              "vrs.attention": "attention", "vrs.matmul": "matmul",
              "vrs.forward": "forward other", "vrs.sample": "sample", "vrs.update": "update"}
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul",
              "mkldnn::_linear_pointwise", "aten::_weight_int8pack_mm")
KERNEL_OPS = ("aten::bmm", "aten::_softmax", "aten::softmax")
ATTENTION_SPLIT = ("K/V gather", "kernel", "K/V write", "other ops", "Python")


def _labelled(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
    if getattr(fn, "_vrs_label", None) == label:
        return fn

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)

    run._vrs_label = label  # type: ignore[attr-defined]
    return run


def install_labels(engine: Any) -> dict[str, bool]:
    """Label the parts of ``engine``'s step; returns which hooks found their target."""
    model = engine.model
    targets: list[tuple[str, Any, str]] = [
        ("vrs.schedule", engine.scheduler, "schedule"),
        ("vrs.prepare", engine.runner, "prepare"),
        ("vrs.forward", model, "forward"),
        ("vrs.matmul", model, "linear"),
        ("vrs.matmul", model, "compute_logits"),
        ("vrs.sample", engine, "sampler"),
        ("vrs.update", engine, "_update"),
        *_attention_targets(model),
    ]
    found = {}
    for label, owner, name in targets:
        fn = getattr(owner, name, None) if owner is not None else None
        found[f"{label}:{name}"] = callable(fn)
        if callable(fn):
            setattr(owner, name, _labelled(fn, label))
    return found


def _attention_targets(model: Any) -> list[tuple[str, Any, str]]:
    """Where the decoder calls attention: functions named like attention that its module
    imports from engine.runtime.attention*, and the ``forward`` of every class defined
    there (an attention backend's per-step object)."""
    module = sys.modules.get(type(model).__module__)
    found: list[tuple[str, Any, str]] = []
    for name, obj in vars(module).items() if module is not None else ():
        origin = getattr(obj, "__module__", "") or ""
        if callable(obj) and not isinstance(obj, type) and "attention" in name \
                and origin.startswith("engine.runtime.attention"):
            found.append(("vrs.attention", module, name))
    for name, mod in list(sys.modules.items()):  # attention backends' classes
        if not name.startswith("engine.runtime.attention") or mod is None:
            continue
        for cls in vars(mod).values():
            if isinstance(cls, type) and cls.__module__ == name and "forward" in vars(cls):
                found.append(("vrs.attention", cls, "forward"))
    return found or [("vrs.attention", module, "paged_attention")]


def _label_of(event: Any) -> tuple[str | None, list[str]]:
    """The nearest ``vrs.*`` label above ``event`` and the op names on the way up."""
    names = []
    node = event
    while node is not None:
        if node.name.startswith("vrs."):
            return node.name, names
        names.append(node.name)
        node = node.cpu_parent
    return None, names


def _part(label: str | None, names: list[str]) -> str:
    if label in ("vrs.attention", "vrs.matmul"):
        return LABEL_PART[label]
    if any("attention" in n.lower() or "flex" in n.lower() for n in names):
        return "attention"
    if any(n in MATMUL_OPS for n in names):
        return "matmul"
    return LABEL_PART.get(label or "", "step other")


def _attention_bucket(event: Any) -> str:
    name = event.name
    if "index_select" in name:
        return "K/V gather"
    # SDPA, FlexAttention, or the resident backend's two matmuls and softmax.
    if "scaled_dot_product" in name or "flex" in name.lower() or name in KERNEL_OPS:
        return "kernel"
    if "index_copy" in name or "index_put" in name:
        return "K/V write"
    return "other ops"


def split_profile(events: Iterable[Any], wall_s: float) -> dict[str, Any]:
    """Shares of ``wall_s`` (the profiled steps' wall time): per part, inside ops against
    between them, and attention by kind."""
    total = wall_s * 1e6  # the profiler counts microseconds
    parts = dict.fromkeys(PARTS, 0.0)
    attention = dict.fromkeys(ATTENTION_SPLIT, 0.0)
    in_ops = 0.0
    covered = 0.0
    for event in events:
        self_us = event.self_cpu_time_total
        if event.cpu_parent is None:
            covered += event.cpu_time_total
        if event.name.startswith("vrs."):  # a label: its self time is Python between ops
            parts[LABEL_PART[event.name]] += self_us
            if event.name == "vrs.attention":
                attention["Python"] += self_us
            continue
        in_ops += self_us
        label, names = _label_of(event)
        parts[_part(label, names)] += self_us
        if label == "vrs.attention" and event.cpu_parent is not None \
                and event.cpu_parent.name == "vrs.attention":
            attention[_attention_bucket(event)] += event.cpu_time_total
    parts["step other"] += max(0.0, total - covered)
    return {
        "parts": {k: v / total for k, v in parts.items()},
        "in_ops": in_ops / total,
        "between_ops": 1.0 - in_ops / total,
        "attention": {k: v / total for k, v in attention.items()},
    }
