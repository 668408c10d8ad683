"""Batched sampling over per-request parameters.

Order, as in vLLM: logprobs are taken from the raw logits; then the per-request logits
processors (``allowed_token_ids``, ``logit_bias``, ``bad_words_token_ids``: see
engine/runtime/logits_processors.py, only for the rows that set them), penalties
(repetition over prompt and output, presence and frequency over the output), the
``min_tokens`` mask on EOS / stop tokens, the structured-output grammar's token bitmask
(engine/grammar/bitmask.py, only for constrained rows), greedy argmax for temperature 0,
and for the rest temperature, top-k, top-p, min-p and a draw. When the earlier masks
leave a constrained row nothing the grammar allows (``min_tokens`` against a finished
grammar, say), the grammar wins: that row is its raw logits under the grammar's mask.
Last, a request whose thinking budget is spent (engine/thinking_budget.py) takes its
forced end-marker token whatever was drawn (vLLM's 1e9 logit, after every other rule);
its logprobs are still the raw logits'.

Nothing sorts the vocabulary unless top-p needs it: greedy rows take an argmax; top-k /
top-p rows draw among their candidates (engine/runtime/top_k_top_p.py: ``torch.topk`` of
the best k, then the prefix reaching top_p, renormalised within the top k as transformers
and vLLM do); rows without either draw over the whole softmax. Logprobs are one
``log_softmax`` and one top-k over every row that asked.

The draw is an exponential race (``argmax(p / q)``, ``q ~ Exp(1)``), which samples
exactly from ``p``. A request with a ``seed`` draws its ``q`` from its own
``torch.Generator``, advanced once per sampled token, so its tokens do not depend on
what else is in the batch (or on preemption); the others share the engine generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine import protocol as p
from engine.grammar.bitmask import apply_grammars
from engine.runtime.argmax import row_argmax
from engine.runtime.logits_processors import apply_logits_processors
from engine.runtime.logprobs import token_logprobs
from engine.runtime.request import Request
from engine.runtime.top_k_top_p import top_k_top_p

MAX_LOGPROBS = 20


@dataclass
class SamplerOutput:
    token_ids: list[int]
    logprobs: list[p.TokenLogprobs | None]


class Sampler:
    def __init__(self, vocab_size: int, seed: int, device: torch.device) -> None:
        self.vocab_size = vocab_size
        self.device = device
        self.generator = torch.Generator(device="cpu")
        self.generator.manual_seed(seed)

    def __call__(self, logits: torch.Tensor, requests: list[Request]) -> SamplerOutput:
        forced = [
            (i, token) for i, r in enumerate(requests)
            if r.thinking is not None and (token := r.thinking.forced()) is not None
        ]
        fast = all(
            r.is_greedy
            and r.params.logprobs is None
            and not r.has_penalties
            and not r.needs_min_tokens_mask
            and not r.has_logits_processors
            and r.grammar is None
            for r in requests
        )
        if fast:
            tokens = row_argmax(logits).tolist()
            for i, token in forced:
                tokens[i] = token
            return SamplerOutput(tokens, [None] * len(requests))
        return self._sample(logits.float(), requests, forced)

    # ------------------------------------------------------------------ general path

    def _sample(
        self, logits: torch.Tensor, requests: list[Request], forced: list[tuple[int, int]]
    ) -> SamplerOutput:
        n = len(requests)
        want_logprobs = [i for i, r in enumerate(requests) if r.params.logprobs is not None]
        raw_logprobs = None
        if want_logprobs:  # every row asking: no copy of the rows first
            rows = logits if len(want_logprobs) == n else logits[want_logprobs]
            raw_logprobs = torch.log_softmax(rows, dim=-1)
        processed = [i for i, r in enumerate(requests) if r.has_logits_processors]
        penalized = [i for i, r in enumerate(requests) if r.has_penalties]
        masked = [i for i, r in enumerate(requests) if r.needs_min_tokens_mask]
        constrained = [i for i, r in enumerate(requests) if r.grammar is not None]
        raw = logits
        if processed or penalized or masked:
            logits = logits.clone()
        if processed:
            apply_logits_processors(logits, requests, processed)
        if penalized:
            self._apply_penalties(logits, requests, penalized)
        if masked:
            for i in masked:
                r = requests[i]
                banned = [t for t in r.eos_token_ids | r.stop_ids if 0 <= t < logits.shape[1]]
                if banned:
                    logits[i, banned] = float("-inf")
        if constrained:
            touched = {*processed, *penalized, *masked}
            self._apply_grammars(logits, raw, requests, constrained,
                                 [i for i in constrained if i in touched])

        random_rows = [i for i, r in enumerate(requests) if not r.is_greedy]
        if not random_rows:
            tokens = row_argmax(logits)
        elif len(random_rows) == n:
            tokens = self._draw(logits, requests)
        else:  # greedy rows take their argmax, the others draw
            greedy_rows = [i for i, r in enumerate(requests) if r.is_greedy]
            tokens = torch.empty(n, dtype=torch.long, device=logits.device)
            tokens[greedy_rows] = row_argmax(logits[greedy_rows])
            tokens[random_rows] = self._draw(logits[random_rows],
                                             [requests[i] for i in random_rows])
        token_list = tokens.tolist()
        for i, token in forced:
            token_list[i] = token

        logprobs: list[p.TokenLogprobs | None] = [None] * n
        if raw_logprobs is not None:  # one top-k over every row that asked
            ks = [min(requests[i].params.logprobs or 0, MAX_LOGPROBS) for i in want_logprobs]
            entries = token_logprobs(raw_logprobs, [token_list[i] for i in want_logprobs], ks)
            for i, entry in zip(want_logprobs, entries, strict=True):
                logprobs[i] = entry
        return SamplerOutput(token_list, logprobs)

    @staticmethod
    def _apply_grammars(
        logits: torch.Tensor,
        raw: torch.Tensor,
        requests: list[Request],
        rows: list[int],
        touched: list[int],
    ) -> None:
        """The grammars' masks, in place (``logits`` is this step's own tensor). Only the
        ``touched`` rows (earlier masks applied) can end up with nothing allowed."""
        apply_grammars(logits, rows, [requests[i].grammar for i in rows])
        if not touched:
            return
        empty = torch.isneginf(logits[touched]).all(dim=-1).nonzero().flatten().tolist()
        if empty:  # the earlier masks left nothing the grammar allows: the grammar wins
            lost = [touched[j] for j in empty]
            logits[lost] = raw[lost]
            apply_grammars(logits, lost, [requests[i].grammar for i in lost])

    def _apply_penalties(
        self, logits: torch.Tensor, requests: list[Request], rows: list[int]
    ) -> None:
        vocab = logits.shape[1]
        dev = logits.device
        sub = logits[rows]
        outputs = [requests[i].output_token_ids for i in rows]
        width = max(1, max(len(o) for o in outputs))
        out_ids = torch.full((len(rows), width), vocab, dtype=torch.long)
        for j, o in enumerate(outputs):
            if o:
                out_ids[j, : len(o)] = torch.tensor(o, dtype=torch.long)
        out_ids = out_ids.to(dev)
        counts = torch.zeros(len(rows), vocab + 1, device=dev)
        counts.scatter_add_(1, out_ids, torch.ones_like(out_ids, dtype=counts.dtype))
        counts = counts[:, :vocab]
        params = [requests[i].params for i in rows]
        rep = torch.tensor([sp.repetition_penalty for sp in params], device=dev)[:, None]
        if bool((rep != 1.0).any()):
            prompts = [requests[i].token_ids[: requests[i].num_prompt_tokens] for i in rows]
            seen = counts > 0
            pw = max(len(pr) for pr in prompts)
            prompt_ids = torch.full((len(rows), pw), vocab, dtype=torch.long)
            for j, pr in enumerate(prompts):
                prompt_ids[j, : len(pr)] = torch.tensor(pr, dtype=torch.long)
            in_prompt = torch.zeros(len(rows), vocab + 1, dtype=torch.bool, device=dev)
            in_prompt.scatter_(1, prompt_ids.to(dev), True)
            seen |= in_prompt[:, :vocab]
            scaled = torch.where(sub > 0, sub / rep, sub * rep)
            sub = torch.where(seen, scaled, sub)
        presence = torch.tensor([sp.presence_penalty for sp in params], device=dev)[:, None]
        frequency = torch.tensor([sp.frequency_penalty for sp in params], device=dev)[:, None]
        sub = sub - presence * (counts > 0) - frequency * counts
        logits[rows] = sub

    def _draw(self, logits: torch.Tensor, requests: list[Request]) -> torch.Tensor:
        dev = logits.device
        temps = torch.tensor([r.params.temperature for r in requests], device=dev)[:, None]
        logits = logits / temps
        vocab = logits.shape[1]
        limited = [i for i, r in enumerate(requests)
                   if 0 < r.params.top_k < vocab or r.params.top_p < 1.0]
        if not limited:
            return self._race(logits, requests)
        tokens = torch.empty(len(requests), dtype=torch.long, device=dev)
        limited_rows = set(limited)
        free = [i for i in range(len(requests)) if i not in limited_rows]
        if free:
            tokens[free] = self._race(logits[free], [requests[i] for i in free])
        # Top-k / top-p rows: only their candidates, never a sort of the whole vocabulary
        # unless top_p needs it (engine/runtime/top_k_top_p.py).
        rows = [requests[i] for i in limited]
        found = top_k_top_p(logits[limited], [r.params.top_k for r in rows],
                            [r.params.top_p for r in rows])
        choice = self._race(found.logits, rows, found.kept)
        tokens[limited] = found.token_ids.gather(1, choice[:, None])[:, 0]
        return tokens

    def _race(self, logits: torch.Tensor, requests: list[Request],
              kept: list[int] | None = None) -> torch.Tensor:
        """The exponential race over ``logits`` (after min_p): a column per row. A seeded
        row draws its own ``q``: over the whole row, or over its first ``kept`` columns
        (the candidates it keeps, whatever the batch's width)."""
        dev = logits.device
        probs = torch.softmax(logits, dim=-1)
        min_p = [r.params.min_p for r in requests]
        if any(mp > 0.0 for mp in min_p):
            mp = torch.tensor(min_p, device=dev, dtype=probs.dtype)[:, None]
            threshold = mp * probs.max(dim=-1, keepdim=True).values
            probs = probs.masked_fill(probs < threshold, 0.0)
        q = torch.empty(probs.shape, dtype=probs.dtype)
        if all(r.generator is None for r in requests):
            q.exponential_(generator=self.generator)
        else:
            for i, r in enumerate(requests):
                width = probs.shape[1] if kept is None else kept[i]
                q[i, :width].exponential_(generator=r.generator or self.generator)
                q[i, width:] = 1.0  # probability 0 there: never the winner
        return row_argmax(probs / q.to(dev))
