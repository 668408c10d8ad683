"""The parity checks of benchmarks/llamacpp.py: that llama-server tokenizes as the model's
Hugging Face tokenizer does (so the GGUF's tokenizer metadata, pre-tokenizer included,
is right and both servers get prompts of the same length), and that greedy decoding
gives vrs and llama-server the same tokens from the same prompt ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

# Varied texts for the tokenizer check: plain prose, case, contractions, digits and
# number runs, whitespace runs, tabs and newlines, punctuation, code, URLs, non-Latin
# scripts, emoji (joiners included), and the converter's own awkward cases.
TEXTS: tuple[str, ...] = (
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing spaces   ",
    "tabs\tbetween\t\twords",
    "line one\nline two\n\n\nline five",
    "\r\nwindows line end\r\n",
    "I'm sure you'll see they've done it, we'd said; it's Bob's.",
    "SHOUTING IN CAPITALS and MiXeD cAsE",
    "3 33 333 3333 33333 333333 3333333",
    "pi is 3.14159, e is 2.71828 and 1,000,000 is a million",
    "phone: +1 (555) 010-9999, date 2026-12-07T20:48:00Z",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }",
    "<div class=\"main\"><p>Hi &amp; bye</p></div>",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "https://example.com/path?query=1&other=two#frag",
    "SELECT name, COUNT(*) FROM users WHERE age > 21 GROUP BY name;",
    "Ünïcödé çharacters: naïve café, résumé, Ångström",
    "Привет, как дела? Всё хорошо.",
    "中文分词测试：我想在apple工作1314151天～",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장도 토큰화합니다.",
    "مرحبا بالعالم",
    "emoji 🚀🦙 and joined 👩‍👩‍👧 ✅",
    "math: ∑ x² ≤ ∞, α β γ → λ",
    "------======= ......!!!!!!?????? '''''' ```````",
    "a\u00a0non-breaking\u2003em space",
    "CamelCaseIdentifier snake_case_identifier kebab-case-id",
    "    indented code block\n        deeper\n",
    "email@example.org, @handle, #hashtag, $100, 50%",
    "Mixed1234numbers5678in9words",
    "x" * 40,
    "The end.\n",
    "",
)

# The greedy-parity prompts (tokenized by the HF tokenizer; both servers get the ids).
PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "1, 2, 3, 4, 5,",
    "Привет! Как",
    "The quick brown fox",
    "import numpy as np\nx = np.",
    "我想在apple工作",
)


def hf_tokenizer(model_dir: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(model_dir / "tokenizer.json"))


def tokenizer_parity(url: str, model_dir: Path) -> dict[str, Any]:
    """Each text tokenized by llama-server (`POST /tokenize`, no special tokens) and by
    the HF tokenizer (no special tokens): how many agree, and each disagreement."""
    tokenizer = hf_tokenizer(model_dir)
    mismatches = []
    for text in TEXTS:
        ours = tokenizer.encode(text, add_special_tokens=False).ids
        reply = httpx.post(f"{url}/tokenize", json={"content": text, "add_special": False},
                           timeout=30)
        reply.raise_for_status()
        theirs = reply.json()["tokens"]
        if ours != theirs:
            mismatches.append({"text": text, "hf": ours, "llama_server": theirs})
    return {"equal": len(TEXTS) - len(mismatches), "total": len(TEXTS),
            "mismatches": mismatches}


def served_model(url: str) -> str:
    reply = httpx.get(f"{url}/v1/models", timeout=30)
    reply.raise_for_status()
    return str(reply.json()["data"][0]["id"])


def vrs_greedy(url: str, ids: list[int], tokens: int) -> tuple[list[int], int]:
    """vrs's greedy continuation of ``ids`` (`return_token_ids`) and the prompt tokens
    it counted."""
    body = {"model": served_model(url), "prompt": ids, "max_tokens": tokens,
            "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    reply = httpx.post(f"{url}/v1/completions", json=body, timeout=120)
    reply.raise_for_status()
    data = reply.json()
    return list(data["choices"][0]["token_ids"]), int(data["usage"]["prompt_tokens"])


def llama_greedy(url: str, ids: list[int], tokens: int) -> tuple[list[int], int]:
    """llama-server's greedy continuation of ``ids`` (`POST /completion` with
    `return_tokens`) and the prompt tokens it evaluated."""
    body = {"prompt": ids, "n_predict": tokens, "temperature": 0, "ignore_eos": True,
            "return_tokens": True, "cache_prompt": False}
    reply = httpx.post(f"{url}/completion", json=body, timeout=120)
    reply.raise_for_status()
    data = reply.json()
    return list(data["tokens"]), int(data["timings"]["prompt_n"])


def leading_equal(a: list[int], b: list[int]) -> int:
    """How many tokens two continuations share before they first differ."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def greedy_parity(vrs_url: str, llama_url: str, model_dir: Path,
                  tokens: int = 32) -> dict[str, Any]:
    """Each prompt's ids sent to both servers, greedy, ``tokens`` out with EOS ignored:
    how many continuations are identical, how many tokens agree before the first
    difference, and each prompt's ids from both."""
    tokenizer = hf_tokenizer(model_dir)
    cases = []
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt, add_special_tokens=False).ids
        ours, ours_prompt = vrs_greedy(vrs_url, ids, tokens)
        theirs, theirs_prompt = llama_greedy(llama_url, ids, tokens)
        agree = leading_equal(ours, theirs)
        cases.append({"prompt": prompt, "prompt_ids": ids, "vrs": ours,
                      "llama_server": theirs, "prompt_tokens": [ours_prompt, theirs_prompt],
                      "leading_equal": agree})
    return {"equal": sum(c["vrs"] == c["llama_server"] for c in cases), "total": len(cases),
            "tokens_equal": sum(c["leading_equal"] for c in cases),
            "tokens_total": tokens * len(cases), "cases": cases}
