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
    assert_eq!(ContentFormatOption::parse(None), Ok(ContentFormatOption::Auto));
    assert_eq!(
        ContentFormatOption::parse(Some("openai")),
        Ok(ContentFormatOption::Fixed(ContentFormat::OpenAi))
    );
    let err = ContentFormatOption::parse(Some("list")).unwrap_err();
    assert!(err.contains("auto, string, openai") && err.contains("\"list\""), "{err}");
    let (format, why) = ContentFormatOption::Auto.resolve(ContentFormat::OpenAi);
    assert_eq!(format, ContentFormat::OpenAi);
    assert!(why.starts_with("auto: "), "{why}");
    let fixed = ContentFormatOption::Fixed(ContentFormat::String);
    assert_eq!(fixed.resolve(ContentFormat::OpenAi).0, ContentFormat::String);
}

#[test]
fn string_joins_parts_and_openai_makes_lists() {
    let parts = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
    assert_eq!(convert(Some(&parts), ContentFormat::String), Some(json!("a\nb")));
    assert_eq!(convert(Some(&json!("s")), ContentFormat::String), Some(json!("s")));
    assert_eq!(convert(None, ContentFormat::String), None);
    assert_eq!(convert(Some(&json!(null)), ContentFormat::String), None);
    assert_eq!(convert(Some(&parts), ContentFormat::OpenAi), Some(parts.clone()));
    assert_eq!(
        convert(Some(&json!("s")), ContentFormat::OpenAi),
        Some(json!([{"type": "text", "text": "s"}]))
    );
    assert_eq!(convert(None, ContentFormat::OpenAi), Some(json!([])));
}
