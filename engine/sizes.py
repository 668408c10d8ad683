"""Memory sizes as users write them: ``2GiB``, ``512MiB``, ``1.5GB``, ``1048576``."""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
}
_PATTERN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """Bytes in ``text``; ValueError naming the accepted forms otherwise."""
    match = _PATTERN.match(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(
            f"{text!r} is not a size; write e.g. 2GiB, 512MiB, 1.5GB or a number of bytes"
        )
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"{text!r} must be more than 0 bytes")
    return value
