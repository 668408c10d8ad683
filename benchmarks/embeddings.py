"""Embedding throughput, served end to end, against sentence-transformers' ``encode()`` on
the same model and CPU (issue #36).

Builds a random-weight checkpoint the shape of all-MiniLM-L6-v2 (BERT, 6 layers, hidden
384, mean pooling, Normalize; a 30k-entry WordPiece tokenizer built here, nothing is
downloaded). Then, taking turns for ``--rounds`` rounds: ``SentenceTransformer.encode()``
of 256 texts of 128 tokens (batch size 32, in this process), and the same 256 texts through
``vrs serve`` (``POST /v1/embeddings``, ``--batch`` inputs per request, ``--concurrency``
requests in flight), for each ``--dtype`` given (the server's ``auto`` is bf16 where the
CPU has it natively, else float32). Every served embedding is checked against
sentence-transformers' (cosine). Reports the median texts/s of each and the ratios, as
markdown and JSON in benchmarks/results/.

    python benchmarks/embeddings.py                         # 3 rounds, auto and float32
    python benchmarks/embeddings.py --rounds 5 --dtype auto --frontend python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import string
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_servers import machine  # noqa: E402
from servers import RESULTS, Server  # noqa: E402

NUM_TEXTS, TEXT_TOKENS = 256, 128


def _words(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < count:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))))
    return sorted(words)


def build_minilm(path: Path) -> list[str]:
    """A MiniLM-L6-shaped sentence-transformers model in ``path``; returns its words."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules.normalize import Normalize
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = _words(30_000, 1)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate(specials + words)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    base = path.parent / "minilm-base"
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536,
                        max_position_embeddings=512, type_vocab_size=2, pad_token_id=0)
    BertModel(config).eval().save_pretrained(base)
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"]).save_pretrained(base)
    modules = [Transformer(str(base), max_seq_length=256), Pooling(384, pooling_mode="mean"),
               Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    return words


def make_texts(words: list[str], seed: int) -> list[str]:
    """NUM_TEXTS texts of TEXT_TOKENS tokens with the special tokens (checked by the
    caller's tokenizer)."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(words, k=TEXT_TOKENS - 2)) for _ in range(NUM_TEXTS)]


async def _serve_round(url: str, texts: list[str], batch: int, concurrency: int,
                       ) -> tuple[float, list[list[float]]]:
    limits = httpx.Limits(max_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    out: list[list[float]] = [[] for _ in texts]
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async def one(start: int) -> None:
            async with gate:
                body = {"model": "bench", "input": texts[start:start + batch]}
                response = await client.post(f"{url}/v1/embeddings", json=body)
                response.raise_for_status()
                for item in response.json()["data"]:
                    out[start + item["index"]] = item["embedding"]

        begin = time.perf_counter()
        await asyncio.gather(*(one(s) for s in range(0, len(texts), batch)))
        return time.perf_counter() - begin, out


def _min_cosine(a: Any, b: Any) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.min())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", action="append", choices=("auto", "float32", "bfloat16"))
    parser.add_argument("--frontend", choices=("rust", "python"), default="rust")
    parser.add_argument("--batch", type=int, default=32, help="inputs per request")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    parser.add_argument("--max-num-batched-tokens", type=int, default=8192)
    args = parser.parse_args()
    dtypes = args.dtype or ["auto", "float32"]
    from sentence_transformers import SentenceTransformer

    work = Path(tempfile.mkdtemp(prefix="vrs-embeddings-"))
    model_dir = work / "minilm"
    print(f"building the MiniLM-shaped model in {model_dir} ...", flush=True)
    words = build_minilm(model_dir)
    st = SentenceTransformer(str(model_dir), device="cpu")
    texts = make_texts(words, 3)
    lengths = {len(ids) for ids in st.tokenizer(texts)["input_ids"]}
    assert lengths == {TEXT_TOKENS}, f"texts of {sorted(lengths)} tokens"
    reference = st.encode(texts[:8], batch_size=32)
    servers = {}
    for dtype in dtypes:
        print(f"starting vrs serve --dtype {dtype} ({args.frontend}) ...", flush=True)
        servers[dtype] = Server(
            ["serve", str(model_dir), "--served-model-name", "bench", "--dtype", dtype,
             "--frontend", args.frontend, "--max-num-batched-tokens",
             str(args.max_num_batched_tokens), "--max-num-seqs", "256"],
            work / f"serve-{dtype}.log", f"vrs serve --dtype {dtype}")
    times: dict[str, list[float]] = {"sentence-transformers": []}
    times.update({f"vrs {d}": [] for d in dtypes})
    cosines: dict[str, float] = {}
    try:
        for server in servers.values():  # warm-up: one round each, not counted
            asyncio.run(_serve_round(server.url, texts, args.batch, args.concurrency))
        st.encode(texts, batch_size=32)
        for r in range(args.rounds):
            begin = time.perf_counter()
            st.encode(texts, batch_size=32)
            times["sentence-transformers"].append(time.perf_counter() - begin)
            for dtype, server in servers.items():
                took, vectors = asyncio.run(_serve_round(server.url, texts, args.batch,
                                                         args.concurrency))
                times[f"vrs {dtype}"].append(took)
                cosines[dtype] = min(cosines.get(dtype, 1.0),
                                     _min_cosine(vectors[:8], reference))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                f"{name} {NUM_TEXTS / t[-1]:.0f} texts/s" for name, t in times.items()),
                flush=True)
    finally:
        for server in servers.values():
            server.stop()
    rates = {name: NUM_TEXTS / statistics.median(t) for name, t in times.items()}
    base = rates["sentence-transformers"]
    rows = [f"| {name} | {rate:.1f} | {rate / base:.2f}x |" for name, rate in rates.items()]
    table = "\n".join([f"{NUM_TEXTS} texts of {TEXT_TOKENS} tokens, MiniLM-L6 shape, median of "
                       f"{args.rounds} rounds, taking turns", "",
                       "| | texts/s | vs sentence-transformers |", "|---|---:|---:|", *rows])
    print(table)
    print("min cosine vs sentence-transformers: " + ", ".join(
        f"{d} {c:.6f}" for d, c in cosines.items()))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "embeddings.json"
    out.write_text(json.dumps({"machine": machine(), "args": vars(args), "rates": rates,
                               "seconds": times, "min_cosine": cosines}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
