//! Detection against the shared case table (the Python suite reads the same file), and
//! the content conversions of both formats.

use serde_json::json;

use super::{convert, detect, ContentFormat, ContentFormatOption};

const CASES: &str = include_str!("../../../../../tests/parser_cases/content_format.jsonl");

#[test]
fn detection_matches_the_shared_table() {
    let mut failures = Vec::new();
    let mut count = 0;
    for line in CASES.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).expect("a JSON case");
        let want = match case["format"].as_str() {
            Some("openai") => ContentFormat::OpenAi,
            Some("string") => ContentFormat::String,
            other => panic!("bad format {other:?} in {line}"),
        };
        let template = case["template"].as_str().expect("template");
        let got = detect(&crate::template::jinja::strip_generation_tags(template));
        if got != want {
            failures.push(format!("{}: got {got:?}, want {want:?}", case["name"]));
        }
        count += 1;
    }
    assert!(count >= 25, "the table has {count} cases");
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_option_parses_and_resolves() {
    assert_eq!(
        ContentFormatOption::parse(None),
        Ok(ContentFormatOption::Auto)
    );
    assert_eq!(
        ContentFormatOption::parse(Some("openai")),
        Ok(ContentFormatOption::Fixed(ContentFormat::OpenAi))
    );
    let err = ContentFormatOption::parse(Some("list")).unwrap_err();
    assert!(
        err.contains("auto, string, openai") && err.contains("\"list\""),
        "{err}"
    );
    let (format, why) = ContentFormatOption::Auto.resolve(ContentFormat::OpenAi);
    assert_eq!(format, ContentFormat::OpenAi);
    assert!(why.starts_with("auto: "), "{why}");
    let fixed = ContentFormatOption::Fixed(ContentFormat::String);
    assert_eq!(
        fixed.resolve(ContentFormat::OpenAi).0,
        ContentFormat::String
    );
}

#[test]
fn string_joins_parts_and_openai_makes_lists() {
    let parts = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
    let conv = |c: Option<&serde_json::Value>, f| convert(c, f).map(|c| c.into_owned());
    assert_eq!(
        conv(Some(&parts), ContentFormat::String),
        Some(json!("a\nb"))
    );
    assert_eq!(
        conv(Some(&json!("s")), ContentFormat::String),
        Some(json!("s"))
    );
    assert_eq!(conv(None, ContentFormat::String), None);
    assert_eq!(conv(Some(&json!(null)), ContentFormat::String), None);
    let extra = json!([{"type": "text", "text": "a", "cache_control": {}},
                       {"type": "text", "text": "b"}]);
    assert_eq!(
        conv(Some(&extra), ContentFormat::OpenAi),
        Some(parts.clone())
    );
    assert_eq!(
        conv(Some(&json!("s")), ContentFormat::OpenAi),
        Some(json!([{"type": "text", "text": "s"}]))
    );
    assert_eq!(conv(None, ContentFormat::OpenAi), Some(json!([])));
}

/// Lists parts as they come, strings as they are; a `tool_use` template that does not loop.
const LIST_AWARE: &str = "{% for m in messages %}<{{ m.role }}>{% if m.content is string %}\
    {{ m.content }}{% else %}{% for part in m.content %}[{{ part.text }}]{% endfor %}\
    {% endif %}{% endfor %}";
const PLAIN: &str = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";

fn render(template: &crate::ChatTemplate, tools: bool) -> String {
    let input = crate::ChatTemplateInput {
        messages: vec![
            json!({"role": "user", "content": [{"type": "text", "text": "a"},
                                                {"type": "text", "text": "b"}]}),
            json!({"role": "user", "content": "s"}),
        ],
        tools: tools.then(Vec::new),
        ..Default::default()
    };
    template.render(&input).expect("renders")
}

#[test]
fn the_template_renders_in_its_format() {
    let auto = crate::ChatTemplate::new(LIST_AWARE, &[])
        .expect("compiles")
        .with_content_format(ContentFormatOption::Auto);
    assert_eq!(auto.content_format(false), ContentFormat::OpenAi);
    assert_eq!(render(&auto, false), "<user>[a][b]<user>[s]");
    assert!(auto
        .content_format_line()
        .starts_with("chat template content format: openai (auto: "));
    let string = auto.with_content_format(ContentFormatOption::Fixed(ContentFormat::String));
    assert_eq!(render(&string, false), "<user>a\nb<user>s");
    assert!(string
        .content_format_line()
        .ends_with("(--chat-template-content-format; auto would give openai)"));
}

#[test]
fn without_an_option_the_content_goes_as_given() {
    let raw = crate::ChatTemplate::new(LIST_AWARE, &[]).expect("compiles");
    assert_eq!(render(&raw, false), "<user>[a][b]<user>s");
}

#[test]
fn a_tool_use_template_has_its_own_format() {
    let config = crate::TokenizerConfig {
        chat_templates: vec![
            ("default".to_owned(), LIST_AWARE.to_owned()),
            ("tool_use".to_owned(), PLAIN.to_owned()),
        ],
        ..Default::default()
    };
    let template = crate::ChatTemplate::from_config(&config, None)
        .expect("compiles")
        .with_content_format(ContentFormatOption::Auto);
    assert_eq!(template.content_format(false), ContentFormat::OpenAi);
    assert_eq!(template.content_format(true), ContentFormat::String);
    assert_eq!(render(&template, true), "<user>a\nb<user>s");
    assert!(template
        .content_format_line()
        .contains("; with tools (tool_use template): string (auto: "));
}
