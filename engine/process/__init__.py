"""The engine's process and wire layer: the ZMQ loop around a backend (``core``), output
coalescing (``coalesce``), the engine side of the handshake (``handshake``) and the Python
launcher side (``launcher``). Uses a backend from ``engine.runtime`` or ``engine.mock``."""
