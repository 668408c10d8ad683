"""The pooling head of a decoder (Qwen3, Qwen2, Llama families) served with
``--runner pooling``: what :class:`engine.runtime.engine.ModelEngine` makes of a pooling
request's pooled hidden state (engine/runtime/model_runner.py gathers it).

* embed: the sentence-transformers pipeline of ``spec`` (Dense, Matryoshka, normalize):
  Qwen3-Embedding, gte-Qwen2 (last-token pooling).
* classify / score with a ``*ForSequenceClassification`` checkpoint: its ``score`` weight
  ``[num_labels, hidden]`` on the last token, then the spec's activation.
* classify / score converted from a causal LM (``--convert score``): a yes/no reranker
  (Qwen3-Reranker). Its relevance is ``softmax([logit("no"), logit("yes")])[1]``, which is
  ``sigmoid((lm_head["yes"] - lm_head["no"]) . h)``: one class, as vLLM's converted reranker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from engine import protocol as p
from engine.runtime.loader import ModelLoadError
from engine.runtime.models.decoder import DecoderModel
from engine.runtime.pooling.head import EmbedHead, classify_output, request_error
from engine.runtime.pooling.spec import PoolingSpec, read_pooling_spec

# The tokens whose logits a converted causal LM scores with (Qwen3-Reranker's).
RERANK_TOKENS = ("no", "yes")


def converts_lm(hf_config: dict[str, Any], convert: str) -> bool:
    """True when ``convert`` makes a yes/no reranker of a causal LM checkpoint."""
    archs = [str(a) for a in hf_config.get("architectures") or []]
    classifier = any(a.endswith("ForSequenceClassification") for a in archs)
    return convert in ("classify", "score") and not classifier


class DecoderPooler:
    """Pooled hidden states ``[B, hidden]`` -> each pooling request's answer."""

    def __init__(self, spec: PoolingSpec, embed: EmbedHead | None,
                 classifier: torch.Tensor | None, model_name: str = "") -> None:
        self.spec = spec
        self.embed = embed
        self.classifier = classifier  # [num_labels, hidden] float32, or None
        self.model_name = model_name

    @classmethod
    def build(cls, model: DecoderModel, model_dir: Path, hf_config: dict[str, Any],
              convert: str, model_name: str = "") -> DecoderPooler:
        """The head of ``model`` served as ``convert`` ("auto", "embed", "classify",
        "score"); a ModelLoadError when the checkpoint cannot serve it. A yes/no reranker
        (``converts_lm``) needs the model loaded with ``lm_rows=rerank_token_ids(...)``."""
        config = hf_config
        from_lm = converts_lm(hf_config, convert)
        if from_lm:  # a yes/no reranker: one class, whatever config.json says
            config = {k: v for k, v in hf_config.items() if k not in ("id2label", "label2id")}
            config["num_labels"] = 1
        spec = read_pooling_spec(model_dir, config, convert, "last")
        if spec.method != "last" and spec.tasks != (p.PoolingTask.EMBED.value,):
            raise ModelLoadError(f"a decoder classifier pools its last token, but the "
                                 f"sentence-transformers config asks for {spec.method!r}")
        if p.PoolingTask.EMBED.value in spec.tasks:
            return cls(spec, EmbedHead(spec, model.device), None, model_name)
        if from_lm:
            if model.lm_rows is None:
                raise ModelLoadError("load the model with lm_rows=rerank_token_ids(...)")
            no, yes = model.lm_rows.to(torch.float32)
            weight = (yes - no).unsqueeze(0)
        else:
            if model.score is None:
                raise ModelLoadError("this *ForSequenceClassification checkpoint lacks its "
                                     "classification head ('score.weight')")
            weight = model.score
        if weight.shape[0] != spec.num_labels:
            raise ModelLoadError(f"the classification head has {weight.shape[0]} classes but "
                                 f"config.json names {spec.num_labels}")
        return cls(spec, None, weight.to(torch.float32), model_name)

    def request_error(self, params: p.PoolingParams, num_prompt_tokens: int) -> str | None:
        return request_error(self.spec, params, num_prompt_tokens, self.model_name)

    def __call__(self, pooled: torch.Tensor,
                 params: list[p.PoolingParams]) -> list[list[float]]:
        if self.embed is not None:
            return self.embed(pooled, params)
        assert self.classifier is not None
        logits = pooled.to(torch.float32) @ self.classifier.T
        return classify_output(logits, params, self.spec.score_activation)


def rerank_token_ids(tokenizer_dir: Path) -> list[int]:
    """The vocabulary ids of RERANK_TOKENS ("no", "yes") in ``tokenizer.json``."""
    from tokenizers import Tokenizer

    path = tokenizer_dir / "tokenizer.json"
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelLoadError(f"a yes/no reranker needs the tokenizer {path}: {exc}") from exc
    ids: list[int] = []
    for token in RERANK_TOKENS:
        found = tokenizer.token_to_id(token)
        if found is None:
            raise ModelLoadError(f"a yes/no reranker (--convert score on a causal LM) needs "
                                 f"the token {token!r} in the vocabulary of {path}; it has none")
        ids.append(found)
    return ids
