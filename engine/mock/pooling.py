"""The mock engine's pooling answers: what a pooling mock (``EngineConfig.runner ==
"pooling"``) serves, and the deterministic vector it answers for a prompt, so that a
frontend's pooling routes can be measured and tested without a model.

Tasks by ``convert`` (``pooling_tasks`` in Ready): ``embed`` (and ``auto`` / ``none``) →
``["embed"]``; ``classify`` → ``["classify"]``; ``score`` → ``["classify", "score"]``.
A classify or score mock has two classes, labelled ``LABEL_0`` and ``LABEL_1``.

The formulas, over the prompt's token ids ``t_0 .. t_{n-1}``:

* the features ``f_i = (1/n) Σ_j cos(0.37·(t_j + 1)·(i + 1) + 0.11·j)`` for
  ``i = 0 .. 63`` (:data:`EMBED_DIMS`);
* embed: ``f``, cut to its first ``dimensions`` values when given (the mock is a
  Matryoshka model for 1 ≤ ``dimensions`` ≤ 64; other values are refused as
  ``invalid_request``), then L2-normalized unless ``normalize`` is False;
* classify: the logits ``z_k = 4·f_k`` for the classes ``k = 0, 1``; answered as their
  softmax, or as the raw logits with ``use_activation`` False;
* score: with ``token_type_start`` ``s`` (a (query, document) pair tokenized together),
  the logit ``z = 4·cos(f(t_0..t_{s-1}), f(t_s..t_{n-1}))`` (the cosine similarity of the
  two parts' features), else ``z = 4·f_0``; answered as ``[sigmoid(z)]``, or ``[z]`` with
  ``use_activation`` False.
"""

from __future__ import annotations

import math

import numpy as np

from engine import protocol as p

EMBED_DIMS = 64
LABELS = ["LABEL_0", "LABEL_1"]
_TASKS = {"embed": ["embed"], "auto": ["embed"], "none": ["embed"],
          "classify": ["classify"], "score": ["classify", "score"]}


def tasks_for(convert: str) -> list[str]:
    """The pooling tasks a pooling mock serves with ``--convert convert``."""
    return list(_TASKS[convert])


def labels_for(tasks: list[str]) -> list[str]:
    """The class labels of a mock serving ``tasks`` (none without a classifier)."""
    return list(LABELS) if "classify" in tasks else []


def features(ids: list[int]) -> np.ndarray:
    """The ``EMBED_DIMS`` features of ``ids`` (zeros for no ids), as the module doc says."""
    if not ids:
        return np.zeros(EMBED_DIMS)
    tokens = np.asarray(ids, dtype=np.float64) + 1.0
    positions = np.arange(len(ids), dtype=np.float64) * 0.11
    dims = np.arange(1, EMBED_DIMS + 1, dtype=np.float64)
    mean: np.ndarray = np.cos(0.37 * np.outer(dims, tokens) + positions).mean(axis=1)
    return mean


def runner_error(tasks: list[str] | None, params: p.PoolingParams | None) -> str | None:
    """Why a mock serving ``tasks`` (None: a generating mock) refuses a request with
    ``params`` (None: a generation request); None when it takes it."""
    if tasks is None:
        return None if params is None else (
            "this model generates text: it does not serve pooling requests "
            f"(task {params.task!r})")
    if params is None:
        return f"this model serves pooling requests ({', '.join(tasks)}): it does not generate text"
    return refusal(params, tasks)


def refusal(params: p.PoolingParams, tasks: list[str]) -> str | None:
    """Why a pooling mock serving ``tasks`` refuses ``params`` (None: it does not)."""
    if params.task not in tasks:
        return (f"this model does not serve pooling task {params.task!r} "
                f"(it serves {', '.join(tasks)})")
    dims = params.dimensions
    if dims is not None:
        if params.task != p.PoolingTask.EMBED.value:
            return "dimensions applies to the embed task only"
        if not 1 <= dims <= EMBED_DIMS:
            return (f"dimensions {dims} is not supported: this model's Matryoshka "
                    f"dimensions are 1 to {EMBED_DIMS}")
    return None


def answer(params: p.PoolingParams, ids: list[int]) -> list[float]:
    """The pooling output of ``ids`` for ``params`` (checked by :func:`refusal`)."""
    if params.task == p.PoolingTask.EMBED.value:
        vector = features(ids)
        if params.dimensions is not None:
            vector = vector[:params.dimensions]
        if params.normalize is not False:
            norm = float(np.linalg.norm(vector))
            vector = vector / norm if norm > 0 else vector
        return [float(np.float32(v)) for v in vector]
    activate = params.use_activation is not False
    if params.task == p.PoolingTask.CLASSIFY.value:
        logits = 4.0 * features(ids)[:len(LABELS)]
        if not activate:
            return [float(np.float32(v)) for v in logits]
        exp = np.exp(logits - logits.max())
        return [float(np.float32(v)) for v in exp / exp.sum()]
    start = params.token_type_start
    if start is not None and 0 < start < len(ids):
        a, b = features(ids[:start]), features(ids[start:])
        denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
        logit = 4.0 * (float(a @ b) / denominator if denominator > 0 else 0.0)
    else:
        logit = 4.0 * float(features(ids)[0])
    value = 1.0 / (1.0 + math.exp(-logit)) if activate else logit
    return [float(np.float32(value))]
