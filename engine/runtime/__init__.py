"""The real engine, nano-vllm style: ``engine`` (ModelEngine: schedule -> run -> sample ->
update), ``scheduler``, ``kv_cache``, ``request``, ``model_runner``, ``attention``,
``sampler``, ``loader`` and ``models/`` (the decoders). Knows nothing of ZMQ."""
