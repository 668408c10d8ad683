"""Reading a Hugging Face model directory: config.json, generation_config.json, weights."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

logger = logging.getLogger("vrs.engine")


class ModelLoadError(RuntimeError):
    """The model directory cannot be served (missing files, unsupported model)."""


def read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{path} not found: is this a Hugging Face model directory?") from exc
    except json.JSONDecodeError as exc:
        raise ModelLoadError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path} must hold a JSON object")
    return data


def read_config(model_dir: Path) -> dict[str, Any]:
    return read_json(model_dir / "config.json")


def _as_id_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [int(v) for v in value if isinstance(v, int)]
    return []


def read_eos_token_ids(model_dir: Path, config: dict[str, Any]) -> list[int]:
    """EOS ids from generation_config.json (int or list), else from config.json."""
    gen_path = model_dir / "generation_config.json"
    if gen_path.exists():
        ids = _as_id_list(read_json(gen_path).get("eos_token_id"))
        if ids:
            return ids
    return _as_id_list(config.get("eos_token_id"))


def safetensors_files(model_dir: Path) -> list[Path]:
    """The weight shards, in the order of the index file when there is one."""
    index = model_dir / "model.safetensors.index.json"
    if index.exists():
        weight_map = read_json(index).get("weight_map", {})
        names = sorted(set(weight_map.values()))
        files = [model_dir / name for name in names]
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise ModelLoadError(f"shards named in {index} are missing: {', '.join(missing)}")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(
            f"no *.safetensors weights in {model_dir} (only safetensors checkpoints are supported)"
        )
    return files


def iter_weights(
    model_dir: Path, dtype: torch.dtype, device: torch.device
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` for every weight, converted, logging one line per shard."""
    files = safetensors_files(model_dir)
    total_bytes = sum(f.stat().st_size for f in files)
    loaded_bytes = 0
    start = time.perf_counter()
    for index, path in enumerate(files, 1):
        with safe_open(str(path), framework="pt", device="cpu") as shard:
            for name in shard.keys():  # noqa: SIM118 - safe_open is not a mapping
                tensor = shard.get_tensor(name)
                if tensor.is_floating_point():
                    tensor = tensor.to(dtype=dtype)
                yield name, tensor.to(device=device)
        loaded_bytes += path.stat().st_size
        logger.info(
            "loading weights: shard %d/%d %s (%.1f/%.1f MiB, %.1fs)",
            index,
            len(files),
            path.name,
            loaded_bytes / 2**20,
            total_bytes / 2**20,
            time.perf_counter() - start,
        )


def resolve_model_dir(model: str) -> Path:
    path = Path(model).expanduser()
    if path.is_dir():
        return path.resolve()
    looks_like_hub_id = model.count("/") == 1 and not model.startswith((".", "/", "~"))
    if looks_like_hub_id and not path.exists():
        try:  # a hub id: only what is already in the local cache, never a download
            from huggingface_hub import snapshot_download

            return Path(snapshot_download(model, local_files_only=True))
        except Exception as exc:
            raise ModelLoadError(
                f"model {model!r} is neither a directory nor in the local Hugging Face cache"
            ) from exc
    raise ModelLoadError(f"model directory {model!r} does not exist")
