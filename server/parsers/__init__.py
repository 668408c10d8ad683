"""Parsers of generated text: tool calls (:mod:`server.parsers.tools`), reasoning
(:mod:`server.parsers.reasoning`) and the marker hold-back they share
(:mod:`server.parsers.markers`). Mirrors ``rust/server/src/parsers.rs``."""
