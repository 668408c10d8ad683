"""Scripted answers for the mock engine.

``engine_config.mock_replies`` is a list of ``{"when": TEXT, "reply": TEXT}``. A request
whose prompt, decoded, contains ``when`` (the first entry that matches wins) is answered
with the tokens of ``reply`` (encoded without special tokens, so markers such as
``<｜tool▁call▁begin｜>`` or ``<think>`` are single added tokens), then EOS. Replies are
encoded, and prompts decoded, with the frontend's tokenizer: ``engine_config.tokenizer``
(what ``--tokenizer`` names), else the model directory's. Everything
else about the request (max_tokens, stop_token_ids, aborts, logprobs) behaves as for
random tokens. An entry's ``cuts`` (character offsets into ``reply``) encode the reply in
separate parts, so the streamed pieces break at those offsets even inside a marker the
tokenizer would keep whole (tests use it to split a marker at every boundary). This is how
end-to-end tests make the mock produce tool calls, reasoning or a given text through
either frontend.
"""

from __future__ import annotations

from pathlib import Path

from engine.config import ConfigError, MockReply


class MockReplies:
    """The scripted replies of one mock engine, encoded once."""

    def __init__(self, model_dir: Path, replies: list[MockReply],
                 tokenizer_dir: Path | None = None) -> None:
        self._replies: list[tuple[str, list[int]]] = []
        self._tokenizer = None
        if not replies:
            return
        import tokenizers

        path = (tokenizer_dir or model_dir) / "tokenizer.json"
        if not path.is_file():
            raise ConfigError(f"mock_replies need {path}")
        self._tokenizer = tokenizers.Tokenizer.from_file(str(path))
        for reply in replies:
            bounds = [0, *reply.cuts, len(reply.reply)]
            ids = [i for start, end in zip(bounds, bounds[1:], strict=False)
                   for i in self._tokenizer.encode(reply.reply[start:end],
                                                   add_special_tokens=False).ids]
            self._replies.append((reply.when, ids))

    def __bool__(self) -> bool:
        return bool(self._replies)

    def script_for(self, prompt_ids: list[int]) -> list[int] | None:
        """The scripted token ids for this prompt, or None (random tokens)."""
        if self._tokenizer is None:
            return None
        text = self._tokenizer.decode(prompt_ids, skip_special_tokens=False)
        for when, ids in self._replies:
            if when in text:
                return list(ids)
        return None
