"""Module docs point at docs/api.md for API behaviour instead of restating it (issue #37):
every ``docs/api.md, "Section"`` reference in a module doc of the Python server
(``server/**.py``) or of vrs-rs's server crate (``rust/server/src/**.rs``, its ``//!``
lines) names a heading docs/api.md has."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api.md"
# ``docs/api.md, "A"``, also ``docs/api.md "A"`` and lists: ``docs/api.md, "A", "B" and "C"``.
REFERENCE = re.compile(r'docs/api\.md((?:,?\s*(?:and\s+)?"[^"]+")+)')
QUOTED = re.compile(r'"([^"]+)"')


def headings(markdown: str) -> set[str]:
    """The text of every ATX heading (``## Name``), outside fenced code blocks."""
    found, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.add(match[1])
    return found


def module_docs() -> dict[str, str]:
    """Each module's doc, whitespace runs as one space: Python docstrings and the leading
    ``//!`` block of each Rust file."""
    docs: dict[str, str] = {}
    for path in sorted((ROOT / "server").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if doc:
            docs[str(path.relative_to(ROOT))] = doc
    for path in sorted((ROOT / "rust" / "server" / "src").rglob("*.rs")):
        lines = path.read_text(encoding="utf-8").splitlines()
        inner = [line[3:] for line in lines if line.startswith("//!")]
        if inner:
            docs[str(path.relative_to(ROOT))] = "\n".join(inner)
    return {name: " ".join(doc.split()) for name, doc in docs.items()}


def references(doc: str) -> list[str]:
    return [name for group in REFERENCE.findall(doc) for name in QUOTED.findall(group)]


def test_the_reference_pattern_reads_every_form() -> None:
    doc = 'Behaviour: docs/api.md, "Responses", "SSE keep-alive" and "Reasoning"; see "x".'
    assert references(doc) == ["Responses", "SSE keep-alive", "Reasoning"]
    assert references('(spec: docs/api.md "Structured outputs")') == ["Structured outputs"]
    assert headings("# A\n## B c\n```\n# not a heading\n```\n### `d` (e)\n") == {
        "A", "B c", "`d` (e)"}


def test_every_api_reference_of_a_module_doc_names_a_heading() -> None:
    known = headings(API.read_text(encoding="utf-8"))
    docs = module_docs()
    found = {name: references(doc) for name, doc in docs.items()}
    assert sum(len(refs) for refs in found.values()) >= 40, "the scan found the references"
    bad = [f'{name}: "{ref}"' for name, refs in found.items() for ref in refs
           if ref not in known]
    assert not bad, "docs/api.md has no such heading:\n" + "\n".join(bad)
