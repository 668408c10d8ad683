"""The one gate a request body passes: field rules (``params``, ``sampling``,
``structured``), then the prompt (``prompt``: model, messages or prompt, tools, template
and tokenization, context length). Rust: rust/server/src/validate.rs."""
