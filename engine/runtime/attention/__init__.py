"""Paged attention behind one seam: an ``AttentionBackend`` per engine.

``base.py`` defines the seam (``StepBatch`` in, per-step ``AttentionMetadata`` out, whose
``forward`` runs one layer); ``sdpa.py`` is the gather + SDPA backend, ``flex.py`` the
FlexAttention one, and ``selection.py`` picks one from the device and the engine config.
"""
