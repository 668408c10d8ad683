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
