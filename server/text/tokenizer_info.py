"""What ``GET /tokenizer_info`` answers (``--enable-tokenizer-info-endpoint``, vLLM's
route and flag): the tokenizer's configuration, read from its files once at start-up, so
that both frontends answer the same JSON. Rust:
rust/server/src/text/tokenizer_info.rs. Behaviour: docs/api.md, "/tokenizer_info".

vLLM answers its transformers tokenizer's ``init_kwargs`` (tokenizer_config.json as
loaded) without ``vocab_file`` and ``merges_file``, every added token as its text, its
``tokenizer_class`` set to the Python class's name and its ``chat_template`` to the served
one. From the files:

1. tokenizer_config.json's object (none: ``{}``), without ``vocab_file`` and
   ``merges_file``; any object in it with a string ``content`` (an added token) becomes
   that string;
2. ``added_tokens_decoder``: tokenizer.json's added tokens, ``{"<id>": "<text>"}`` in id
   order (in the config's place, else last);
3. ``tokenizer_class``: the config's (vLLM names its Python class there, e.g.
   ``CachedQwen2TokenizerFast``); ``PreTrainedTokenizerFast`` when the config has none;
4. ``chat_template``: the served template, the file of ``--chat-template``, else the
   directory's chat_template.jinja, else the config's (absent when there is none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEFAULT_CLASS = "PreTrainedTokenizerFast"


class TokenizerInfoError(Exception):
    """A tokenizer file that is not the JSON it should be."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TokenizerInfoError(f"cannot read {path}: {exc}") from None


def _plain(value: Any) -> Any:
    """``value`` with every object that has a string ``content`` (an added token) as it."""
    if isinstance(value, dict):
        if isinstance(value.get("content"), str):
            return value["content"]
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def tokenizer_info(directory: Path, chat_template: Path | None) -> dict[str, Any]:
    """The answer for the tokenizer in ``directory`` served with ``chat_template`` (the
    ``--chat-template`` file, or None)."""
    config = _read_json(directory / "tokenizer_config.json")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise TokenizerInfoError(f"{directory / 'tokenizer_config.json'} is not a JSON object")
    info = {key: _plain(value) for key, value in config.items()
            if key not in ("vocab_file", "merges_file")}
    tokenizer = _read_json(directory / "tokenizer.json")
    added = tokenizer.get("added_tokens") if isinstance(tokenizer, dict) else None
    decoder = {}
    for token in sorted(added if isinstance(added, list) else [],
                        key=lambda t: t.get("id", 0) if isinstance(t, dict) else 0):
        if isinstance(token, dict) and isinstance(token.get("id"), int) \
                and isinstance(token.get("content"), str):
            decoder[str(token["id"])] = token["content"]
    info["added_tokens_decoder"] = decoder
    if not isinstance(info.get("tokenizer_class"), str):
        info["tokenizer_class"] = DEFAULT_CLASS
    source = chat_template if chat_template is not None else directory / "chat_template.jinja"
    try:
        info["chat_template"] = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        if chat_template is not None:
            raise TokenizerInfoError(f"cannot read {chat_template}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenizerInfoError(f"cannot read {source}: {exc}") from None
    return info


def tokenizer_info_body(directory: Path, chat_template: Path | None) -> bytes:
    """:func:`tokenizer_info` as the JSON body (compact, non-ASCII kept, as serde_json)."""
    info = tokenizer_info(directory, chat_template)
    return json.dumps(info, ensure_ascii=False, separators=(",", ":")).encode()
