//! The shared case table `tests/parser_cases/select.jsonl` (as
//! `tests/server/test_select.py`), and the settings' checks.

use serde::Deserialize;
use serde_json::Value;

use super::*;

const CASES: &str = include_str!("../../../../../tests/parser_cases/select.jsonl");

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    template: Option<String>,
    config: Option<Value>,
    tool: Option<String>,
    reasoning: Option<String>,
    reason: String,
}

#[test]
fn the_case_table() {
    let mut count = 0;
    for line in CASES.lines().filter(|l| !l.trim().is_empty()) {
        let case: Case = serde_json::from_str(line).expect("a case of select.jsonl");
        let tool = tool_parser(Some("auto"), case.template.as_deref(), case.config.as_ref())
            .expect("auto never fails");
        let reasoning = reasoning_parser(None, case.template.as_deref()).expect("auto");
        assert_eq!(tool.name, case.tool.as_deref(), "{}: {tool}", case.name);
        assert_eq!(reasoning.name, case.reasoning.as_deref(), "{}", case.name);
        assert!(
            tool.reason.contains(&case.reason),
            "{}: {:?} lacks {:?}",
            case.name,
            tool.reason,
            case.reason
        );
        count += 1;
    }
    assert!(count >= 10);
}

#[test]
fn settings() {
    assert_eq!(
        tool_parser(Some("granite"), Some("<tool_call></tool_call>"), None),
        Ok(explicit(Some("granite")))
    );
    assert_eq!(tool_parser(Some("none"), None, None), Ok(explicit(None)));
    let bad = tool_parser(Some("xml"), None, None).unwrap_err();
    assert!(
        bad.contains("qwen3_coder") && bad.contains("\"xml\""),
        "{bad}"
    );
    assert!(check_tool_setting(None).is_ok());
    assert_eq!(
        reasoning_parser(Some("mistral"), None),
        Ok(explicit(Some("mistral")))
    );
    assert_eq!(
        reasoning_parser(Some("none"), Some("<think>")),
        Ok(explicit(None))
    );
    let openai = reasoning_parser(Some("openai"), None).unwrap_err();
    assert!(
        openai.contains("not supported") && openai.contains("granite"),
        "{openai}"
    );
    assert!(check_reasoning_setting(Some("o1"))
        .unwrap_err()
        .contains("deepseek_r1"));
    let shown = tool_parser(None, Some("<tool_call></tool_call>"), None).map(|c| c.to_string());
    assert_eq!(
        shown.as_deref(),
        Ok("hermes (auto: chat template has <tool_call> and </tool_call>)")
    );
}

#[test]
fn config_json_of_a_directory() {
    let dir = std::env::temp_dir().join(format!("vrs-select-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    assert_eq!(model_config(&dir), None);
    std::fs::write(dir.join("config.json"), r#"{"model_type": "llama"}"#).expect("written");
    let config = model_config(&dir);
    assert_eq!(
        tool_parser(None, None, config.as_ref()).map(|c| c.name),
        Ok(Some("llama3_json"))
    );
    std::fs::write(dir.join("config.json"), "[1]").expect("written");
    assert_eq!(model_config(&dir), None);
    std::fs::remove_dir_all(&dir).expect("removed");
}

const TOOL_FORMATS: &str = include_str!("../../../../../server/contracts/tool_formats.json");
const REASONING_FORMATS: &str =
    include_str!("../../../../../server/contracts/reasoning_formats.json");

/// A contract file's `auto.template` rules, read as plain JSON.
fn rules(file: &str) -> Vec<(Vec<String>, String)> {
    let file: Value = serde_json::from_str(file).expect("a contract file is JSON");
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    file["auto"]["template"]
        .as_array()
        .map(|rules| {
            rules
                .iter()
                .map(|r| {
                    (
                        strs(&r["all"]),
                        r["parser"].as_str().unwrap_or_default().into(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Each template rule picks its parser from a template holding just its strings (no
/// earlier rule matches it), each model type its parser (the Python twin:
/// `test_the_auto_choice_is_the_files` in `tests/server/test_contracts.py`).
#[test]
fn the_auto_choice_is_the_files() {
    type Choose = fn(&str) -> Choice;
    let tool: Choose = |t| tool_parser(None, Some(t), None).expect("auto");
    let reasoning: Choose = |t| reasoning_parser(None, Some(t)).expect("auto");
    for (file, choose) in [(TOOL_FORMATS, tool), (REASONING_FORMATS, reasoning)] {
        let table = rules(file);
        assert!(table.len() >= 4);
        for (i, (strings, parser)) in table.iter().enumerate() {
            let template = strings.join(" ");
            let earlier = table[..i]
                .iter()
                .any(|(e, _)| e.iter().all(|m| template.contains(m.as_str())));
            assert!(!earlier, "{strings:?}");
            let choice = choose(&template);
            assert_eq!(choice.name, Some(parser.as_str()), "{strings:?}");
            assert_eq!(
                choice.reason,
                format!("auto: chat template has {}", strings.join(" and "))
            );
        }
    }
    let file: Value = serde_json::from_str(TOOL_FORMATS).expect("JSON");
    let types = file["auto"]["model_type"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(types.len() >= 10);
    for (model_type, parser) in types {
        let config = serde_json::json!({ "model_type": model_type });
        let choice = tool_parser(None, None, Some(&config)).expect("auto");
        assert_eq!(choice.name, parser.as_str(), "{model_type}");
    }
}
