//! Chat template tests; several compare with transformers' own `apply_chat_template`.

use super::*;
use crate::testutil::python;
use crate::tokenizer::tests::{deepseek, deepseek_dir};
use serde_json::json;

/// A template exercising what HF templates use: namespace, loop.last, loop controls,
/// tojson (plain, indented, non-ASCII), Python string/dict methods, raise_exception,
/// printing of booleans / None / lists, None-safe length, tools.
const TEST_TEMPLATE: &str = r#"{%- set ns = namespace(sys='', n=0) -%}
{{ bos_token }}
{%- if tools %}
Tools:
{% for t in tools %}{{ t | tojson }}{% if not loop.last %}, {% endif %}{% endfor %}

Pretty: {{ tools[0] | tojson(indent=2) }}
{%- endif %}
{% for m in messages %}
{%- if m.role == 'system' %}{% set ns.sys = m.content.strip() %}{% continue %}{% endif %}
{%- set ns.n = ns.n + 1 %}
<{{ m['role'] | upper }} i={{ loop.index0 }} last={{ loop.last }} name={{ m.get('name', 'anon') }}>
{%- if m.content is string %}{{ m.content.strip() }}{% if m.content.startswith('  ') %} (indented){% endif %}
{%- elif m.content %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %} CALL {{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}{% endif %}
{%- if m.reasoning_content %} THINK={{ m.reasoning_content }}/{{ m.thinking }}{% endif %}
{%- if m.role == 'bad' %}{{ raise_exception('bad role: ' ~ m.role) }}{% endif %}
{% endfor %}
sys={{ ns.sys }} n={{ ns.n }} flag={{ enable_thinking }} unset={{ unset_var }} list={{ [1, 'it\'s', none, true, 2.5] }}
len={{ unset_var | length }}/{{ messages | length }} words={{ 'a b  c'.split() | join('|') }} keys={{ messages[0].keys() | list | length }}
{%- if add_generation_prompt %}
<ASSISTANT>{% endif %}
"#;

fn tools() -> Vec<Json> {
    vec![
        json!({"type": "function", "function": {"name": "get_weather", "description": "Wetter für eine Stadt — 天气",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}},
            "required": ["city"]}}}),
        json!({"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}),
    ]
}

fn conversation() -> Vec<Json> {
    vec![
        json!({"role": "system", "content": "  You are helpful.  "}),
        json!({"role": "user", "content": "  Wie ist das Wetter in 東京? 🌧", "name": "kim"}),
        json!({"role": "assistant", "content": null, "reasoning_content": "need the tool",
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "東京", "days": 2, "x": 1.0, "q": "a\"b"}}}]}),
        json!({"role": "tool", "content": [{"type": "text", "text": "rain, 18°C"}], "tool_call_id": "c1"}),
        json!({"role": "assistant", "content": "Es regnet.", "thinking": "easy"}),
        json!({"role": "user", "content": "Danke!"}),
    ]
}

/// Renders each case with transformers (`AutoTokenizer` on the DeepSeek tokenizer dir,
/// `apply_chat_template(tokenize=False)`); returns `{"text", "ids"}` or `{"error"}` each.
fn transformers_render(template: &str, cases: &[ChatTemplateInput]) -> Vec<Json> {
    const SCRIPT: &str = r#"
import json, sys
from transformers import AutoTokenizer
req = json.load(sys.stdin)
tok = AutoTokenizer.from_pretrained(req["dir"])
out = []
for c in req["cases"]:
    try:
        text = tok.apply_chat_template(
            c["messages"], tools=c["tools"], add_generation_prompt=c["agp"],
            continue_final_message=c["cfm"], chat_template=req["template"], tokenize=False,
            **c["kwargs"])
        out.append({"text": text, "ids": tok.encode(text, add_special_tokens=False)})
    except Exception as e:
        out.append({"error": str(e)})
print(json.dumps(out))
"#;
    let cases: Vec<Json> = cases
        .iter()
        .map(|c| {
            json!({"messages": c.messages, "tools": c.tools, "agp": c.add_generation_prompt,
                   "cfm": c.continue_final_message, "kwargs": c.kwargs})
        })
        .collect();
    let req = json!({"dir": deepseek_dir(), "template": template, "cases": cases});
    serde_json::from_str(&python(SCRIPT, &req)).unwrap()
}

fn input(messages: Vec<Json>) -> ChatTemplateInput {
    ChatTemplateInput {
        messages,
        ..Default::default()
    }
}

/// Renders every case in Rust and in transformers; texts, token ids and error messages
/// must be identical.
fn assert_same_as_transformers(template: &str, cases: &[ChatTemplateInput]) {
    let tok = deepseek();
    let ct = ChatTemplate::new(template, &tok.config().special_tokens).unwrap();
    let expected = transformers_render(template, cases);
    for (i, (case, want)) in cases.iter().zip(expected).enumerate() {
        match (ct.render(case), want.get("error")) {
            (Ok(text), None) => {
                assert_eq!(
                    text,
                    want["text"].as_str().unwrap(),
                    "case {i}: rendered text differs"
                );
                let ids: Vec<u32> = serde_json::from_value(want["ids"].clone()).unwrap();
                assert_eq!(
                    tok.encode(&text, false).unwrap(),
                    ids,
                    "case {i}: token ids differ"
                );
            }
            (Err(e), Some(msg)) => {
                if let TextError::Template(m) = &e {
                    assert_eq!(m, msg.as_str().unwrap(), "case {i}: error message differs");
                }
            }
            (got, want) => panic!("case {i}: rust {got:?}, transformers {want:?}"),
        }
    }
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn custom_template_matches_transformers() {
    let mut kwargs = serde_json::Map::new();
    kwargs.insert("enable_thinking".into(), json!(true));
    let mut cases = vec![
        ChatTemplateInput {
            messages: conversation(),
            tools: Some(tools()),
            add_generation_prompt: true,
            kwargs: kwargs.clone(),
            ..Default::default()
        },
        input(conversation()),
        input(vec![json!({"role": "user", "content": "hi"})]),
        input(vec![
            json!({"role": "user", "content": "x"}),
            json!({"role": "bad", "content": "y"}),
        ]),
        ChatTemplateInput {
            messages: vec![
                json!({"role": "user", "content": "Write a haiku"}),
                json!({"role": "assistant", "content": "Autumn moonlight— "}),
            ],
            continue_final_message: true,
            ..Default::default()
        },
    ];
    cases[2]
        .kwargs
        .insert("enable_thinking".into(), json!(false));
    assert_same_as_transformers(TEST_TEMPLATE, &cases);
    // Python-style printing is part of what was compared; pin it here too.
    let ct = ChatTemplate::new(TEST_TEMPLATE, &deepseek().config().special_tokens).unwrap();
    let text = ct.render(&cases[0]).unwrap();
    for want in [
        "flag=True",
        r#"list=[1, "it's", None, True, 2.5]"#,
        "len=0/6",
        "last=True",
        "THINK=need the tool/need the tool",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    assert!(matches!(ct.render(&cases[3]), Err(TextError::Template(m)) if m == "bad role: bad"));
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn demo_template_matches_transformers() {
    // The checkout cargo runs the test from: a compile-time `env!` path may name another
    // checkout when the target dir is shared (cargo reuses the artifact).
    let path = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            std::path::PathBuf::from,
        )
        .join("../../engine/mock/templates/demo_chat_template.jinja");
    let template = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut thinking = serde_json::Map::new();
    thinking.insert("enable_thinking".into(), json!(true));
    let cases = vec![
        ChatTemplateInput {
            messages: conversation(),
            tools: Some(tools()),
            add_generation_prompt: true,
            kwargs: thinking.clone(),
            ..Default::default()
        },
        ChatTemplateInput {
            messages: conversation(),
            add_generation_prompt: true,
            ..Default::default()
        },
        ChatTemplateInput {
            messages: vec![
                json!({"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
                json!({"role": "assistant", "content": "partial answer", "reasoning": "hmm"}),
            ],
            continue_final_message: true,
            ..Default::default()
        },
        input(vec![
            json!({"role": "user", "content": "a"}),
            json!({"role": "system", "content": "late"}),
        ]),
        input(vec![json!({"role": "wizard", "content": "a"})]),
    ];
    assert_same_as_transformers(&template, &cases);
}

#[test]
fn raise_exception_is_a_template_error_with_the_message() {
    let ct = ChatTemplate::new(
        "{% if messages|length == 0 %}{{ raise_exception('no messages!') }}{% endif %}ok",
        &[],
    )
    .unwrap();
    match ct.render(&input(vec![])) {
        Err(TextError::Template(msg)) => assert_eq!(msg, "no messages!"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ct.render(&input(vec![json!({"role": "user"})])).unwrap(),
        "ok"
    );
    // Inside a macro too.
    let ct = ChatTemplate::new(
        "{% macro f() %}{{ raise_exception('deep') }}{% endmacro %}{{ f() }}",
        &[],
    )
    .unwrap();
    assert!(matches!(ct.render(&input(vec![])), Err(TextError::Template(m)) if m == "deep"));
}

#[test]
fn the_inline_system_probe_finds_a_system_first_template() {
    let permissive = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
    assert!(!ChatTemplate::new(permissive, &[])
        .unwrap()
        .merges_inline_system());
    let guarded = "{% for m in messages %}{% if m.role == 'system' and not loop.first %}\
        {{ raise_exception('System message must be at the beginning.') }}{% endif %}\
        {{ m.content }}{% endfor %}";
    let template = ChatTemplate::new(guarded, &[]).unwrap();
    assert!(template.merges_inline_system());
    assert!(
        template.clone().merges_inline_system(),
        "found once, shared"
    );
    let path = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")),
            std::path::PathBuf::from,
        )
        .join("../../engine/mock/templates/demo_chat_template.jinja");
    let demo = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    assert!(ChatTemplate::new(&demo, &[])
        .unwrap()
        .merges_inline_system());
}

#[test]
fn render_errors_are_user_errors() {
    let ct = ChatTemplate::new("{{ messages[0].content.nope.deeper }}", &[]).unwrap();
    let err = ct
        .render(&input(vec![json!({"role": "user", "content": "x"})]))
        .unwrap_err();
    assert!(
        matches!(err, TextError::Template(_)) && err.is_user_error(),
        "{err:?}"
    );
    assert!(matches!(
        ChatTemplate::new("{% if %}", &[]),
        Err(TextError::Template(_))
    ));
    let bad = input(vec![json!("not an object")]);
    assert!(matches!(ct.render(&bad), Err(TextError::InvalidInput(_))));
    let mut reserved = input(vec![]);
    reserved.kwargs.insert("messages".into(), json!([]));
    assert!(matches!(
        ct.render(&reserved),
        Err(TextError::InvalidInput(_))
    ));
}

#[test]
fn length_is_none_safe() {
    let ct = ChatTemplate::new(
        "{{ none | length }} {{ unset | length }} {{ messages[0].content | count }}",
        &[],
    )
    .unwrap();
    // transformers drops null message keys, so `content` is undefined here.
    assert_eq!(
        ct.render(&input(vec![json!({"content": null})])).unwrap(),
        "0 0 0"
    );
}

#[test]
fn tojson_options() {
    let ct = ChatTemplate::new(
        "{{ messages[0] | tojson }}|{{ messages[0] | tojson(sort_keys=true, separators=[',', ':']) }}|{{ messages[0].content | tojson(true) }}",
        &[],
    )
    .unwrap();
    let out = ct
        .render(&input(vec![json!({"role": "user", "content": "é<>&"})]))
        .unwrap();
    assert_eq!(
        out,
        r#"{"role": "user", "content": "é<>&"}|{"content":"é<>&","role":"user"}|"\u00e9<>&""#
    );
}

#[test]
fn strftime_now_and_generation_tags() {
    let ct = ChatTemplate::new("{{ strftime_now('%Y-%m-%d') }}", &[]).unwrap();
    let today = chrono::Local::now().format("%Y-%m-%d").to_string();
    assert_eq!(ct.render(&input(vec![])).unwrap(), today);
    let ct = ChatTemplate::new("{% for m in messages %}{%- generation -%} {{ m.content }} {%- endgeneration %}{% endfor %}", &[])
        .unwrap();
    assert_eq!(
        ct.render(&input(vec![json!({"content": "x"})])).unwrap(),
        "x"
    );
    assert_eq!(
        strip_generation_tags("a{%- generation %}b{% endgeneration -%}c{% if x %}"),
        "a{%- if true %}b{% endif -%}c{% if x %}"
    );
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn loads_from_config_and_picks_tool_use() {
    let config = TokenizerConfig::from_json(&json!({
        "bos_token": "<s>",
        "chat_template": [{"name": "default", "template": "D{{ bos_token }}"},
                          {"name": "tool_use", "template": "T{{ tools | length }}"}]
    }))
    .unwrap();
    let ct = ChatTemplate::from_config(&config, None).unwrap();
    assert_eq!(ct.render(&input(vec![])).unwrap(), "D<s>");
    let with_tools = ChatTemplateInput {
        tools: Some(tools()),
        ..Default::default()
    };
    assert_eq!(ct.render(&with_tools).unwrap(), "T2");
    let none = TokenizerConfig::default();
    assert!(matches!(
        ChatTemplate::from_config(&none, None),
        Err(TextError::NoChatTemplate(_))
    ));
    // The model dir of the DeepSeek tokenizer has no template; an override file works.
    assert!(ChatTemplate::from_model_dir(&deepseek_dir(), None).is_err());
    let file = std::env::temp_dir().join(format!("vrs-text-tpl-{}.jinja", std::process::id()));
    std::fs::write(&file, "{{ eos_token }}").unwrap();
    let ct = ChatTemplate::from_model_dir(&deepseek_dir(), Some(&file)).unwrap();
    assert_eq!(ct.render(&input(vec![])).unwrap(), "<｜end▁of▁sentence｜>");
    std::fs::remove_file(&file).unwrap();
}

/// Renders each template with transformers on the same input; `Ok(text)` or `Err(message)`.
pub(crate) fn transformers_snippets(
    templates: &[&str],
    case: &ChatTemplateInput,
) -> Vec<Result<String, String>> {
    const SCRIPT: &str = r#"
import json, sys
from transformers import AutoTokenizer
req = json.load(sys.stdin)
tok = AutoTokenizer.from_pretrained(req["dir"])
out = []
for t in req["templates"]:
    try:
        out.append({"ok": tok.apply_chat_template(req["messages"], tools=req["tools"],
                    chat_template=t, tokenize=False, **req["kwargs"])})
    except Exception as e:
        out.append({"err": f"{type(e).__name__}: {e}"})
print(json.dumps(out))
"#;
    let req = json!({"dir": deepseek_dir(), "templates": templates, "messages": case.messages,
                     "tools": case.tools, "kwargs": case.kwargs});
    let out: Vec<Json> = serde_json::from_str(&python(SCRIPT, &req)).unwrap();
    out.into_iter()
        .map(|o| match o.get("ok") {
            Some(t) => Ok(t.as_str().unwrap().to_owned()),
            None => Err(o["err"].as_str().unwrap().to_owned()),
        })
        .collect()
}

/// Snippets of what HF templates use, rendered by both; known differences (see the
/// module docs) are left out.
#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn snippets_match_jinja2() {
    let snippets = [
        "{{ 3 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ 2 ** 10 }} {{ 1 + 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }}",
        "{{ 'abc'[::-1] }} {{ messages[-1].role }} {{ 'x' in 'xyz' }} {{ messages | length > 0 }}",
        "{{ 'x' ~ true }} {{ none }} {{ {'a': 1, 'b': [none]} }} {{ range(3) | list }}",
        "{{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ messages | map(attribute='role') | join(',') }}",
        "{% for k, v in messages[0].items() %}{{ k }}={{ v }};{% endfor %}",
        "{{ '  x  ' | trim }}|{{ 'a\nb' | indent(2) }}|{{ 'hello world' | title }}|{{ 'abc'.capitalize() }}",
        "{{ 'a,b'.split(',') }} {{ [3,1,2] | sort }} {{ [1,1,2] | unique | list }} {{ [1,2] | reverse | list }} {{ [1,2] | first }}",
        "{% for m in messages %}{{ loop.length }}{{ loop.previtem is defined }}{{ loop.cycle('a','b') }}{% endfor %}",
        "{{ unset | default('d') }} {{ tools is none }} {{ tools is not none }} {{ messages[0].nokey is defined }}",
        "{{ messages[0].tool_calls }}|{{ messages[0].content.nope }}|",
        "{{ unset.attr }}",
        "{{ '%.2f' | format(1.234) }}",
        "{{ messages[0]['content'] is string }} {{ messages is sequence }} {{ messages[0] is mapping }} {{ 1 is number }} {{ true is boolean }}",
        "{{ [1, 2] | join }} {{ ['a', true, none] | join(',') }} {{ 1.0 | string }} {{ true | string }}",
        "{{ 'abc'.startswith(('a', 'z')) }} {{ 'a-b'.replace('-', '+') }} {{ '  a '.lstrip() }}| {{ 'x'.rstrip('x') }}|",
        "{{ (messages | last).role }} {{ messages[1:] | length }} {{ 'abc'[1:] }}",
        "{% set x = namespace(a=1) %}{% set x.a = x.a + 1 %}{{ x.a }}",
        "{% if true %}\n  a\n{% endif %}\n  b  \n{% for i in [1,2] %}\n{{ i }}\n{% endfor %}\n",
        "{{ dict(a=1) }} {{ {'a': 1}.get('b', 2) }} {{ {'a': 1}['a'] }}",
        "{{ 5 | float }} {{ '3' | int + 1 }} {{ 2.7 | int }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }}",
        "{{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 1.25 | round(1, 'floor') }} {{ 1.21 | round(1, method='ceil') }} {{ 7 | round }}",
        "{{ 0.125 | round(2) }} {{ 0.375 | round(2) }} {{ -2.5 | round }} {{ 1234.5 | round(-2) }} {{ 1.0000005 | round(6) }} {{ 2.5e-7 | round(7) }}",
        "{{ messages | tojson }}",
        "{{ 'abc' | length }} {{ unset | length }} {{ [] | length }}",
        "{{ 'ab' * 3 }} {{ [1] + [2] }} {{ 10 % 3 }}",
    ];
    let case = ChatTemplateInput {
        messages: vec![
            json!({"role": "user", "content": "hi"}),
            json!({"role": "assistant", "content": "yo"}),
        ],
        ..Default::default()
    };
    let want = transformers_snippets(&snippets, &case);
    let mut diffs = Vec::new();
    for (s, w) in snippets.iter().zip(want) {
        let got = ChatTemplate::new(s, &[])
            .and_then(|t| t.render(&case))
            .map_err(|e| e.to_string());
        let same = match (&got, &w) {
            (Ok(a), Ok(b)) => a == b,
            (Err(_), Err(_)) => true,
            _ => false,
        };
        if !same {
            diffs.push(format!("{s}\n   rust: {got:?}\n   py:   {w:?}"));
        }
    }
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
}

#[test]
fn shared_types_are_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<ChatTemplate>();
    check::<crate::Tokenizer>();
    check::<crate::IncrementalDetokenizer>();
    check::<crate::StopMatcher>();
}
