"""The Python OpenAI-compatible server (``vrs serve --frontend python``), the baseline.

Same routes, fields, shapes, status codes and text algorithms as the Rust server
(``rust/server``, ``rust/text``); a module here does the job of the Rust module of the
same name, in the same folder and the same layers (docs/internals.md has the map; the
import-linter contract in pyproject.toml keeps the order): ``lifecycle`` and ``args`` (the
process and its settings) -> ``routes`` (the route tables, one module per endpoint) ->
``dispatch`` (a generation request: admission, prompts, engine, response) -> ``state``
(what handlers share) -> ``output`` (engine outputs to chunks and bodies) -> ``validate``
(request bodies to checked prompts and settings) -> ``text`` (tokenizer, chat template,
detokenizer, stop strings) -> ``parsers`` (tool calls, reasoning) -> ``openai`` (the bodies)
-> ``logprobs`` -> ``engine_client`` (the ZMQ engine client; Rust's engine-client crate)
-> ``edge`` (errors, auth, admission, body limits, metrics, traces, the listener, CORS,
request ids) and ``args_json`` (the args-json keys, declared once) -> ``http_args`` (the
args-json ``http`` object).
docs/api.md lists every route and field.
"""
