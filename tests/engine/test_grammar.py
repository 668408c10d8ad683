"""engine/grammar: the schema check, the compiler (cache, shared compiles, timeout, errors)
and the bitmask, against the real xgrammar and the demo model's real tokenizer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from engine.grammar.bitmask import Matcher, allowed_token_ids
from engine.grammar.compiler import GrammarCompiler
from engine.grammar.errors import GrammarError
from engine.grammar.schema import ENFORCED, check_schema

pytestmark = pytest.mark.unit

VOCAB = 129280  # the demo model's
EOS = [1]

# For each enforced keyword: a schema, an instance that breaks only that keyword (the
# grammar must refuse it) and one that keeps it (the grammar must take it).
KEYWORD_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "type": ({"type": "integer"}, '"a"', "7"),
    "enum": ({"enum": ["a", "b"]}, '"c"', '"a"'),
    "const": ({"const": "a"}, '"b"', '"a"'),
    "properties": (
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        '{"a": "x"}',
        '{"a": 1}',
    ),
    "required": (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
        "{}",
        '{"a": 1}',
    ),
    "additionalProperties": (
        {"type": "object", "additionalProperties": {"type": "integer"}},
        '{"b": "x"}',
        '{"b": 1}',
    ),
    "patternProperties": (
        {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
        '{"x": "s"}',
        '{"x": 1}',
    ),
    "propertyNames": (
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "propertyNames": {"pattern": "^x"},
        },
        '{"y": 1}',
        '{"x": 1}',
    ),
    "minProperties": (
        {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1},
        "{}",
        '{"b": 1}',
    ),
    "maxProperties": (
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
        '{"a": 1, "b": 2}',
        '{"b": 1}',
    ),
    "unevaluatedProperties": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "unevaluatedProperties": False,
        },
        '{"b": 1}',
        '{"a": 1}',
    ),
    "items": ({"type": "array", "items": {"type": "integer"}}, '["a"]', "[1, 2]"),
    "prefixItems": (
        {"type": "array", "prefixItems": [{"type": "string"}], "items": False},
        "[1]",
        '["a"]',
    ),
    "unevaluatedItems": (
        {"type": "array", "prefixItems": [{"type": "integer"}], "unevaluatedItems": False},
        "[1, 2]",
        "[1]",
    ),
    "minItems": ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, "[1]", "[1, 2]"),
    "maxItems": ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, "[1, 2]", "[1]"),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "boolean"}]}, '"s"', "true"),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, '"s"', "true"),
    "$ref": ({"$defs": {"x": {"type": "integer"}}, "$ref": "#/$defs/x"}, '"s"', "1"),
    "$defs": (
        {
            "$defs": {"x": {"type": "integer"}},
            "type": "object",
            "properties": {"v": {"$ref": "#/$defs/x"}},
        },
        '{"v": "s"}',
        '{"v": 3}',
    ),
    "definitions": (
        {
            "definitions": {"x": {"type": "integer"}},
            "type": "object",
            "properties": {"v": {"$ref": "#/definitions/x"}},
        },
        '{"v": "s"}',
        '{"v": 3}',
    ),
    "minimum": ({"type": "integer", "minimum": 5}, "3", "7"),
    "maximum": ({"type": "integer", "maximum": 5}, "7", "3"),
    "exclusiveMinimum": ({"type": "integer", "exclusiveMinimum": 5}, "5", "6"),
    "exclusiveMaximum": ({"type": "integer", "exclusiveMaximum": 5}, "5", "4"),
    "multipleOf": ({"type": "integer", "multipleOf": 3}, "4", "6"),
    "minLength": ({"type": "string", "minLength": 3}, '"ab"', '"abc"'),
    "maxLength": ({"type": "string", "maxLength": 2}, '"abc"', '"ab"'),
    "pattern": ({"type": "string", "pattern": "^[a-c]+$"}, '"xyz"', '"abc"'),
    "format": ({"type": "string", "format": "date"}, '"hello"', '"2024-01-02"'),
}


@pytest.fixture(scope="module")
def compiler() -> GrammarCompiler:
    from engine.mock.demo_model import ensure_demo_model

    return GrammarCompiler(ensure_demo_model(), VOCAB, EOS, timeout_s=60.0)


def compiled(compiler: GrammarCompiler, spec: p.StructuredOutputs) -> Any:
    job = compiler.submit(spec)
    job.future.result(timeout=60)
    return job.result()


def takes(grammar: Any, text: str) -> bool:
    matcher = Matcher(grammar).xgr
    return bool(matcher.accept_string(text)) and matcher.is_completed()


def test_every_enforced_keyword_has_a_case() -> None:
    assert set(KEYWORD_CASES) == set(ENFORCED)


@pytest.mark.parametrize("keyword", sorted(KEYWORD_CASES))
def test_an_enforced_keyword_is_enforced(compiler: GrammarCompiler, keyword: str) -> None:
    schema, bad, good = KEYWORD_CASES[keyword]
    grammar = compiled(compiler, p.StructuredOutputs(json=json.dumps(schema)))
    assert takes(grammar, good), f"{keyword}: {good} refused"
    assert not takes(grammar, bad), f"{keyword}: {bad} taken"


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"allOf": [{"type": "integer"}]}, ["`allOf`", "`#`"]),
        (
            {"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
            ["`not`", "`#/properties/a`"],
        ),
        ({"type": "array", "uniqueItems": True}, ["`uniqueItems`"]),
        ({"type": "array", "contains": {"const": 1}}, ["`contains`"]),
        ({"if": {"type": "string"}, "then": {"maxLength": 3}}, ["`if`"]),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, ["`dependentRequired`"]),
        ({"anyOf": [{"type": "string", "format": "color"}]}, ["format `color`", "`#/anyOf/0`"]),
    ],
)
def test_an_unenforced_keyword_is_refused_with_where(
    schema: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(GrammarError) as info:
        check_schema(schema)
    for word in words:
        assert word in str(info.value)


def test_property_names_and_annotations_are_not_keywords() -> None:
    check_schema(
        {
            "type": "object",
            "title": "t",
            "description": "d",
            "examples": [{}],
            "properties": {"not": {"type": "string", "default": "x"}, "allOf": {"type": "integer"}},
        }
    )
    check_schema({"type": "array", "uniqueItems": False})


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "objectx"}, "#/type"),
        ({"type": "string", "maxLength": -1}, "#/maxLength"),
        ({"properties": {"a": {"minimum": "low"}}}, "#/properties/a/minimum"),
    ],
)
def test_invalid_json_schema_is_refused(schema: dict[str, Any], where: str) -> None:
    with pytest.raises(GrammarError, match=f"not valid JSON Schema at `{where}`"):
        check_schema(schema)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (p.StructuredOutputs(regex="(unclosed"), "the regex does not compile: "),
        (p.StructuredOutputs(grammar="root ::= missing"), "the grammar does not compile: "),
        (p.StructuredOutputs(grammar='start: "lark"'), "the grammar does not compile: "),
        (p.StructuredOutputs(json='{"$ref": "#/$defs/none"}'), "the JSON schema does not compile"),
        (p.StructuredOutputs(json="{not json"), "the JSON schema is not JSON"),
        (p.StructuredOutputs(json='{"allOf": [{"type": "integer"}]}'), "`allOf`"),
        (p.StructuredOutputs(choice=[]), "the choice list is empty"),
        (p.StructuredOutputs(structural_tag='{"type": "nope"}'), "the structural tag does not"),
        (p.StructuredOutputs(), "sets no constraint"),
    ],
)
def test_a_spec_that_does_not_compile_is_a_grammar_error(
    compiler: GrammarCompiler, spec: p.StructuredOutputs, message: str
) -> None:
    job = compiler.submit(spec)
    with pytest.raises(GrammarError, match=message.replace("(", r"\(").replace("$", r"\$")) as info:
        job.future.result(timeout=60)
    assert "[" not in str(info.value).split(":")[0]  # xgrammar's "[time] file.cc:" is gone
    assert not compiler.cached(spec)


def test_choice_and_grammar_take_exactly_their_language(compiler: GrammarCompiler) -> None:
    choices = ['a "quoted" one', "back\\slash", "日本", "two\nlines", ""]
    grammar = compiled(compiler, p.StructuredOutputs(choice=choices))
    for choice in choices:
        assert takes(grammar, choice)
    assert not takes(grammar, "日")
    assert not takes(grammar, "other")
    ebnf = compiled(compiler, p.StructuredOutputs(grammar='root ::= "(" [0-9]+ ")"'))
    assert takes(ebnf, "(12)") and not takes(ebnf, "()")
    mode = compiled(compiler, p.StructuredOutputs(json_object=True))
    assert takes(mode, '{"any": [1, {"b": null}]}') and not takes(mode, "[1]")


def test_the_cache_is_shared_bounded_and_keyed_by_the_spec() -> None:
    from engine.mock.demo_model import ensure_demo_model

    compiler = GrammarCompiler(ensure_demo_model(), VOCAB, EOS, timeout_s=60.0, cache_size=2)
    specs = [p.StructuredOutputs(regex=f"[a-z]{{{i}}}") for i in (1, 2, 3)]
    first, again = compiler.submit(specs[0]), compiler.submit(specs[0])
    assert first.future is again.future  # one compile for concurrent equal specs
    first.future.result(timeout=60)
    compiled(compiler, specs[0])
    assert compiler.cached(specs[0])
    hit = compiler.submit(specs[0])
    assert hit.future.done() and hit.result() is first.result()
    compiled(compiler, specs[1])
    compiled(compiler, specs[2])
    assert not compiler.cached(specs[0])  # least recently used, evicted at 3 > 2
    assert compiler.cached(specs[1]) and compiler.cached(specs[2])


def slow_schema(width: int) -> str:
    item = {"anyOf": [{"type": "string", "pattern": "[a-z]{1,9}"}, {"type": "number"}]}
    props = {
        f"p{i}": {
            "type": "object",
            "properties": {
                f"q{j}": {"type": ["string", "integer", "array"], "items": item} for j in range(20)
            },
        }
        for i in range(width)
    }
    return json.dumps({"type": "object", "properties": props, "required": list(props)})


def test_a_slow_compile_times_out_and_is_still_cached_once_done(
    compiler: GrammarCompiler, tmp_path: Path
) -> None:
    from engine.mock.demo_model import ensure_demo_model

    quick = GrammarCompiler(ensure_demo_model(), VOCAB, EOS, timeout_s=0.05)
    compiled(quick, p.StructuredOutputs(regex="x"))  # tokenizer info built: not timed
    spec = p.StructuredOutputs(json=slow_schema(6))
    job = quick.submit(spec)
    started = time.monotonic()
    while True:
        try:
            if job.result() is not None:
                pytest.fail("a 6-object schema compiled within 50 ms")
        except GrammarError as exc:
            assert "did not compile within 0.05 s" in str(exc)
            assert "--structured-outputs-compile-timeout" in str(exc)
            break
        assert time.monotonic() - started < 5
        time.sleep(0.005)
    job.future.result(timeout=120)
    assert quick.cached(spec)


def test_allowed_token_ids_follow_the_grammar(compiler: GrammarCompiler) -> None:
    from transformers import AutoTokenizer

    from engine.mock.demo_model import ensure_demo_model

    tokenizer = AutoTokenizer.from_pretrained(str(ensure_demo_model()))
    matcher = Matcher(compiled(compiler, p.StructuredOutputs(choice=["yes", "no"])))
    first = allowed_token_ids(matcher, VOCAB)
    texts = {tokenizer.decode([t]) for t in first.tolist()}
    assert texts and all("yes".startswith(t) or "no".startswith(t) for t in texts)
    assert EOS[0] not in first.tolist()
    assert matcher.xgr.accept_string("yes")
    assert allowed_token_ids(matcher, VOCAB).tolist() == EOS  # only the end is left


def test_json_grammars_ban_control_characters(compiler: GrammarCompiler) -> None:
    """xgrammar lets a raw NUL into a string with maxLength; JSON must never carry one."""
    nul = 191  # the byte-level token of b"\x00" in the demo tokenizer
    json_spec = p.StructuredOutputs(json='{"type": "string", "maxLength": 6}')
    matcher = Matcher(compiled(compiler, json_spec))
    assert matcher.xgr.accept_string('"ab')
    assert matcher.bans(nul) and nul not in allowed_token_ids(matcher, VOCAB)
    in_string = Matcher(compiled(compiler, p.StructuredOutputs(json='{"type": "string"}')))
    assert in_string.xgr.accept_string('"')
    assert in_string.bans(nul) and len(allowed_token_ids(in_string, VOCAB)) < VOCAB - 1000
    regex = Matcher(compiled(compiler, p.StructuredOutputs(regex=r"a[\x00-\x7f]")))
    assert regex.banned is None and regex.xgr.accept_string("a")
    assert nul in allowed_token_ids(regex, VOCAB)
