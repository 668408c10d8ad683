"""The metric contract: every ``/metrics`` family's name, type, help text, label names and
bucket bounds, read from ``server/contracts/metrics.json`` (vrs-rs compiles in the same
file: ``rust/server/src/edge/metric_contract.rs``). The file lies inside the ``server``
package, so the installed wheel carries it (maturin packs every file of a
``python-packages`` directory).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

PATH = Path(__file__).resolve().parents[1] / "contracts" / "metrics.json"


class Family(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One family: ``buckets`` is the ``le`` labels as written (histograms only)."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...]
    buckets: str | None = None
    capped_at_max_model_len: bool = False


class _Contract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    about: str
    endpoints: tuple[str, ...]
    buckets: dict[str, tuple[str, ...]]
    families: tuple[Family, ...]


_CONTRACT = msgspec.json.decode(PATH.read_bytes(), type=_Contract)
FAMILIES: dict[str, Family] = {f.name: f for f in _CONTRACT.families}
# The ``endpoint`` label's values of ``vrs:http_requests_total`` (other paths: ``other``).
ENDPOINTS = frozenset(_CONTRACT.endpoints)


def family(name: str) -> Family:
    """The family ``name`` (a KeyError names a family missing from the file)."""
    return FAMILIES[name]


def buckets(name: str) -> tuple[str, ...]:
    """The ``le`` labels of histogram ``name``, in order."""
    key = FAMILIES[name].buckets
    return _CONTRACT.buckets[key] if key is not None else ()


def header(out: list[str], name: str) -> None:
    """The ``# HELP`` and ``# TYPE`` lines of ``name``."""
    f = FAMILIES[name]
    out.append(f"# HELP {name} {f.help}\n# TYPE {name} {f.type}\n")
