"""The decoder's forward compiled by torch.compile (inductor), attention kept outside.

What is compiled: ``DecoderModel.run_layers`` (embedding, norms, RoPE, the residual adds,
SiLU-and-multiply), so inductor fuses the small element-wise ops between the matmuls
into a few C++ loops. Two things stay opaque custom ops inside the graph:

* ``vrs::attention``: the paged attention of one layer. It takes only ``q`` and ``kv``
  and the layer index; the step's cache and metadata reach it through the thread's
  current step (set by ``DecoderGraph.__call__``), never through the graph, so the graph
  does not depend on the batch's layout and the attention backend may compile (or not)
  on its own.
* ``vrs::linear``: the engine's matmul when it is not torch's own (oneDNN on CPU, with
  its row buckets); inductor would otherwise lower it to a slower GEMM or refuse it.

The token count ``T`` is a dynamic dimension: one compile covers every batch from 2
tokens up (a 1-token step runs eager), so there are no per-size compiles and nothing
to pad. The compile happens once, at start-up (``warm_up``), with a log line before and
after. CUDA keeps the eager path (compile there is unmeasured); ``--enforce-eager``
turns compilation off, ``VRS_COMPILE=auto|on|off`` overrides the default (auto: eager
everywhere: float32 did not gain, and bfloat16's 7-10 % came with more departures from
transformers' greedy tokens than the bf16 parity tolerance allows; see docs/internals.md
"Compiled decoder" for the numbers).
"""

from __future__ import annotations

import logging
import os
import threading
import time

import torch
import torch.nn.functional as F

from engine.config import ConfigError, EngineConfig
from engine.runtime.attention.base import AttentionMetadata
from engine.runtime.model_runner import Forward
from engine.runtime.models.decoder import Attend, DecoderModel, Linear

logger = logging.getLogger("vrs.engine")
WARM_UP_TOKENS = 64  # a typical decode batch: inductor sizes its loops from this hint

_step = threading.local()  # .attend: the attention of the step being run on this thread
_linears: dict[str, Linear] = {}  # the non-torch matmuls by backend name


# It writes the layer's KV cache, which is no input of the graph and never read by it, so
# it declares no mutation; each call's output feeds the next layer, which keeps the order.
@torch.library.custom_op("vrs::attention", mutates_args=())
def _attention(q: torch.Tensor, kv: torch.Tensor, layer: int) -> torch.Tensor:
    attend: Attend | None = getattr(_step, "attend", None)
    if attend is None:
        raise RuntimeError("vrs::attention ran outside a compiled decoder step")
    return attend(layer, q, kv)


@_attention.register_fake
def _(q: torch.Tensor, kv: torch.Tensor, layer: int) -> torch.Tensor:
    return q.new_empty((q.shape[0], q.shape[1] * q.shape[2]))


@torch.library.custom_op("vrs::linear", mutates_args=())
def _linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, backend: str
) -> torch.Tensor:
    return _linears[backend](x, weight, bias)


@_linear.register_fake
def _(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, backend: str
) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _graph_attend(layer: int, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = _attention(q, kv, layer)  # a custom op's call is typed Any
    return out


def compile_choice(config: EngineConfig, device: torch.device, dtype: torch.dtype
                   ) -> tuple[bool, str]:
    """Whether to compile the decoder here, and why (for the start-up log)."""
    if config.enforce_eager:
        return False, "--enforce-eager"
    wanted = os.environ.get("VRS_COMPILE", "auto")
    if wanted not in ("auto", "on", "off"):
        raise ConfigError(f"VRS_COMPILE={wanted!r}; allowed: auto, on, off")
    if wanted == "off":
        return False, "VRS_COMPILE=off"
    if device.type != "cpu":
        return False, f"{device.type} keeps the eager path (compiling there is unmeasured)"
    if wanted == "on":
        return True, "VRS_COMPILE=on"
    if dtype == torch.bfloat16:
        return False, ("bfloat16 on CPU: compiled measured 7-10 % faster but leaves "
                       "transformers' greedy tokens more often than the bf16 parity tolerance "
                       "allows (VRS_COMPILE=on opts in)")
    return False, (f"{str(dtype).removeprefix('torch.')} on CPU: compiling measured no "
                   "faster (float32) or is unmeasured (float16)")


class DecoderGraph:
    """``DecoderModel.forward`` with the layers compiled; same signature, same results."""

    def __init__(self, model: DecoderModel) -> None:
        self.model = model
        if model.linear is F.linear:
            linear: Linear = F.linear
        else:
            backend = model.linear_backend
            _linears[backend] = model.linear

            def linear(x: torch.Tensor, weight: torch.Tensor,
                       bias: torch.Tensor | None) -> torch.Tensor:
                out: torch.Tensor = _linear(x, weight, bias, backend)  # typed Any, as above
                return out

        def run(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
            return model.run_layers(input_ids, positions, _graph_attend, linear)

        self._graph = torch.compile(run, fullgraph=True)

    def __call__(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttentionMetadata,
        kv_caches: list[torch.Tensor],
    ) -> torch.Tensor:
        if input_ids.shape[0] < 2:  # size 1 would be a second, specialised compile
            return self.model.forward(input_ids, positions, meta, kv_caches)
        return self._run(input_ids, positions, self.model.attention(meta, kv_caches))

    def _run(self, input_ids: torch.Tensor, positions: torch.Tensor, attend: Attend
             ) -> torch.Tensor:
        torch._dynamo.mark_dynamic(input_ids, 0)
        torch._dynamo.mark_dynamic(positions, 0)
        _step.attend = attend
        try:
            return self._graph(input_ids, positions)
        finally:
            _step.attend = None

    def warm_up(self, max_tokens: int) -> None:
        """Compile now (attention answers zeros: the graph does not see it)."""
        model = self.model
        cfg = model.config
        tokens = max(2, min(WARM_UP_TOKENS, max_tokens))

        def zeros(layer: int, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            return q.new_zeros((q.shape[0], cfg.num_heads * cfg.head_dim))

        with torch.inference_mode():  # as the steps run: no recompile for a dispatch key
            ids = torch.zeros(tokens, dtype=torch.long, device=model.device)
            positions = torch.arange(tokens, dtype=torch.long, device=model.device)
            self._run(ids, positions, zeros)


def build_forward(config: EngineConfig, model: DecoderModel, max_tokens: int
                  ) -> Forward | None:
    """The compiled forward, warmed, where ``compile_choice`` says so; None: the model's
    eager forward. A failed compile under ``auto`` logs why and runs eager; under
    ``VRS_COMPILE=on`` it is an error."""
    wanted, reason = compile_choice(config, model.device, model.dtype)
    if not wanted:
        logger.info("decoder runs eager (%s)", reason)
        return None
    logger.info("compiling the decoder (%s; torch.compile, inductor; --enforce-eager skips "
                "this)", reason)
    start = time.perf_counter()
    try:
        graph = DecoderGraph(model)
        graph.warm_up(max_tokens)
    except Exception as exc:
        if os.environ.get("VRS_COMPILE") == "on":
            raise
        logger.warning("compiling the decoder failed (%s: %s); running eager",
                       type(exc).__name__, exc)
        return None
    logger.info("decoder compiled in %.1fs (one graph for every batch of 2+ tokens)",
                time.perf_counter() - start)
    return graph
