"""Structured outputs in the engine: grammars compiled with xgrammar, one matcher per
constrained request, and the token bitmask applied to its logits before sampling.

Shared by the real engine (engine/runtime) and the mock (engine/mock), which draws its
random tokens from the same allowed set. See docs/internals.md, "Structured outputs".
"""
