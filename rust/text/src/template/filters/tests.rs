//! The jinja2 filters, tests and Python methods added on top of minijinja, each compared
//! with transformers' own jinja2 environment on the same snippet.

use serde_json::json;

use crate::template::tests::transformers_snippets;
use crate::{ChatTemplate, ChatTemplateInput};

fn render(source: &str, case: &ChatTemplateInput) -> Result<String, String> {
    ChatTemplate::new(source, &[])
        .and_then(|t| t.render(case))
        .map_err(|e| e.to_string())
}

#[test]
fn added_methods_and_filters_match_jinja2() {
    let snippets = [
        // str methods (indices count characters, as Python does)
        "{{ 'héllo'.find('l') }} {{ 'héllo'.rfind('l') }} {{ 'héllo'.index('o') }} {{ 'a'.find('z') }} {{ 'ab'.rindex('b') }}",
        "{{ '  a  b  '.rsplit(none, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a,b,c'.rsplit(',') }} {{ ''.rsplit() }} {{ 'a b c'.rsplit() }}",
        "{{ 'a-b'.partition('-') }} {{ 'a-b-c'.rpartition('-') }} {{ 'ab'.partition('x') }} {{ 'ab'.rpartition('x') }}",
        "{{ '5'.zfill(3) }} {{ '-5'.zfill(4) }} {{ 'a'.ljust(3) }}|{{ 'a'.rjust(3, '.') }}|{{ 'é'.center(4, '*') }}|{{ 'ab'.center(5) }}|{{ 'abc'.center(6) }}|",
        "{{ 'ABC'.casefold() }} {{ 'HeLLo'.swapcase() }} {{ 'x.py'.removesuffix('.py') }} {{ 'pre_x'.removeprefix('pre_') }} {{ 'a\tb'.expandtabs(4) }}",
        "{{ 'Title Case'.istitle() }} {{ 'not Title'.istitle() }} {{ ''.istitle() }}",
        // dict and list methods
        "{{ {'a': 1, 'b': [2]}.items() | list }} {{ {'a': 1}.copy() }} {{ [1, 2, 3].index(3) }}",
        "{% for k, v in {'x': 1, 'y': [2]}.items() %}{{ k }}={{ v }};{% endfor %}",
        // filters
        "{{ {'B': 1, 'a': 2} | dictsort }} {{ {'B': 1, 'a': 2} | dictsort(true) }} {{ {'x': 2, 'y': 1} | dictsort(by='value', reverse=true) }} {{ {'a': 1} | items | list }}",
        "{% for k, v in {'x': 1} | dictsort %}{{ k }}{{ v }}{% endfor %}",
        "{{ 'a b' | wordcount }} {{ 'héllo wörld, 你好_x 42' | wordcount }} {{ 'x' | center(6) }}|",
        "{{ 'The quick brown fox jumps over the lazy dog' | truncate(20) }} {{ 'abcdefghijklmnopqrstuvwxyz' | truncate(10, true, '…') }} {{ 'short' | truncate(3, leeway=0) }}",
        "{{ 'abc' | replace('b', 'B', 1) }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 5 | replace('5', '6') }}",
        "{{ '1_000' | int }} {{ ' 42 ' | int }} {{ '0x1A' | int(0, 16) }} {{ '3.9' | int }} {{ '-3.9' | int }} {{ true | int }} {{ none | int(5) }} {{ 'ff' | int(base=16) }} {{ 2.9 | int }}",
        "{{ '1e3' | float }} {{ ' 2.5 ' | float }} {{ 'abc' | float }} {{ 'x' | float(2.5) }} {{ true | float }} {{ none | float }}",
        "{{ [1, 2.5] | sum }} {{ [] | sum }} {{ [1, 2] | sum(start=10) }} {{ [{'a': 1}, {'a': 2}] | sum(attribute='a') }} {{ [[1], [2]] | sum(attribute='0') }}",
        "{{ 'a b/c?d=é' | urlencode }} {{ {'q': 'a b', 'n': 1} | urlencode }} {{ 5 | filesizeformat }} {{ '<b>x</b>' | striptags }}",
        "{{ {} is sequence }} {{ 'x' is sequence }} {{ [] is sequence }} {{ none is sequence }} {{ 1 is sequence }}",
        "{{ '{\n' | indent(4, first=true) }}|{{ 'a\n\nb\n' | indent(2) }}|{{ 'a\n\nb' | indent('> ', blank=true) }}|{{ 'x\r\ny\u{2028}z' | indent }}|{{ '' | indent(first=true) }}|{{ 'a\nb' | indent(width=-1) }}|",
    ];
    let case = ChatTemplateInput {
        messages: vec![json!({"role": "user", "content": "hi"})],
        ..Default::default()
    };
    let want = transformers_snippets(&snippets, &case);
    let mut diffs = Vec::new();
    for (snippet, want) in snippets.iter().zip(want) {
        let got = render(snippet, &case);
        if got != want {
            diffs.push(format!("{snippet}\n   rust: {got:?}\n   py:   {want:?}"));
        }
    }
    assert!(diffs.is_empty(), "\n{}", diffs.join("\n"));
}

#[test]
fn tuples_print_like_python() {
    let case = ChatTemplateInput::default();
    let got = render(
        "{{ 'a'.partition('a') }} {{ {'k': none}.items() | list }} {{ {'k': 1} | items | first | tojson }}",
        &case,
    );
    assert_eq!(got.as_deref(), Ok("('', 'a', '') [('k', None)] [\"k\", 1]"));
}

#[test]
fn wrong_arguments_are_template_errors() {
    let case = ChatTemplateInput::default();
    for snippet in [
        "{{ 'a'.index('z') }}",
        "{{ 'a'.partition('') }}",
        "{{ 'a'.center(3, 'xy') }}",
        "{{ [1].index(2) }}",
        "{{ 'abc' | truncate(1) }}",
        "{{ {'a': 1} | dictsort(by='nope') }}",
        "{{ ['a'] | sum }}",
        "{{ 3 | items }}",
    ] {
        assert!(render(snippet, &case).is_err(), "{snippet} should fail");
    }
}
