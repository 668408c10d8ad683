"""The Python OpenAI-compatible frontend (``vrs serve --frontend python``), the baseline.

Same routes, fields, shapes, status codes and text algorithms as the Rust frontend
(``rust/cli``, ``rust/text``). Modules: ``server`` (the process: ``serve(args)``, startup,
signals, exit codes), ``app`` (the ASGI routes), ``params`` (request validation),
``schema`` (request and response bodies), ``errors`` (the error type and its HTTP
mapping), ``client`` (the ZMQ engine client), ``generation`` (one request's outputs to
text), ``text`` (tokenizer, chat template, detokenizer, stop strings).
"""
