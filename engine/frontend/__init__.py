"""The Python OpenAI-compatible frontend (``vrs serve --frontend python``), the baseline.

Same routes, fields, shapes, status codes and text algorithms as the Rust frontend
(``rust/cli``, ``rust/text``). Modules: ``server`` (the process: ``serve(args)``, startup,
signals, exit codes), ``app`` (the ASGI routes), ``params`` (request validation),
``schema`` (request and response bodies), ``errors`` (the error type and its HTTP
mapping), ``client`` (the ZMQ engine client), ``generation`` (one request's outputs to
text), ``text`` (tokenizer, chat template, detokenizer, stop strings), ``prompt`` (request
to engine input), ``choices`` and ``responses`` (choices to chunks and bodies), ``tools``
and ``reasoning`` (the streaming parsers, with ``markers``), ``logprobs``, ``metrics``,
``tokenization`` (/tokenize, /detokenize), ``render`` (the engine-less render service).
docs/api.md lists every route and field.
"""
