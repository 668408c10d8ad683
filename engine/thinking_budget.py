"""vLLM's thinking token budget (``SamplingParams.thinking_budget``): one request's state.

The rule is vLLM's (its ``ThinkingBudgetStateHolder``), on the reasoning parser's markers
as the frontend tokenized them:

* a thinking section opens at a start marker and closes at an end marker;
* at admission the prompt is searched for its last start marker and its last end marker:
  when a start marker comes after every end marker (the chat template leaves the thinking
  open, e.g. a prompt ending in ``<think>\\n``), the section is open and the prompt tokens
  after that marker count toward the budget (vLLM counts them too);
* then each generated token: inside an open section it counts, unless the output now ends
  with an end marker, which closes the section; outside one, an output that ends with a
  start marker (after the last close) opens a new section, counted from zero, with the
  whole budget again;
* once an open section holds ``budget`` tokens (at once for a budget of 0), the next
  tokens are forced to the first end marker, token by token; the section closes when the
  marker is complete.

Forcing overrides every other rule of the step (logit bias, allowed tokens, bad words,
penalties, ``min_tokens``: vLLM sets the token's logit to 1e9 after them), but sampling
still runs, so a seeded request's generator advances as it would. Logprobs stay those of
the raw logits. A request with a structured-output grammar cannot have a budget
(:func:`budget_error`): its grammar applies from the first generated token. This module
has no torch: the real engine (engine/runtime) and the mock engine share it.
"""

from __future__ import annotations

from engine import protocol as p


def budget_error(sp: p.SamplingParams, vocab_size: int) -> str | None:
    """Why ``sp.thinking_budget`` cannot be honoured (None: it can, or there is none)."""
    spec = sp.thinking_budget
    if spec is None:
        return None
    if spec.budget < 0:
        return f"thinking_budget.budget={spec.budget} is out of range; allowed: >= 0"
    if sp.structured_outputs is not None:
        return ("thinking_budget cannot be combined with structured_outputs: the grammar "
                "applies from the first generated token")
    if not spec.start_token_ids or not spec.end_token_ids:
        return "thinking_budget needs at least one start marker and one end marker"
    for name, markers in (("start", spec.start_token_ids), ("end", spec.end_token_ids)):
        for marker in markers:
            if not marker:
                return f"thinking_budget has an empty {name} marker"
            bad = [t for t in marker if not 0 <= t < vocab_size]
            if bad:
                return (f"thinking_budget {name} marker token id {bad[0]} is out of range "
                        f"0..{vocab_size - 1}")
    return None


def _last_index(tokens: list[int], markers: list[list[int]]) -> tuple[int, int]:
    """(index, length) of the last occurrence of any of ``markers`` in ``tokens``; index
    -1 when none occurs (the latest start wins; on a tie, the longer marker)."""
    best = (-1, 0)
    for marker in markers:
        n = len(marker)
        for i in range(len(tokens) - n, -1, -1):
            if tokens[i:i + n] == marker:
                if (i, n) > best:
                    best = (i, n)
                break
    return best


class ThinkingState:
    """Where one request stands against its thinking budget (see the module doc)."""

    __slots__ = ("budget", "_starts", "_ends", "_force", "_keep", "_tail", "_since",
                 "is_open", "count", "forcing")

    def __init__(self, spec: p.ThinkingBudget, prompt_token_ids: list[int]) -> None:
        self.budget = spec.budget
        self._starts = spec.start_token_ids
        self._ends = spec.end_token_ids
        self._force = spec.end_token_ids[0]
        self._keep = max(len(m) for m in (*self._starts, *self._ends))
        self._tail: list[int] = []  # the last output tokens, enough to hold any marker
        self._since = 0  # output tokens since the section opened or closed
        start, length = _last_index(prompt_token_ids, self._starts)
        end, _ = _last_index(prompt_token_ids, self._ends)
        self.is_open = start > end
        # Tokens of the open section (the prompt's, after its start marker, included).
        self.count = len(prompt_token_ids) - (start + length) if self.is_open else 0
        # The index in the forced end marker of the next token, while forcing.
        self.forcing: int | None = None
        self._check_budget()

    def forced(self) -> int | None:
        """The token the next step must produce, or None."""
        return None if self.forcing is None else self._force[self.forcing]

    def advance(self, token: int) -> None:
        """Take the token just generated (the forced one, while forcing)."""
        tail = self._tail
        tail.append(token)
        if len(tail) > self._keep:
            del tail[0]
        self._since += 1
        if self.forcing is not None:
            self.forcing += 1
            if self.forcing == len(self._force):
                self._close()
            return
        if self.is_open:
            if self._ends_with(self._ends):
                self._close()
                return
            self.count += 1
            self._check_budget()
        elif self._ends_with(self._starts):
            self.is_open, self.count, self._since = True, 0, 0
            self._check_budget()

    def _check_budget(self) -> None:
        if self.is_open and self.count >= self.budget:
            self.forcing = 0

    def _close(self) -> None:
        self.is_open, self.count, self.forcing, self._since = False, 0, None, 0

    def _ends_with(self, markers: list[list[int]]) -> bool:
        tail, since = self._tail, self._since
        return any(len(m) <= since and tail[-len(m):] == m for m in markers)
