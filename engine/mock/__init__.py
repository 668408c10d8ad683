"""The mock engine and the demo model: ``engine`` (MockEngine: instant prefill, seeded
random tokens), ``replies`` (scripted replies), ``demo_model`` (builds the built-in demo
model directory with ``templates/``'s chat template)."""
