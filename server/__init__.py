"""The Python OpenAI-compatible server (``vrs serve --frontend python``), the baseline.

Same routes, fields, shapes, status codes and text algorithms as the Rust server
(``rust/server``, ``rust/text``); a module here does the job of the Rust module of the
same name. Modules: ``lifecycle`` (the process: ``serve(args)``, startup, signals, exit
codes), ``routes`` (the ASGI route table and handlers), ``params`` (request validation;
``sampling``: logit_bias, allowed_token_ids, bad_words, prompt_logprobs), ``batch``
(batched completions prompts: fan-out into engine requests, merged choices and usage),
``openai`` (request and response bodies), ``error`` (the error type and its HTTP mapping),
``engine_client`` (the ZMQ engine client), ``balance`` (data parallel: the least-loaded
engine), ``generation`` (one request's outputs to text), ``text`` (tokenizer, chat
template, detokenizer, stop strings), ``prompt`` (request to engine input), ``choice`` and
``response`` (choices to chunks and bodies), ``tools`` and ``reasoning`` (the streaming
parsers, with ``markers``), ``logprobs``, ``metrics``, ``tokenize`` (/tokenize,
/detokenize), ``render`` (the engine-less render service).
docs/api.md lists every route and field.
"""
