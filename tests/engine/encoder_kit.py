"""Tiny random encoder checkpoints for the pooling tests, written to a temp dir with
save_pretrained and tokenizers built here with the ``tokenizers`` library (nothing is
downloaded): a BERT sentence-transformers model (saved by sentence-transformers itself:
mean pooling, a Dense layer, Normalize), an XLM-RoBERTa one (its files written by hand in
the older layout: CLS pooling, Normalize), a ModernBERT one (mean pooling), and BERT and
XLM-RoBERTa sequence classifiers with 1 and 3 labels.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch

from engine.config import EngineConfig
from engine.runtime.pooling.encoder_engine import EncoderEngine

torch.set_num_threads(min(2, torch.get_num_threads()))

WORDS = ("the cat dog sat on a mat red blue green fast slow bird fish tree house car road "
         "river sky sun moon star rain snow wind fire stone apple bread milk tea cup book "
         "pen paper door window chair table light dark old new big small").split()
HIDDEN = 64


def texts(count: int, seed: int = 0, low: int = 3, high: int = 40) -> list[str]:
    """Random sentences of the tokenizers' words, of varied lengths."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))
            for _ in range(count)]


def st_modules() -> Any:
    """sentence-transformers' (Transformer, Pooling, Dense, Normalize) classes, from where
    version 6 keeps them, else from version 5's ``sentence_transformers.models``."""
    try:
        from sentence_transformers.base.modules.dense import Dense
        from sentence_transformers.base.modules.normalize import Normalize
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Dense, Normalize, Pooling, Transformer
    return Transformer, Pooling, Dense, Normalize


def _bert_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = {token: i for i, token in enumerate(specials + sorted(set(WORDS)))}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]", mask_token="[MASK]", model_input_names=[
            "input_ids", "token_type_ids", "attention_mask"])


def _xlmr_tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    pieces = [(s, 0.0) for s in specials] + [(f"▁{w}", -1.0) for w in sorted(set(WORDS))]
    pieces += [(c, -5.0) for c in sorted(set("".join(WORDS)))]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        pad_token="<pad>", cls_token="<s>", sep_token="</s>", mask_token="<mask>",
        model_input_names=["input_ids", "attention_mask"])


def _spread(model: Any) -> Any:
    """Wider weights than HF's 0.02 init, so that a missing layer or norm shows."""
    torch.manual_seed(1234)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() > 1:
                param.normal_(0.0, 0.08)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.05)
    return model.eval()


def _config(kind: str, **extra: Any) -> Any:
    from transformers import BertConfig, XLMRobertaConfig

    shape = dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=128, **extra)
    if kind == "bert":
        return BertConfig(vocab_size=len(WORDS) + 5, max_position_embeddings=128,
                          type_vocab_size=2, pad_token_id=0, **shape)
    return XLMRobertaConfig(vocab_size=5 + len(set(WORDS)) + len(set("".join(WORDS))),
                            max_position_embeddings=130, type_vocab_size=1, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2, **shape)


def build_bert_st(root: Path) -> Path:
    """A BERT sentence-transformers model saved by sentence-transformers: mean pooling,
    Dense 64 -> 32 (tanh), Normalize."""
    from sentence_transformers import SentenceTransformer
    from transformers import BertModel

    Transformer, Pooling, Dense, Normalize = st_modules()

    base = root / "bert-base"
    _spread(BertModel(_config("bert"))).save_pretrained(base)
    _bert_tokenizer().save_pretrained(base)
    torch.manual_seed(7)
    transformer = Transformer(str(base), max_seq_length=128)
    modules = [transformer, Pooling(HIDDEN, pooling_mode="mean"), Dense(HIDDEN, 32),
               Normalize()]
    path = root / "bert-st"
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    return path


def build_xlmr_st(root: Path, *, matryoshka: list[int] | None = None) -> Path:
    """An XLM-RoBERTa sentence-transformers model in the older hand-written layout: CLS
    pooling (``pooling_mode_cls_token``), Normalize."""
    from transformers import XLMRobertaModel

    path = root / "xlmr-st"
    extra = {"matryoshka_dimensions": matryoshka} if matryoshka else {}
    _spread(XLMRobertaModel(_config("xlmr", **extra))).save_pretrained(path)
    _xlmr_tokenizer().save_pretrained(path)
    prefix = "sentence_transformers.models."
    modules = [{"idx": 0, "name": "0", "path": "", "type": prefix + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": prefix + "Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": prefix + "Normalize"}]
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": HIDDEN, "pooling_mode_cls_token": True,
        "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": False}))
    (path / "2_Normalize").mkdir()
    (path / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": 128, "do_lower_case": False}))
    return path


def build_modernbert_st(root: Path) -> Path:
    """A ModernBERT sentence-transformers model (the BERT tokenizer; local attention windows
    shorter than the texts): mean pooling, no Normalize module (so: not normalized)."""
    from sentence_transformers import SentenceTransformer
    from transformers import ModernBertConfig, ModernBertModel

    Transformer, Pooling, _, _ = st_modules()

    config = ModernBertConfig(
        vocab_size=len(WORDS) + 5, hidden_size=HIDDEN, intermediate_size=128,
        num_hidden_layers=3, num_attention_heads=4, max_position_embeddings=256,
        pad_token_id=0, bos_token_id=2, eos_token_id=3, cls_token_id=2, sep_token_id=3,
        global_attn_every_n_layers=2, local_attention=16)
    base = root / "modernbert-base"
    _spread(ModernBertModel(config)).save_pretrained(base)
    _bert_tokenizer().save_pretrained(base)
    path = root / "modernbert-st"
    modules = [Transformer(str(base)), Pooling(HIDDEN, pooling_mode="mean")]
    SentenceTransformer(modules=modules, device="cpu").save(str(path))
    return path


def build_classifier(root: Path, kind: str, num_labels: int) -> Path:
    """A ``BertForSequenceClassification`` / ``XLMRobertaForSequenceClassification``."""
    from transformers import BertForSequenceClassification, XLMRobertaForSequenceClassification

    labels = {"id2label": {i: f"class_{i}" for i in range(num_labels)},
              "label2id": {f"class_{i}": i for i in range(num_labels)}} if num_labels > 1 else {}
    cls = BertForSequenceClassification if kind == "bert" else XLMRobertaForSequenceClassification
    model = cls(_config(kind, num_labels=num_labels, **labels))
    path = root / f"{kind}-cls{num_labels}"
    _spread(model).save_pretrained(path)
    (_bert_tokenizer() if kind == "bert" else _xlmr_tokenizer()).save_pretrained(path)
    return path


def make_encoder_engine(model_dir: Path, **overrides: Any) -> EncoderEngine:
    settings: dict[str, Any] = dict(model=str(model_dir), device="cpu", dtype="float32")
    settings.update(overrides)
    return EncoderEngine.from_config(EngineConfig(**settings))
