"""engine/runtime/pooling/spec.py: the pooling spec read from model directories."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.runtime.loader import ModelLoadError
from engine.runtime.pooling.spec import read_pooling_spec

pytestmark = pytest.mark.unit

BERT = {"architectures": ["BertModel"], "hidden_size": 32}
ST_PREFIX = "sentence_transformers.models."


def write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def st_dir(root: Path, pooling: dict[str, Any], *, dense: Sequence[dict[str, Any]] = (),
           normalize: bool = True, extra: Sequence[str] = ()) -> Path:
    modules = [{"idx": 0, "name": "0", "path": "", "type": ST_PREFIX + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST_PREFIX + "Pooling"}]
    write(root / "1_Pooling" / "config.json", pooling)
    for config in dense:
        idx = len(modules)
        modules.append({"idx": idx, "name": str(idx), "path": f"{idx}_Dense",
                        "type": ST_PREFIX + "Dense"})
        write(root / f"{idx}_Dense" / "config.json", config)
    for kind in extra:
        modules.append({"idx": len(modules), "name": kind, "path": "", "type": ST_PREFIX + kind})
    if normalize:
        modules.append({"idx": len(modules), "name": "n", "path": "",
                        "type": "sentence_transformers.base.modules.normalize.Normalize"})
    write(root / "modules.json", modules)
    return root


def test_no_sentence_transformers_files_take_the_defaults(tmp_path: Path) -> None:
    spec = read_pooling_spec(tmp_path, BERT, "auto", "cls")
    assert spec.tasks == ("embed",)
    assert (spec.method, spec.normalize, spec.dense) == ("cls", True, ())
    assert spec.matryoshka_dims is None and spec.labels == ()
    assert spec.embedding_size == 32 and spec.max_seq_length is None


@pytest.mark.parametrize(("pooling", "method"), [
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}, "cls"),
    ({"pooling_mode_mean_tokens": True}, "mean"),
    ({"pooling_mode_lasttoken": True}, "last"),
    ({"pooling_mode": "mean"}, "mean"),
    ({"pooling_mode": ["cls"]}, "cls"),
    ({"word_embedding_dimension": 32}, "mean"),  # sentence-transformers' default
])
def test_pooling_modes(tmp_path: Path, pooling: dict[str, Any], method: str) -> None:
    spec = read_pooling_spec(st_dir(tmp_path, pooling), BERT, "embed", "cls")
    assert spec.method == method and spec.normalize


def test_without_a_normalize_module_embeddings_are_not_normalized(tmp_path: Path) -> None:
    spec = read_pooling_spec(st_dir(tmp_path, {"pooling_mode": "cls"}, normalize=False),
                             BERT, "embed", "mean")
    assert not spec.normalize


@pytest.mark.parametrize(("pooling", "named"), [
    ({"pooling_mode_max_tokens": True}, "'max'"),
    ({"pooling_mode": "weightedmean"}, "'weightedmean'"),
    ({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}, "cls, mean"),
    ({"pooling_mode": "mean", "include_prompt": False}, "include_prompt"),
])
def test_unsupported_pooling_is_refused(tmp_path: Path, pooling: dict[str, Any],
                                        named: str) -> None:
    with pytest.raises(ModelLoadError, match=named):
        read_pooling_spec(st_dir(tmp_path, pooling), BERT, "embed", "cls")


def test_unknown_modules_are_refused(tmp_path: Path) -> None:
    root = st_dir(tmp_path, {"pooling_mode": "mean"}, extra=["LayerNorm"])
    with pytest.raises(ModelLoadError, match="LayerNorm"):
        read_pooling_spec(root, BERT, "embed", "cls")


def test_dense_modules(tmp_path: Path) -> None:
    dense = [{"in_features": 32, "out_features": 16, "bias": True,
              "activation_function": "torch.nn.modules.activation.Tanh"},
             {"in_features": 16, "out_features": 8, "bias": False,
              "activation_function": "torch.nn.modules.linear.Identity"}]
    spec = read_pooling_spec(st_dir(tmp_path, {"pooling_mode": "mean"}, dense=dense),
                             BERT, "embed", "cls")
    assert [(d.dir.name, d.in_features, d.out_features, d.bias, d.activation)
            for d in spec.dense] == [("2_Dense", 32, 16, True, "tanh"),
                                     ("3_Dense", 16, 8, False, "identity")]
    assert spec.embedding_size == 8


def test_dense_shapes_must_chain(tmp_path: Path) -> None:
    dense = [{"in_features": 32, "out_features": 16}, {"in_features": 15, "out_features": 8}]
    with pytest.raises(ModelLoadError, match="3_Dense: in_features 15"):
        read_pooling_spec(st_dir(tmp_path, {"pooling_mode": "mean"}, dense=dense),
                          BERT, "embed", "cls")


def test_dense_activation_outside_torch_is_refused(tmp_path: Path) -> None:
    dense = [{"in_features": 32, "out_features": 16, "activation_function": "my.Activation"}]
    with pytest.raises(ModelLoadError, match="my.Activation"):
        read_pooling_spec(st_dir(tmp_path, {"pooling_mode": "mean"}, dense=dense),
                          BERT, "embed", "cls")


def test_matryoshka_and_max_seq_length(tmp_path: Path) -> None:
    write(tmp_path / "sentence_bert_config.json", {"max_seq_length": 128})
    spec = read_pooling_spec(tmp_path, {**BERT, "matryoshka_dimensions": [8, 16, 32]},
                             "embed", "cls")
    assert spec.matryoshka_dims == (8, 16, 32) and spec.max_seq_length == 128
    assert read_pooling_spec(tmp_path, {**BERT, "is_matryoshka": True},
                             "embed", "cls").matryoshka_dims == ()


def test_sequence_classification_classifies(tmp_path: Path) -> None:
    config = {"architectures": ["BertForSequenceClassification"], "hidden_size": 32,
              "id2label": {"0": "neg", "1": "neu", "2": "pos"}}
    spec = read_pooling_spec(tmp_path, config, "auto", "cls")
    assert spec.tasks == ("classify",) and spec.labels == ("neg", "neu", "pos")
    assert spec.score_activation == "auto"
    with pytest.raises(ModelLoadError, match="num_labels 1"):
        read_pooling_spec(tmp_path, config, "score", "cls")
    assert read_pooling_spec(tmp_path, config, "embed", "cls").tasks == ("embed",)


def test_one_label_classifier_also_scores(tmp_path: Path) -> None:
    config = {"architectures": ["XLMRobertaForSequenceClassification"], "hidden_size": 32,
              "id2label": {"0": "LABEL_0"},
              "sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Sigmoid"}}
    spec = read_pooling_spec(tmp_path, config, "auto", "cls")
    assert spec.tasks == ("classify", "score") and spec.labels == ("LABEL_0",)
    assert spec.score_activation == "auto"
    assert read_pooling_spec(tmp_path, config, "score", "cls").tasks == ("classify", "score")


@pytest.mark.parametrize(("extra", "activation"), [
    ({"problem_type": "regression"}, "identity"),
    ({"problem_type": "multi_label_classification"}, "sigmoid"),
    ({"sbert_ce_default_activation_function": "torch.nn.modules.linear.Identity"}, "identity"),
    ({"sentence_transformers": {"activation_fn": "torch.nn.modules.activation.Tanh"}}, "tanh"),
])
def test_score_activation(tmp_path: Path, extra: dict[str, Any], activation: str) -> None:
    config = {"architectures": ["BertForSequenceClassification"], "hidden_size": 32,
              "num_labels": 1, **extra}
    spec = read_pooling_spec(tmp_path, config, "auto", "cls")
    assert spec.score_activation == activation and spec.labels == ("LABEL_0",)


def test_bad_convert_and_method(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="convert 'none'"):
        read_pooling_spec(tmp_path, BERT, "none", "cls")
    with pytest.raises(ModelLoadError, match="'max'"):
        read_pooling_spec(tmp_path, BERT, "embed", "max")


def test_a_cross_encoder_saved_by_sentence_transformers(tmp_path: Path) -> None:
    """sentence-transformers >= 5: modules.json with only a Transformer module (not read
    for classify), the activation in config_sentence_transformers.json."""
    write(tmp_path / "modules.json", [{"idx": 0, "name": "0", "path": "", "type":
                                       "sentence_transformers.base.modules.transformer.X"}])
    write(tmp_path / "config_sentence_transformers.json", {
        "model_type": "CrossEncoder",
        "activation_fn": "torch.nn.modules.linear.Identity"})
    config = {"architectures": ["BertForSequenceClassification"], "hidden_size": 32,
              "id2label": {"0": "LABEL_0"}}
    spec = read_pooling_spec(tmp_path, config, "auto", "cls")
    assert spec.tasks == ("classify", "score") and spec.score_activation == "identity"
    with pytest.raises(ModelLoadError, match="transformer.X"):
        read_pooling_spec(tmp_path, config, "embed", "cls")
