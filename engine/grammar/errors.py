"""The grammar layer's one error type."""

from __future__ import annotations


class GrammarError(ValueError):
    """A structured-output spec that cannot be enforced: it does not compile, uses what the
    grammar cannot enforce, or took longer than the compile timeout. The message is for the
    user (the frontend answers 400 with it)."""
