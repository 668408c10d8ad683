"""Tensor parallel (``--tensor-parallel-size N``): one model split across N processes.

Rank 0 is the engine process: scheduler, KV allocator, sampler and wire stay there. Ranks
1..N-1 are worker processes it starts (``workers.py``, ``worker.py``) that hold their
slice of every layer (``shard.py``) and run the forward of each step that rank 0
broadcasts (``message.py``), through a torch.distributed process group (``group.py``:
gloo on CPU, NCCL on CUDA).
"""
