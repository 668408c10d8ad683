"""What a model directory says about pooling, read as vLLM reads it.

Sources, in vLLM's order (vllm/transformers_utils/config.py ``get_pooling_config``,
vllm/model_executor/layers/pooler/activations.py ``get_act_fn``, ``ModelConfig``):

* sentence-transformers files: ``modules.json`` names the modules. Its Pooling module's
  ``config.json`` gives the pooling method (``pooling_mode``, or the older
  ``pooling_mode_cls_token`` / ``pooling_mode_mean_tokens`` / ``pooling_mode_lasttoken``
  booleans); each Dense module's ``config.json`` and weights a projection; a Normalize
  module makes embeddings normalized by default. With ``modules.json`` but no Normalize
  module, embeddings are not normalized by default (vLLM's rule). ``sentence_bert_config.json``
  gives ``max_seq_length``, where sentence-transformers truncates.
* without them: the architecture's default method, normalized (vLLM's defaults).
* config.json: ``matryoshka_dimensions`` / ``is_matryoshka`` (which ``dimensions`` a request
  may ask for), ``id2label`` / ``num_labels`` (the classes), ``problem_type`` and a
  cross-encoder's ``sentence_transformers.activation_fn`` (or the older
  ``sbert_ce_default_activation_function``, or sentence-transformers >= 5's
  ``config_sentence_transformers.json`` ``activation_fn``): the class scores' activation.
  Only embeddings read ``modules.json``: a cross-encoder's says nothing about its head.

Anything this cannot reproduce exactly (another pooling mode, an unknown module or
activation) is a ModelLoadError that names it: never a silently different answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.protocol import PoolingTask
from engine.runtime.loader import ModelLoadError, read_json

METHODS = ("cls", "mean", "last")
CONVERTS = ("auto", "embed", "classify", "score")
# Activations, by torch.nn class name (sentence-transformers saves the class's dotted path).
ACTIVATION_NAMES = {
    "Identity": "identity",
    "Tanh": "tanh",
    "Sigmoid": "sigmoid",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
}
# Class-score activations (``PoolingSpec.score_activation``): "auto" is softmax over the
# classes, sigmoid for one class (vLLM's PoolerClassify); "sigmoid" per class
# (multi-label); "identity" the raw logits (regression); "tanh" as named.
SCORE_ACTIVATIONS = ("auto", "sigmoid", "identity", "tanh")
# sentence-transformers' pooling modes, by their config names, and ours.
_ST_MODES = {"cls": "cls", "mean": "mean", "lasttoken": "last"}
_ST_LEGACY_MODES = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ST_MODULES = ("Transformer", "Pooling", "Dense", "Normalize")


@dataclass(frozen=True)
class DenseSpec:
    """A sentence-transformers Dense module: ``activation(linear(x))`` (+ ``x`` or its
    projection with ``residual``)."""

    dir: Path
    in_features: int
    out_features: int
    bias: bool
    activation: str  # a value of ACTIVATION_NAMES
    residual: bool = False


@dataclass(frozen=True)
class PoolingSpec:
    tasks: tuple[str, ...]  # PoolingTask values this model serves
    method: str  # "cls" | "mean" | "last": which hidden states make the embedding
    normalize: bool  # embed: L2-normalize unless the request says otherwise
    dense: tuple[DenseSpec, ...]  # the projections after pooling, in order
    # None: the model has no Matryoshka support (``dimensions`` refused); (): any
    # dimensions in [1, embedding_size]; else only these.
    matryoshka_dims: tuple[int, ...] | None
    labels: tuple[str, ...]  # classify / score: the label of each class, by index
    score_activation: str  # a SCORE_ACTIVATIONS value (classify and score)
    embedding_size: int  # the embedding's length (the last Dense's out_features, or hidden)
    max_seq_length: int | None = None  # sentence-transformers' truncation length

    @property
    def num_labels(self) -> int:
        return len(self.labels)


def read_pooling_spec(model_dir: Path, hf_config: dict[str, Any], convert: str,
                      default_method: str) -> PoolingSpec:
    """The pooling spec of ``model_dir`` served as ``convert`` ("auto": from the
    architecture: ``*ForSequenceClassification`` classifies, anything else embeds).
    ``default_method``: the architecture's pooling method where no sentence-transformers
    Pooling module says otherwise."""
    if convert not in CONVERTS:
        raise ModelLoadError(f"convert {convert!r} is not a pooling conversion; "
                             f"allowed: {', '.join(CONVERTS)}")
    if default_method not in METHODS:
        raise ModelLoadError(f"pooling method {default_method!r}: allowed {', '.join(METHODS)}")
    if convert == "auto":
        architectures = hf_config.get("architectures") or []
        classifier = any(str(a).endswith("ForSequenceClassification") for a in architectures)
        convert = "classify" if classifier else "embed"
    hidden = hf_config.get("hidden_size")
    # sentence-transformers' modules shape embeddings; a cross-encoder's modules.json
    # (one Transformer module) says nothing about the classification head.
    modules = _read_modules(model_dir) if convert == "embed" else None
    method, normalize = default_method, True
    dense: tuple[DenseSpec, ...] = ()
    if modules is not None:
        method, normalize, dense = _read_st_pipeline(model_dir, modules, default_method)
    if dense and isinstance(hidden, int) and dense[0].in_features != hidden:
        raise ModelLoadError(f"{dense[0].dir.name}: in_features {dense[0].in_features} does not "
                             f"match the model's hidden_size {hidden}")
    if dense:
        embedding_size = dense[-1].out_features
    elif isinstance(hidden, int):
        embedding_size = hidden
    else:
        raise ModelLoadError("config.json has no hidden_size: the embedding size is unknown")
    labels = _read_labels(hf_config, convert)
    if convert == "embed":
        tasks: tuple[str, ...] = (PoolingTask.EMBED.value,)
    elif convert == "classify":
        tasks = (PoolingTask.CLASSIFY.value,)
        if len(labels) == 1:
            tasks += (PoolingTask.SCORE.value,)
    else:
        if len(labels) != 1:
            raise ModelLoadError(f"convert 'score' needs a model with one class (num_labels 1); "
                                 f"this one has {len(labels)}: {', '.join(labels)}")
        tasks = (PoolingTask.CLASSIFY.value, PoolingTask.SCORE.value)
    return PoolingSpec(
        tasks=tasks,
        method=method,
        normalize=normalize,
        dense=dense,
        matryoshka_dims=_read_matryoshka(hf_config),
        labels=labels,
        score_activation=_read_score_activation(hf_config, model_dir),
        embedding_size=embedding_size,
        max_seq_length=_read_max_seq_length(model_dir),
    )


def _read_modules(model_dir: Path) -> list[dict[str, Any]] | None:
    path = model_dir / "modules.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("type"), str)
                                             for m in data):
        raise ModelLoadError(f"{path} must be a list of modules, each with a type")
    return sorted(data, key=lambda m: int(m.get("idx", 0)))


def _module_kind(module: dict[str, Any]) -> str:
    return str(module["type"]).rsplit(".", 1)[-1]


def _read_st_pipeline(model_dir: Path, modules: list[dict[str, Any]],
                      default_method: str) -> tuple[str, bool, tuple[DenseSpec, ...]]:
    """(method, normalize, dense) from sentence-transformers' modules, checked to be a
    pipeline this engine runs exactly: Transformer, Pooling, Dense..., Normalize."""
    kinds = [_module_kind(m) for m in modules]
    unknown = sorted({str(m["type"]) for m, k in zip(modules, kinds, strict=True)
                      if k not in _ST_MODULES})
    if unknown:
        raise ModelLoadError(f"modules.json: unsupported sentence-transformers modules "
                             f"{', '.join(unknown)} (supported: {', '.join(_ST_MODULES)})")
    if kinds.count("Pooling") > 1 or kinds.count("Transformer") > 1:
        raise ModelLoadError("modules.json: more than one Transformer or Pooling module")
    if kinds and kinds[0] != "Transformer" and "Transformer" in kinds:
        raise ModelLoadError("modules.json: the Transformer module must come first")
    method = default_method
    if "Pooling" in kinds:
        at = kinds.index("Pooling")
        if any(k in ("Dense", "Normalize") for k in kinds[:at]):
            raise ModelLoadError("modules.json: a Dense or Normalize module before Pooling "
                                 "(on token embeddings) is not supported")
        method = _read_pooling_method(model_dir / str(modules[at].get("path", "")))
    normalize = "Normalize" in kinds
    if normalize and kinds.index("Normalize") != len(kinds) - 1:
        raise ModelLoadError("modules.json: modules after Normalize are not supported")
    dense = tuple(_read_dense(model_dir / str(m.get("path", "")))
                  for m, k in zip(modules, kinds, strict=True) if k == "Dense")
    for before, after in zip(dense, dense[1:], strict=False):
        if before.out_features != after.in_features:
            raise ModelLoadError(f"{after.dir.name}: in_features {after.in_features} does not "
                                 f"match {before.dir.name}'s out_features {before.out_features}")
    return method, normalize, dense


def _read_pooling_method(pooling_dir: Path) -> str:
    config = read_json(pooling_dir / "config.json")
    mode = config.get("pooling_mode")
    if mode is None:
        active = [name for key, name in _ST_LEGACY_MODES.items() if config.get(key) is True]
        mode = active or ["mean"]  # sentence-transformers' default
    modes = [mode] if isinstance(mode, str) else list(mode)
    if len(modes) != 1:
        raise ModelLoadError(f"{pooling_dir.name}/config.json: pooling modes "
                             f"{', '.join(map(str, modes))} combined are not supported "
                             f"(one of {', '.join(_ST_MODES)})")
    if modes[0] not in _ST_MODES:
        raise ModelLoadError(f"{pooling_dir.name}/config.json: pooling mode {modes[0]!r} is not "
                             f"supported (supported: {', '.join(_ST_MODES)})")
    if config.get("include_prompt") is False:
        raise ModelLoadError(f"{pooling_dir.name}/config.json: include_prompt false (pooling "
                             "that leaves out an instruction prompt) is not supported")
    return _ST_MODES[modes[0]]


def _activation_name(path: Any, where: str) -> str:
    name = str(path).rsplit(".", 1)[-1]
    if not str(path).startswith("torch.") or name not in ACTIVATION_NAMES:
        raise ModelLoadError(f"{where}: activation function {path!r} is not supported "
                             f"(supported: torch.nn {', '.join(ACTIVATION_NAMES)})")
    return ACTIVATION_NAMES[name]


def _read_dense(dense_dir: Path) -> DenseSpec:
    config = read_json(dense_dir / "config.json")
    where = f"{dense_dir.name}/config.json"
    for key in ("module_input_name", "module_output_name"):
        if config.get(key) not in (None, "sentence_embedding"):
            raise ModelLoadError(f"{where}: {key} {config[key]!r} is not supported")
    try:
        in_features, out_features = int(config["in_features"]), int(config["out_features"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelLoadError(f"{where}: in_features and out_features must be integers") from exc
    activation = "tanh"  # sentence-transformers' default
    if "activation_function" in config:
        activation = _activation_name(config["activation_function"], where)
    return DenseSpec(dir=dense_dir, in_features=in_features, out_features=out_features,
                     bias=bool(config.get("bias", True)), activation=activation,
                     residual=bool(config.get("use_residual", False)))


def _read_labels(hf_config: dict[str, Any], convert: str) -> tuple[str, ...]:
    if convert == "embed":
        return ()
    id2label = hf_config.get("id2label")
    num_labels = hf_config.get("num_labels")
    if isinstance(id2label, dict) and id2label:
        try:
            by_index = {int(k): str(v) for k, v in id2label.items()}
        except ValueError as exc:
            raise ModelLoadError(f"config.json id2label keys must be integers: {exc}") from exc
        if sorted(by_index) != list(range(len(by_index))):
            raise ModelLoadError("config.json id2label must number the classes 0..n-1")
        return tuple(by_index[i] for i in range(len(by_index)))
    if not isinstance(num_labels, int):
        num_labels = 1 if convert == "score" else 2  # transformers' default: 2
    if num_labels < 1:
        raise ModelLoadError(f"config.json num_labels {num_labels}: a classifier needs >= 1")
    return tuple(f"LABEL_{i}" for i in range(num_labels))


def _read_score_activation(hf_config: dict[str, Any], model_dir: Path) -> str:
    problem_type = hf_config.get("problem_type")
    if problem_type == "regression":
        return "identity"
    if problem_type == "multi_label_classification":
        return "sigmoid"
    if problem_type == "single_label_classification":
        return "auto"
    st = hf_config.get("sentence_transformers")
    path = st.get("activation_fn") if isinstance(st, dict) else None
    if path is None:
        path = hf_config.get("sbert_ce_default_activation_function")
    if path is None:  # sentence-transformers >= 5 saves a CrossEncoder's here
        st_path = model_dir / "config_sentence_transformers.json"
        st_config = read_json(st_path) if st_path.is_file() else {}
        if st_config.get("model_type") == "CrossEncoder":
            path = st_config.get("activation_fn")
    if path is None or str(path) == "torch.nn.modules.activation.Softmax":
        return "auto"
    name = _activation_name(path, "config.json cross-encoder activation")
    if name == "sigmoid":  # vLLM: Sigmoid and Softmax both mean its classify activation
        return "auto"
    if name not in SCORE_ACTIVATIONS:
        raise ModelLoadError(f"config.json cross-encoder activation {path!r} is not supported "
                             "(supported: Sigmoid, Softmax, Identity, Tanh)")
    return name


def _read_matryoshka(hf_config: dict[str, Any]) -> tuple[int, ...] | None:
    dims = hf_config.get("matryoshka_dimensions")
    if dims:
        if not isinstance(dims, list) or not all(isinstance(d, int) and d >= 1 for d in dims):
            raise ModelLoadError("config.json matryoshka_dimensions must be positive integers")
        return tuple(dims)
    return () if hf_config.get("is_matryoshka") is True else None


def _read_max_seq_length(model_dir: Path) -> int | None:
    path = model_dir / "sentence_bert_config.json"
    if not path.is_file():
        return None
    value = read_json(path).get("max_seq_length")
    return value if isinstance(value, int) and value > 0 else None
