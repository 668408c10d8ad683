"""The shared case tables under tests/parser_cases/ (JSON lines, one case each), read by
the Python tests as the Rust tests read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLES = Path(__file__).resolve().parents[1] / "parser_cases"


def case_table(name: str) -> list[dict[str, Any]]:
    """The cases of ``tests/parser_cases/<name>.jsonl``, blank lines skipped."""
    text = (TABLES / f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
