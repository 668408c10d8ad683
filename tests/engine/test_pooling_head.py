"""engine/runtime/pooling/head.py against sentence-transformers' own modules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from engine import protocol as p
from engine.runtime.loader import ModelLoadError
from engine.runtime.pooling.head import (
    EmbedHead,
    classify_output,
    pool,
    pool_padded,
    request_error,
)
from engine.runtime.pooling.spec import PoolingSpec, read_pooling_spec
from tests.engine.encoder_kit import st_modules

pytestmark = pytest.mark.unit

HIDDEN = 12
EMBED = p.PoolingParams(task="embed")


def spec_of(**fields: object) -> PoolingSpec:
    base: dict[str, object] = dict(
        tasks=("embed",), method="mean", normalize=True, dense=(), matryoshka_dims=None,
        labels=(), score_activation="auto", embedding_size=HIDDEN)
    base.update(fields)
    return PoolingSpec(**base)  # type: ignore[arg-type]


def test_pool_methods() -> None:
    hidden = torch.randn(5, HIDDEN)
    assert torch.equal(pool(hidden, "cls"), hidden[0])
    assert torch.equal(pool(hidden, "last"), hidden[-1])
    torch.testing.assert_close(pool(hidden, "mean"), hidden.mean(dim=0))
    with pytest.raises(ValueError, match="'max'"):
        pool(hidden, "max")


@pytest.mark.parametrize("method", ["cls", "mean", "last"])
def test_pool_padded_matches_pool_per_row(method: str) -> None:
    lengths = torch.tensor([5, 2, 3])
    batch = torch.randn(3, 5, HIDDEN)
    for b, n in enumerate(lengths.tolist()):
        batch[b, n:] = 1e3  # padding must not count
    pooled = pool_padded(batch, lengths, method)
    for b, n in enumerate(lengths.tolist()):
        torch.testing.assert_close(pooled[b], pool(batch[b, :n], method))


@pytest.fixture()
def st_model_dir(tmp_path: Path) -> Path:
    """A sentence-transformers pipeline: mean pooling, two Dense layers (saved by
    sentence-transformers itself), Normalize."""
    Dense = st_modules()[2]
    torch.manual_seed(0)
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))
    layers = [Dense(HIDDEN, 8), Dense(8, 6, bias=False, activation_function=torch.nn.GELU())]
    for idx, layer in enumerate(layers, start=2):
        (tmp_path / f"{idx}_Dense").mkdir()
        layer.save(str(tmp_path / f"{idx}_Dense"))
        modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Dense",
                        "type": "sentence_transformers.models.Dense"})
    modules.append({"idx": 4, "name": "4", "path": "",
                    "type": "sentence_transformers.models.Normalize"})
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    return tmp_path


def reference(model_dir: Path, pooled: torch.Tensor) -> torch.Tensor:
    """sentence-transformers' Dense modules loaded from the directory, run on ``pooled``."""
    Dense = st_modules()[2]
    features = {"sentence_embedding": pooled}
    for idx in (2, 3):
        features = Dense.load(str(model_dir / f"{idx}_Dense"))(features)
    return features["sentence_embedding"]


def test_embed_head_matches_sentence_transformers(st_model_dir: Path) -> None:
    spec = read_pooling_spec(st_model_dir, {"hidden_size": HIDDEN, "is_matryoshka": True},
                             "embed", "cls")
    head = EmbedHead(spec)
    pooled = torch.randn(4, HIDDEN)
    raw = reference(st_model_dir, pooled).detach()
    unit = F.normalize(raw, dim=-1)
    torch.testing.assert_close(torch.tensor(head(pooled, [EMBED] * 4)), unit)
    raw_rows = head(pooled, [p.PoolingParams(task="embed", normalize=False)] * 4)
    torch.testing.assert_close(torch.tensor(raw_rows), raw)
    mixed = head(pooled, [EMBED, p.PoolingParams(task="embed", normalize=False),
                          p.PoolingParams(task="embed", dimensions=3),
                          p.PoolingParams(task="embed", dimensions=4, normalize=False)])
    torch.testing.assert_close(torch.tensor(mixed[0]), unit[0])
    torch.testing.assert_close(torch.tensor(mixed[1]), raw[1])
    # Matryoshka: truncate, then normalize (vLLM; sentence-transformers' encode with
    # truncate_dim and normalize_embeddings).
    torch.testing.assert_close(torch.tensor(mixed[2]), F.normalize(raw[2, :3], dim=-1))
    torch.testing.assert_close(torch.tensor(mixed[3]), raw[3, :4])


def test_embed_head_without_dense_only_normalizes() -> None:
    pooled = torch.randn(2, HIDDEN)
    out = EmbedHead(spec_of(normalize=False))(pooled, [EMBED, EMBED])
    torch.testing.assert_close(torch.tensor(out), pooled)


def test_missing_dense_weights_are_a_load_error(st_model_dir: Path) -> None:
    (st_model_dir / "3_Dense" / "model.safetensors").unlink()
    spec = read_pooling_spec(st_model_dir, {"hidden_size": HIDDEN}, "embed", "cls")
    with pytest.raises(ModelLoadError, match="3_Dense"):
        EmbedHead(spec)


def test_classify_output_activations() -> None:
    logits = torch.randn(3, 4)
    params = [p.PoolingParams(task="classify"),
              p.PoolingParams(task="classify", use_activation=True),
              p.PoolingParams(task="classify", use_activation=False)]
    out = torch.tensor(classify_output(logits, params))
    torch.testing.assert_close(out[:2], torch.softmax(logits[:2], dim=-1))
    torch.testing.assert_close(out[2], logits[2])
    one = torch.randn(2, 1)
    score = [p.PoolingParams(task="score")] * 2
    torch.testing.assert_close(torch.tensor(classify_output(one, score)), torch.sigmoid(one))
    torch.testing.assert_close(torch.tensor(classify_output(one, score, "identity")), one)
    torch.testing.assert_close(torch.tensor(classify_output(logits, params[:1] * 3, "sigmoid")),
                               torch.sigmoid(logits))


def test_request_errors() -> None:
    embed = spec_of()
    assert request_error(embed, EMBED, 3) is None
    assert request_error(embed, p.PoolingParams(task="score"), 3) == (
        "Unsupported task: 'score' Supported tasks: ['embed']")
    assert request_error(embed, EMBED, 0) == "the prompt is empty"
    assert request_error(embed, p.PoolingParams(task="embed", dimensions=4), 3, "m") == (
        "Model 'm' does not support Matryoshka embeddings; dimensions must be unset "
        "(received dimensions=4).")
    assert request_error(embed, p.PoolingParams(task="embed", use_activation=False), 3) == (
        "Task 'embed' only supports ['dimensions', 'normalize'] parameters, does not support "
        "['use_activation'] parameters")
    any_dims = spec_of(matryoshka_dims=())
    assert request_error(any_dims, p.PoolingParams(task="embed", dimensions=HIDDEN), 3) is None
    assert request_error(any_dims, p.PoolingParams(task="embed", dimensions=HIDDEN + 1),
                         3, "m") == (
        f"Model 'm' only supports dimensions in range [1, {HIDDEN}], got {HIDDEN + 1}.")
    listed = spec_of(matryoshka_dims=(4, 8))
    assert request_error(listed, p.PoolingParams(task="embed", dimensions=8), 3) is None
    assert request_error(listed, p.PoolingParams(task="embed", dimensions=5), 3, "m") == (
        "Model 'm' only supports Matryoshka dimensions [4, 8], got 5.")
    scorer = spec_of(tasks=("classify", "score"), labels=("LABEL_0",))
    pair = p.PoolingParams(task="score", token_type_start=2)
    assert request_error(scorer, pair, 5) is None
    assert request_error(scorer, p.PoolingParams(task="score", token_type_start=6), 5) == (
        "token_type_start=6 is out of range; allowed: 0..5 (the prompt's length)")
    assert request_error(scorer, p.PoolingParams(task="classify", normalize=True), 5) == (
        "Task 'classify' only supports ['use_activation', 'token_type_start'] parameters, "
        "does not support ['normalize'] parameters")
