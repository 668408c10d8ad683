"""The args-json contract has one source, the structs of ``server/args_json.py``: the
committed JSON Schema (``server/contracts/args.schema.json``, which the Rust structs are
tested against in rust/server/src/args/tests/schema.rs) is what they generate, and the
key tables of docs/internals.md name their keys."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import msgspec
import pytest

from server import args_json
from server.args_json import SCHEMA_COMMAND, SCHEMA_FILE, RenderArgs, ServeArgs, schema_text
from server.http_args import HttpArgs

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def keys(kind: type[msgspec.Struct]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(kind)}


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_args_schema", ROOT / "scripts" / "gen_args_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_schema_is_what_the_structs_generate() -> None:
    committed = SCHEMA_FILE.read_text(encoding="utf-8")
    assert committed == schema_text(), (
        f"{SCHEMA_FILE.relative_to(ROOT)} differs from the structs of server/args_json.py; "
        f"run `{SCHEMA_COMMAND}` and commit the file (then make rust/server/src/args.rs "
        "match: its tests read the file)")


def test_the_schema_defines_each_struct_with_its_keys() -> None:
    defs = msgspec.json.decode(SCHEMA_FILE.read_bytes())["$defs"]
    for kind in (ServeArgs, RenderArgs, HttpArgs):
        assert set(defs[kind.__name__]["properties"]) == keys(kind), kind.__name__
        assert defs[kind.__name__].get("additionalProperties") is False, kind.__name__


def test_the_script_regenerates_a_stale_file(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    gen = script()
    assert gen.main(["--check"]) == 0
    stale = tmp_path / "args.schema.json"
    stale.write_text(schema_text().replace('"model"', '"model_dir"'), encoding="utf-8")
    monkeypatch.setattr(gen, "SCHEMA_FILE", stale)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0
    assert stale.read_text(encoding="utf-8") == schema_text()
    assert gen.main(["--check"]) == 0


def test_the_written_map_converts_back_to_the_same_struct() -> None:
    """``encode`` writes every key (null where unset), and the services read it back."""
    args = ServeArgs(model="/m", port=0, engine_config={"mock": True},
                     http=HttpArgs(allowed_origins=["https://a.example"]))
    written = args_json.encode(args)
    assert set(written) == keys(ServeArgs) and written["api_key"] is None
    assert msgspec.convert(written, ServeArgs) == args
    render = args_json.encode(RenderArgs(model="/m", max_model_len=64))
    assert set(render) == keys(RenderArgs)
    with pytest.raises(TypeError, match="max_modle_len"):
        RenderArgs(model="/m", max_modle_len=64)  # type: ignore[call-arg]


def section(title: str) -> str:
    text = (ROOT / "docs" / "internals.md").read_text(encoding="utf-8")
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end]


def test_the_docs_name_every_key() -> None:
    serve = section("args-json (typer -> vrs-rs)")
    table = serve[serve.index("|---|---|---|"):]
    rows = re.findall(r"^\| ([a-z_, ]+) \| .+ \| .+ \|$", table, re.M)
    assert {k.strip() for row in rows for k in row.split(",")} == keys(ServeArgs)
    http = serve[serve.index("`http` ("):]
    assert {k for k in keys(HttpArgs) if f"`{k}`" not in http} == set()
    render = section("render (typer -> vrs-rs render)")
    assert {k for k in keys(RenderArgs) if not re.search(rf"\b{k}\b", render)} == set()
