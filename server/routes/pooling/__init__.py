"""The pooling routes (vLLM 0.33's shapes, served when the engine's runner is "pooling"):
``/v1/embeddings`` (embeddings.py), ``/pooling`` (pooling.py), ``/classify``
(classify.py), ``/score`` and ``/rerank`` (score.py); their shared body checks and prompts
(request.py) and their fan-out to the engine (dispatch.py). Rust:
rust/server/src/routes/pooling/. Behaviour: docs/api.md, "Pooling routes".
"""
