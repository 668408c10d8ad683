"""How close to the machine's limit: its matmul rate at a model's decode shapes, and the
FLOPs a generation run does.

``matmul_rate`` loads the model as the engine does (``engine.runtime.models.load_model``:
same weights, dtype and linear, ``model.linear``) and times each of a decode step's
matmuls with ``rows`` input rows (q/k/v, o, gate/up, down, LM head), taking the fastest
of repeated calls. The step's mix,
each matmul weighted by how often a step runs it, is the rate to compare with.

``run_flops`` counts what a run computes: matmul FLOPs (2 per multiply-add, every
linear, the LM head only where a token is sampled) and, apart, attention FLOPs (QK^T and
PV over each token's context). The effective rate is matmul FLOPs over wall time: the
attention FLOPs are reported but not in the ratio, since the matmul rate does not cover
them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch


def _shapes(cfg: Any) -> list[tuple[str, int, int, int]]:
    """(name, in, out, calls per step) of each linear of a decode step."""
    q_out = cfg.num_heads * cfg.head_dim
    kv_out = cfg.num_kv_heads * cfg.head_dim
    layers = cfg.num_layers
    return [
        ("qkv", cfg.hidden_size, q_out + 2 * kv_out, layers),
        ("o", q_out, cfg.hidden_size, layers),
        ("gate_up", cfg.hidden_size, 2 * cfg.intermediate_size, layers),
        ("down", cfg.intermediate_size, cfg.hidden_size, layers),
        ("lm_head", cfg.hidden_size, cfg.vocab_size, 1),
    ]


def _time(call: Any, device: torch.device, budget_s: float) -> float:
    """Fastest seconds of one ``call`` (after a warm-up), repeated for about ``budget_s``:
    what the machine can do, the least disturbed by other work on its cores."""
    for _ in range(3):
        call()
    times: list[float] = []
    spent = 0.0
    while spent < budget_s or len(times) < 5:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        took = time.perf_counter() - start
        times.append(took)
        spent += took
    return min(times)


def matmul_rate(model_dir: Path, dtype: str, device: str, rows: int,
                budget_s: float = 0.3) -> dict[str, Any]:
    """GFLOP/s of each decode matmul and of the step's mix, through the engine's linear."""
    from engine.runtime.device import resolve_device, resolve_dtype
    from engine.runtime.loader import read_config
    from engine.runtime.models import load_model

    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    model = load_model(model_dir, read_config(model_dir), torch_dtype, dev, 64)
    layer = model.layers[0]
    weights = {"qkv": (layer.qkv_w, layer.qkv_b), "o": (layer.o_w, layer.o_b),
               "gate_up": (layer.gate_up_w, layer.gate_up_b),
               "down": (layer.down_w, layer.down_b), "lm_head": (model.lm_head, None)}
    per_shape = {}
    step_flops = step_s = 0.0
    with torch.inference_mode():
        for name, fan_in, fan_out, calls in _shapes(model.config):
            weight, bias = weights[name]
            x = torch.randn(rows, fan_in, device=dev).to(torch_dtype)
            seconds = _time(lambda x=x, w=weight, b=bias: model.linear(x, w, b), dev, budget_s)
            flops = 2.0 * rows * fan_in * fan_out
            per_shape[name] = {"in": fan_in, "out": fan_out, "gflops": flops / seconds / 1e9}
            step_flops += calls * flops
            step_s += calls * seconds
    return {"dtype": str(torch_dtype).removeprefix("torch."), "rows": rows,
            "backend": model.linear_backend, "shapes": per_shape,
            "step_gflops": step_flops / step_s / 1e9}


def run_flops(cfg: Any, requests: int, input_tokens: int, output_tokens: int) -> dict[str, float]:
    """Matmul and attention FLOPs of ``requests`` requests making ``output_tokens`` tokens
    (in all) from ``input_tokens`` prompt tokens (in all)."""
    body = sum(calls * fan_in * fan_out for name, fan_in, fan_out, calls in _shapes(cfg)
               if name != "lm_head")
    head = cfg.hidden_size * cfg.vocab_size
    # The last token of each request is never fed back through the model.
    fed = input_tokens + output_tokens - requests
    matmul = 2.0 * (body * fed + head * output_tokens)
    # A token at context length c: QK^T and PV, 2 FLOPs per multiply-add each, per head.
    per_request = fed / requests
    context_sum = requests * per_request * (per_request + 1) / 2
    attention = 4.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * context_sum
    return {"matmul": matmul, "attention": attention}


def decoder_config(model_dir: Path) -> Any:
    from engine.runtime.loader import read_config
    from engine.runtime.models import resolve_config

    return resolve_config(read_config(model_dir))
