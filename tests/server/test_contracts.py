"""The cross-language contracts in server/contracts/ (read by both frontends; the Rust
twins of these checks are in rust/server/src/edge/metric_contract/tests.rs,
rust/server/src/parsers/tools/formats/tests.rs and rust/server/src/parsers/select/tests.rs):
what the Python server writes and parses comes from the files, read here with plain
``json``, not through the loaders. The parsers' source, Python and Rust, is scanned for a
marker typed by hand."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

import server
from engine import protocol as p
from server.edge.metrics import Metrics, Rejection
from server.parsers import reasoning, select
from server.parsers.tools import (
    CallAccumulator,
    ToolCallParser,
    ToolSettings,
    formats,
    json_formats,
)

pytestmark = pytest.mark.unit

CONTRACTS = Path(server.__file__).resolve().parent / "contracts"
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def load(name: str) -> Any:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def exposition() -> str:
    """Every family with at least one sample: two engines, traffic on engine 0."""
    m = Metrics()
    m.ttft.observe(0.003)
    m.request("/v1/completions", 200)
    m.reject(Rejection.QUEUE_FULL_TOKENS)
    stats = {0: p.SchedulerStats(num_running=1, prefix_cache_queries=4, prefix_cache_hits=1),
             1: p.SchedulerStats()}
    m.vllm.first_token(0, 7, 0.003)
    m.vllm.finished(0, "stop", 0.4, 0.02, 7, 3, queue=0.2, prefill=0.05)
    vllm: list[str] = []
    m.vllm.render(vllm, "demo", 10**12, stats)  # no token-count bound left out
    return (m.render(stats, 2, {0: 1}) + "".join(vllm).encode()).decode()


def test_every_metric_family_is_the_files() -> None:
    """HELP/TYPE lines in the file's order, each sample's label names, every bucket bound."""
    contract = load("metrics.json")
    text = exposition()
    heads = re.findall(r"^# HELP (\S+) (.*)\n# TYPE (\S+) (\S+)$", text, re.M)
    assert [(n, h, t) for n, h, n2, t in heads if n == n2] == [
        (f["name"], f["help"], f["type"]) for f in contract["families"]]
    assert len(heads) == text.count("# HELP ") == text.count("# TYPE ")
    samples: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        if not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            samples.setdefault(match[1], []).append(dict(LABEL.findall(match[2] or "")))
    for f in contract["families"]:
        name, labels = f["name"], f["labels"]
        if f["type"] == "histogram":
            rows = samples[f"{name}_bucket"] + samples[f"{name}_sum"] + samples[f"{name}_count"]
            les = [b["le"] for b in samples[f"{name}_bucket"] if b.get("engine", "0") == "0"]
            assert les == [*contract["buckets"][f["buckets"]], "+Inf"], name
        else:
            counter = f["type"] == "counter" and not name.endswith("_total")
            rows = samples[f"{name}_total" if counter else name]
        assert rows, name
        for row in rows:
            assert sorted(row.keys() - {"le"}) == sorted(labels), (name, row)


def test_token_count_buckets_stop_at_the_context_length_where_the_file_says() -> None:
    contract = load("metrics.json")
    out: list[str] = []
    Metrics().vllm.render(out, "demo", 100, {0: p.SchedulerStats()})
    text = "".join(out)
    vllm = [f for f in contract["families"] if f["name"].startswith("vllm:")]
    assert any(f.get("capped_at_max_model_len") for f in vllm)
    for f in vllm:
        if f["type"] == "histogram":
            les = re.findall(rf'^{f["name"]}_bucket{{.*,le="([^"]+)"}}', text, re.M)
            assert les == [b for b in contract["buckets"][f["buckets"]]
                           if not f.get("capped_at_max_model_len") or float(b) <= 100
                           ] + ["+Inf"], f["name"]


MARKER_KEYS = ("begin", "end", "args", "call_begin", "call_end", "call_type", "sep",
               "args_begin", "args_end", "call_sep", "function", "function_end", "parameter",
               "parameter_end")


def test_the_tool_formats_and_markers_are_the_files() -> None:
    specs = load("tool_formats.json")["formats"]
    by_name = {s["name"]: s for s in specs}
    assert list(formats.TOOL_CALL_PARSERS) == [s["name"] for s in specs]
    for s in specs:
        fmt = formats.TOOL_CALL_PARSERS[s["name"]]
        assert (fmt.begin, fmt.end) == (s["begin"], s["end"])
        spec = formats.SPECS[s["name"]]
        assert {k: getattr(spec, k) for k in MARKER_KEYS if getattr(spec, k)} == {
            k: s[k] for k in MARKER_KEYS if s.get(k)}
    assert formats.NATIVE_FORCING == tuple(s["name"] for s in specs if s.get("native"))
    ds, qwen = by_name["deepseek_v3"], by_name["qwen3_coder"]
    assert (formats.MISTRAL_ARGS, formats.DEEPSEEK_SEP) == (by_name["mistral"]["args"], ds["sep"])
    assert (json_formats.DS_CALL_BEGIN, json_formats.DS_CALL_END) == (ds["call_begin"],
                                                                      ds["call_end"])
    assert (formats.DEEPSEEK_CALL_TYPE, formats.DEEPSEEK_ARGS_BEGIN,
            formats.DEEPSEEK_ARGS_END) == (ds["call_type"], ds["args_begin"], ds["args_end"])
    assert formats.LLAMA_CALL_SEP == by_name["llama3_json"]["call_sep"]
    assert (formats.QWEN_BEGIN, formats.QWEN_END, formats.QWEN_FUNCTION,
            formats.QWEN_FUNCTION_END, formats.QWEN_PARAMETER, formats.QWEN_PARAMETER_END) == (
        qwen["begin"], qwen["end"], qwen["function"], qwen["function_end"], qwen["parameter"],
        qwen["parameter_end"])


TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}}}}]
BODY = '{"name": "f", "arguments": {"a": 1}}'


def two_calls(s: dict[str, str]) -> str:
    """Output with two calls of ``f(a=1)`` in format ``s``, built from the file's markers
    (``s``, plain JSON) and the format's grammar: a marker typed differently in a parser
    fails to parse it."""
    name = s["name"]
    if name in ("demo", "hermes"):
        return (s["begin"] + BODY + s["end"]) * 2
    if name == "llama3_json":
        return s["begin"] + BODY + s["call_sep"] + " " + BODY
    if name == "mistral":
        return (s["begin"] + "f" + s["args"] + '{"a": 1}') * 2
    if name == "deepseek_v3":
        call = (s["call_begin"] + s["call_type"] + s["sep"] + "f\n" + s["args_begin"]
                + '\n{"a": 1}\n' + s["args_end"] + s["call_end"])
        return s["begin"] + call * 2 + s["end"]
    if name == "qwen3_coder":
        return (s["begin"] + "\n" + s["function"] + "f>\n" + s["parameter"] + "a>\n1\n"
                + s["parameter_end"] + "\n" + s["function_end"] + "\n" + s["end"]) * 2
    if name == "pythonic":
        return s["begin"] + "[f(a=1), f(a=1)]" + s["end"]
    assert name == "granite", f"no sample for the format {name}: add one"
    return s["begin"] + "[" + BODY + ", " + BODY + "]"


@pytest.mark.parametrize("spec", load("tool_formats.json")["formats"], ids=lambda s: s["name"])
def test_a_sample_built_from_the_files_markers_parses(spec: dict[str, str]) -> None:
    """The Rust twin: ``a_sample_built_from_the_files_markers_parses`` in
    rust/server/src/parsers/tools/formats/tests.rs."""
    text = two_calls(spec)
    for pieces in ([text], list(text)):
        parser = ToolCallParser(spec["name"], ToolSettings(TOOLS, "auto", None, True))
        deltas = [parser.push(piece) for piece in pieces] + [parser.finish()]
        calls = CallAccumulator()
        for delta in deltas:
            calls.add(delta.calls)
        assert "".join(d.content for d in deltas) == "", text
        assert [(c.name, json.loads(c.arguments)) for c in calls.calls] == [("f", {"a": 1})] * 2


def test_the_reasoning_formats_are_the_files() -> None:
    specs = load("reasoning_formats.json")["formats"]
    assert {n: (m.start, m.end) for n, m in reasoning.REASONING_PARSERS.items()} == {
        s["name"]: (tuple(s["start"]), tuple(s["end"])) for s in specs}
    assert list(reasoning.REASONING_PARSERS) == [s["name"] for s in specs]
    for s in specs:
        for start in s["start"]:
            for end in s["end"]:
                parser = reasoning.ReasoningParser(reasoning.REASONING_PARSERS[s["name"]], False)
                pieces = [parser.push(c) for c in f"a{start}r{end}c"] + [parser.finish()]
                assert ("".join(r for r, _ in pieces), "".join(c for _, c in pieces)) == (
                    "r", "ac"), (s["name"], start, end)


def rules(name: str) -> list[tuple[list[str], str]]:
    return [(r["all"], r["parser"]) for r in load(name)["auto"]["template"]]


def test_the_auto_choice_is_the_files() -> None:
    """Each template rule picks its parser from a template holding just its strings (no
    earlier rule matches it), each model type its parser; the Rust twin is in
    rust/server/src/parsers/select/tests.rs."""
    def tool(template: str) -> select.Choice:
        return select.tool_parser(None, template, None)

    def think(template: str) -> select.Choice:
        return select.reasoning_parser(None, template)

    for file, choose in (("tool_formats.json", tool), ("reasoning_formats.json", think)):
        table = rules(file)
        for i, (strings, parser) in enumerate(table):
            template = " ".join(strings)
            assert not any(all(m in template for m in earlier) for earlier, _ in table[:i])
            assert choose(template) == select.Choice(
                parser, "auto: chat template has " + " and ".join(strings)), (file, strings)
    for model_type, parser in load("tool_formats.json")["auto"]["model_type"].items():
        assert select.tool_parser(None, None, {"model_type": model_type}).name == parser


def test_the_endpoint_label_values_are_the_files() -> None:
    endpoints = load("metrics.json")["endpoints"]
    m = Metrics()
    for path in [*endpoints, "/v1/unknown", "/"]:
        m.request(path, 200)
    text = m.render({}, 1, {}).decode()
    got = re.findall(r'^vrs:http_requests_total\{endpoint="([^"]*)",status="200"\} (\d+)$',
                     text, re.M)
    assert sorted(got) == sorted([(e, "1") for e in endpoints] + [("other", "2")])


def test_every_marker_is_in_a_shared_case_of_its_parser() -> None:
    """The file against the literal bytes of tests/parser_cases/tools.jsonl (which both
    frontends' parsers must parse): a changed marker fails here or there."""
    cases = [json.loads(line) for line in
             (ROOT / "tests" / "parser_cases" / "tools.jsonl").read_text().splitlines() if line]
    for s in load("tool_formats.json")["formats"]:
        texts = [c["text"] for c in cases if c["parser"] == s["name"] and c["calls"]]
        for key in MARKER_KEYS:
            if s.get(key):
                assert any(s[key] in t for t in texts), (s["name"], key)


def every_marker() -> set[str]:
    """Every string of the parser contracts: markers and auto rules' strings."""
    tools, think = load("tool_formats.json"), load("reasoning_formats.json")
    found = {s[k] for s in tools["formats"] for k in MARKER_KEYS if s.get(k)}
    found |= {m for s in think["formats"] for m in s["start"] + s["end"]}
    for contract in (tools, think):
        found |= {m for rule in contract["auto"]["template"] for m in rule["all"]}
    return found


def python_literals(path: Path) -> list[str]:
    """The string constants of a Python module, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef)
            and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docs]


RUST_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|r(#*)".*?"\1|"(?:[^"\\]|\\.)*"'
                        r"|'(?:[^'\\\n]|\\.)'", re.S)


def rust_literals(path: Path) -> list[str]:
    """The string literals of a Rust file, comments, char literals and an inline
    ``#[cfg(test)] mod tests`` skipped (escapes are kept as written, which no marker has)."""
    found = []
    source = path.read_text(encoding="utf-8").split("#[cfg(test)]\nmod tests {")[0]
    for match in RUST_TOKEN.finditer(source):
        token = match[0]
        if token.startswith('"'):
            found.append(token[1:-1])
        elif token.startswith("r"):
            found.append(token[len(match[1]) + 2:-len(match[1]) - 1])
    return found


def parser_sources() -> list[Path]:
    """The parsers' modules in both languages, their tests left out (they hold literal
    cases on purpose)."""
    python = sorted((ROOT / "server" / "parsers").rglob("*.py"))
    rust = [path for path in sorted((ROOT / "rust" / "server" / "src" / "parsers").rglob("*.rs"))
            if path.name not in ("tests.rs", "splits.rs", "cases.rs")
            and "tests" not in path.parts]
    return python + rust


def typed_markers(path: Path, markers: set[str]) -> list[str]:
    """Literals of ``path`` that hold a marker: a marker with punctuation (``<tool_call>``,
    ``[ARGS]``, a code fence) anywhere in a literal, a one-character one (``;``) as the
    whole literal. A word (deepseek_v3's ``function``) is not looked for: it is also the
    OpenAI ``tools`` key the parsers read; the sample test above covers it."""
    literals = python_literals(path) if path.suffix == ".py" else rust_literals(path)
    marked = {m for m in markers if len(m) > 1 and not m.isalnum()}
    single = {m for m in markers if len(m) == 1}
    return [lit for lit in literals if any(m in lit for m in marked) or lit in single]


def test_no_parser_module_types_a_marker() -> None:
    markers = every_marker()
    assert {"<function=", "```json", "[THINK]", "[func_name1("} <= markers
    sources = parser_sources()
    assert {p.name for p in sources} >= {"qwen3_coder.py", "qwen3_coder.rs", "select.rs",
                                         "reasoning.py", "formats.rs", "json_formats.py"}
    typed = {str(p.relative_to(ROOT)): hits for p in sources
             if (hits := typed_markers(p, markers))}
    assert not typed, f"markers typed in code instead of read from server/contracts: {typed}"


def test_the_scan_sees_a_typed_marker(tmp_path: Path) -> None:
    markers = every_marker()
    py, rs = tmp_path / "m.py", tmp_path / "m.rs"
    py.write_text('"""Doc: <function=."""\nX = "<function="\nY = ";"\n', encoding="utf-8")
    rs.write_text('//! <tool_call>\nconst A: &str = "a</parameter>";\n'
                  "let c = '\"'; // \"[THINK]\"\nlet b = r#\"[ARGS]\"#;\n", encoding="utf-8")
    assert typed_markers(py, markers) == ["<function=", ";"]
    assert typed_markers(rs, markers) == ["a</parameter>", "[ARGS]"]
