#!/usr/bin/env python3
"""Fails when modules inside a Rust crate of the workspace import each other in a cycle.

Cargo already forbids cycles between crates; inside one crate nothing does. This script
reads every crate under ``rust/`` (``src/lib.rs`` or ``src/main.rs`` and the module tree
below it), collects each module's references to other modules of the same crate
(``use crate::…``, ``use super::…``, and inline ``crate::…`` paths), and checks them
level by level: a reference from ``a::x`` to ``b::y`` is an edge ``a → b`` among the
children of their common parent (here the crate root). A module and its own ancestors
are never an edge (a parent declares its children, children use their parent's items).
Test modules (``tests``, ``testutil`` files and inline ``#[cfg(test)] mod … { }``) are
left out: they may use anything.

Usage: ``python3 scripts/check_module_cycles.py [RUST_DIR]``; exit 1 with every cycle
named, 0 when there is none.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

Module = tuple[str, ...]
TEST_MODULES = {"tests", "testutil"}

MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
USE_STMT = re.compile(r"\buse\s+([^;]+);", re.S)
INLINE_PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")
LINE_COMMENT = re.compile(r"//[^\n]*")
TEST_BLOCK = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def module_files(src: Path) -> dict[Module, Path]:
    """Every module of the crate rooted at `src` and its file (2018 layout, no #[path])."""
    root = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
    found: dict[Module, Path] = {}

    def visit(module: Module, path: Path) -> None:
        found[module] = path
        folder = path.parent if path.name in ("lib.rs", "main.rs", "mod.rs") else (
            path.parent / path.stem)
        for name in MOD_DECL.findall(LINE_COMMENT.sub("", path.read_text())):
            if name in TEST_MODULES:
                continue
            for candidate in (folder / f"{name}.rs", folder / name / "mod.rs"):
                if candidate.exists():
                    visit((*module, name), candidate)
                    break

    visit((), root)
    return found


def expand(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, body = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [path for part in parts if part for path in expand(prefix + part)]


def resolve(path: str, here: Module, modules: set[Module]) -> Module | None:
    """The module of the crate a `crate::…`/`super::…`/`self::…` path lands in."""
    segments = [s for s in path.split("::") if s]
    if not segments:
        return None
    if segments[0] == "crate":
        base: Module = ()
        segments = segments[1:]
    elif segments[0] in ("super", "self"):
        base = here
        while segments and segments[0] in ("super", "self"):
            if segments[0] == "super":
                base = base[:-1]
            segments = segments[1:]
    else:
        return None
    target = base
    for segment in segments:
        if (*target, segment) in modules:
            target = (*target, segment)
        else:
            break
    return target


def without_test_blocks(text: str) -> str:
    """`text` less its inline `#[cfg(test)] mod NAME { ... }` blocks."""
    out, pos = [], 0
    for match in TEST_BLOCK.finditer(text):
        if match.start() < pos:
            continue
        depth, end = 0, match.end() - 1
        for end in range(match.end() - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            if depth == 0:
                break
        out.append(text[pos:match.start()])
        pos = end + 1
    out.append(text[pos:])
    return "".join(out)


def references(module: Module, path: Path, modules: set[Module]) -> set[Module]:
    text = without_test_blocks(LINE_COMMENT.sub("", path.read_text()))
    paths: list[str] = []
    for tree in USE_STMT.findall(text):
        paths.extend(p for p in expand(tree) if p.split("::")[0] in ("crate", "super", "self"))
    paths.extend(head + rest for head, rest in INLINE_PATH.findall(text))
    out = set()
    for p in paths:
        target = resolve(p, module, modules)
        if target is not None:
            out.add(target)
    return out


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return found


def check_crate(src: Path) -> list[str]:
    files = module_files(src)
    modules = set(files)
    # Per parent module: edges among its children.
    levels: dict[Module, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    witness: dict[tuple[Module, str, str], tuple[Module, Module]] = {}
    for module, path in files.items():
        for target in references(module, path, modules):
            common = 0
            while (common < min(len(module), len(target))
                   and module[common] == target[common]):
                common += 1
            if common == len(module) or common == len(target):
                continue  # an ancestor or a descendant: not an edge
            parent = module[:common]
            a, b = module[common], target[common]
            levels[parent][a].add(b)
            witness.setdefault((parent, a, b), (module, target))
    problems = []
    for parent, edges in sorted(levels.items()):
        for component in cycles(edges):
            where = "::".join(("crate", *parent))
            shown = []
            for a in component:
                for b in sorted(edges[a]):
                    if b in component:
                        src_mod, dst_mod = witness[(parent, a, b)]
                        shown.append(f"{'::'.join(src_mod)} -> {'::'.join(dst_mod)}")
            problems.append(f"{src.parent.name}: cycle among {where}::{{{', '.join(component)}}}"
                            f" ({'; '.join(shown)})")
    return problems


def main() -> int:
    default = Path(__file__).resolve().parent.parent / "rust"
    rust = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    crates = sorted(p for p in rust.iterdir()
                    if (p / "Cargo.toml").exists() and (p / "src").is_dir())
    problems: list[str] = []
    for crate in crates:
        problems.extend(check_crate(crate / "src"))
    if problems:
        print("module cycles inside crates (break them: move the shared piece below both):")
        for line in problems:
            print(f"  {line}")
        return 1
    print(f"no module cycles in {len(crates)} crates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
