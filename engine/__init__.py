"""The Python engine, in layers: ``process`` (ZMQ loop, handshake, launcher) over
``runtime`` (the real engine) and ``mock`` (the mock engine, the demo model), all over
``protocol`` (the wire) and ``config`` (the engine settings).
``python -m engine --headless ...`` starts one engine process (``__main__``)."""
