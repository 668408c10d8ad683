"""A vLLM-wire mock engine on vLLM 0.33.0's own structs and encoder.

Run it with an interpreter where vllm 0.33.0 is installed, through
``tests/vllm_compat/mock_engine.py`` (its CLI). The parts: ``handshake`` (joining a
frontend-owned startup handshake as a headless engine), ``sequence`` (one request's
random tokens, stops and synthetic logprobs), ``utility`` (UTILITY calls) and ``engine``
(the sockets and the paced step loop of one engine identity).
"""
