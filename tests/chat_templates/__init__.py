"""The published chat templates of the decoder families vrs serves, kept as fixtures.

``index.json`` records for each family the model whose tokenizer config the template comes
from, where the file here was taken from (repository, commit, path, and how), the model's
``bos_token`` / ``eos_token``, the special tokens its template writes and its content format
(how vLLM's detection classifies it). A test that serves a
family passes ``--chat-template template_for(family)``; ``write_family_tokenizer`` gives it a
tokenizer (the demo model's vocabulary) that knows the family's special tokens, so that
``bos_token`` / ``eos_token`` in the template render as the family's own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class FamilyTemplate:
    """One family's template fixture, as ``index.json`` describes it."""

    family: str
    model: str
    architectures: tuple[str, ...]
    path: Path
    bos_token: str | None
    eos_token: str | None
    special_tokens: tuple[str, ...]
    content_format: str  # vLLM's detection (docs/api.md): "string" or "openai"

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")


def _load() -> dict[str, FamilyTemplate]:
    index = json.loads((HERE / "index.json").read_text(encoding="utf-8"))
    return {
        name: FamilyTemplate(
            family=name, model=entry["model"], architectures=tuple(entry["architectures"]),
            path=HERE / entry["file"], bos_token=entry["bos_token"],
            eos_token=entry["eos_token"], special_tokens=tuple(entry["special_tokens"]),
            content_format=entry["content_format"])
        for name, entry in index.items()
    }


FAMILIES: dict[str, FamilyTemplate] = _load()


def template_for(family: str) -> Path:
    """The template file of ``family`` (a key of ``index.json``, e.g. ``gemma3``), for
    ``--chat-template``."""
    try:
        return FAMILIES[family].path
    except KeyError:
        raise KeyError(f"no chat template fixture for {family!r}; "
                       f"known: {', '.join(sorted(FAMILIES))}") from None


def families_of(architecture: str) -> list[str]:
    """The families whose published template belongs to ``architecture`` (a config.json
    ``architectures`` entry such as ``MistralForCausalLM``)."""
    return [name for name, fam in FAMILIES.items() if architecture in fam.architectures]


def write_family_tokenizer(family: str, base_model: Path, directory: Path) -> int:
    """Writes ``tokenizer.json`` and ``tokenizer_config.json`` into ``directory``: the
    vocabulary of ``base_model`` (a model directory, e.g. the demo model) with the family's
    bos, eos and template tokens added as special tokens, and the family's ``bos_token`` /
    ``eos_token`` named. Returns the tokenizer's vocabulary size (a config.json's
    ``vocab_size`` must be at least that)."""
    from tokenizers import AddedToken, Tokenizer

    fam = FAMILIES[family]
    tokenizer = Tokenizer.from_file(str(base_model / "tokenizer.json"))
    names = [t for t in (fam.bos_token, fam.eos_token) if t is not None]
    wanted = list(dict.fromkeys([*names, *fam.special_tokens]))
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t in wanted])
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = json.loads((base_model / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("chat_template", None)
    config["bos_token"] = fam.bos_token
    config["eos_token"] = fam.eos_token
    config["pad_token"] = fam.eos_token
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False),
                                                     encoding="utf-8")
    return int(tokenizer.get_vocab_size(with_added_tokens=True))
