use serde_json::{json, Value};

use super::*;
use crate::logprobs::TokenTexts;
use crate::parsers::tools::{ToolFormat, ToolMode, ToolSettings};
use crate::routes::responses::request::translate;
use crate::validate::prompt::ChatOutput;

fn shapes(reasoning: bool) -> ResponseEvents {
    let chat = ChatOutput {
        tools: ToolSettings {
            tools: Some(vec![json!({"type": "function", "function": {"name": "f"}})]),
            mode: ToolMode::Auto,
            name: None,
            parallel: true,
        },
        tool_format: Some(ToolFormat::Hermes),
        prefilled: false,
        constrained: false,
        reasoning_inside: false,
        echo: None,
    };
    let model = crate::testutil::tiny_model_dir();
    let (tokenizer, _) = crate::text::load_text(model.path(), None).unwrap();
    let markers = reasoning
        .then(|| crate::parsers::reasoning::markers_of("deepseek_r1"))
        .flatten();
    let choice = ChatChoiceState::new(
        0,
        &chat,
        markers,
        None,
        Arc::new(TokenTexts::new(tokenizer)),
    );
    let echo = translate(br#"{"input": "x", "metadata": {"k": "v"}}"#)
        .unwrap()
        .echo;
    ResponseEvents::new(
        &"ab".repeat(16),
        7,
        Arc::from("tiny"),
        echo,
        choice,
        (Some("p"), &[1, 2, 3]),
    )
}

fn piece(text: &str, finish: Option<&'static str>) -> Piece {
    Piece {
        text: text.into(),
        finish,
        ..Piece::default()
    }
}

/// The (event line type, payload) of each event; checks the framing and the sequence.
fn parse(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("\n\n"), "{text}");
    let events: Vec<Value> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (head, data) = e.split_once('\n').unwrap();
            let kind = head.strip_prefix("event: ").unwrap();
            let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(v["type"], kind);
            let keys: Vec<&String> = v.as_object().unwrap().keys().take(2).collect();
            assert_eq!(keys, ["type", "sequence_number"]);
            v
        })
        .collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    events
}

fn run(s: &mut ResponseEvents, pieces: &[(&str, Option<&'static str>)]) -> Vec<Value> {
    let mut buf = Vec::new();
    s.start(&mut buf);
    for (text, finish) in pieces {
        s.step(piece(text, *finish), Some(&mut buf));
    }
    s.finish(&mut buf, Usage::new(4, 3).with_cached(2));
    parse(&buf)
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn text_streams_as_one_message_item() {
    let mut s = shapes(false);
    let events = run(&mut s, &[(" foo", None), (" bar", Some("stop"))]);
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let created = &events[0]["response"];
    assert_eq!(created["id"], format!("resp_{}", "ab".repeat(16)));
    assert_eq!(
        (
            created["status"].as_str(),
            &created["output"],
            &created["usage"]
        ),
        (Some("in_progress"), &json!([]), &Value::Null)
    );
    let item_id = events[2]["item"]["id"].as_str().unwrap();
    assert!(item_id.starts_with("msg_") && item_id.len() == 36);
    assert_eq!(
        events[2]["item"],
        json!({"id": item_id, "type": "message",
        "status": "in_progress", "role": "assistant", "content": []})
    );
    assert_eq!(
        events[3],
        json!({"type": "response.content_part.added", "sequence_number": 3,
        "item_id": item_id, "output_index": 0, "content_index": 0,
        "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}})
    );
    assert_eq!(
        events[5],
        json!({"type": "response.output_text.delta", "sequence_number": 5,
        "item_id": item_id, "output_index": 0, "content_index": 0, "delta": " bar",
        "logprobs": []})
    );
    assert_eq!(
        events[6],
        json!({"type": "response.output_text.done", "sequence_number": 6,
        "item_id": item_id, "output_index": 0, "content_index": 0, "text": " foo bar",
        "logprobs": []})
    );
    let message = json!({"id": item_id, "type": "message", "status": "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": " foo bar",
        "annotations": [], "logprobs": []}]});
    assert_eq!(events[8]["item"], message);
    let done = &events[9]["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"], json!([message]));
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 4, "input_tokens_details":
        {"cached_tokens": 2, "cache_write_tokens": 0}, "output_tokens": 3, "output_tokens_details":
        {"reasoning_tokens": 0}, "total_tokens": 7})
    );
    let keys: Vec<&str> = done
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "object",
            "created_at",
            "status",
            "error",
            "incomplete_details",
            "instructions",
            "max_output_tokens",
            "model",
            "output",
            "parallel_tool_calls",
            "previous_response_id",
            "reasoning",
            "store",
            "temperature",
            "text",
            "tool_choice",
            "tools",
            "top_logprobs",
            "top_p",
            "truncation",
            "usage",
            "user",
            "metadata"
        ]
    );
    assert_eq!(done["metadata"], json!({"k": "v"}));
    assert_eq!(
        (done["model"].as_str(), done["created_at"].as_u64()),
        (Some("tiny"), Some(7))
    );
}

#[test]
fn reasoning_then_content_then_calls() {
    let mut s = shapes(true);
    let pieces = [
        ("<think>plan", None),
        (" it</think>Sure", None),
        (" <tool_call>{\"name\": \"f\", \"arguments\": {\"a\"", None),
        (": 1}}</tool_call>\n<tool_call>{\"name\": \"f\", ", None),
        ("\"arguments\": {}}</tool_call>", Some("stop")),
    ];
    let events = run(&mut s, &pieces);
    let expected = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ];
    assert_eq!(types(&events), expected);
    let output = &events.last().unwrap()["response"]["output"];
    let reasoning = &output[0];
    assert!(reasoning["id"].as_str().unwrap().starts_with("rs_"));
    assert_eq!(
        reasoning["content"],
        json!([{"type": "reasoning_text", "text": "plan it"}])
    );
    assert_eq!(reasoning["summary"], json!([]));
    assert_eq!(output[1]["content"][0]["text"], "Sure ");
    let call = &output[2];
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(
        (call["name"].as_str(), call["arguments"].as_str()),
        (Some("f"), Some("{\"a\": 1}"))
    );
    // the hermes parser drops the whitespace between calls: no message item there
    assert_eq!(output[3]["arguments"], "{}");
    assert_ne!(output[3]["call_id"], call["call_id"]);
    assert_eq!(output.as_array().unwrap().len(), 4);
    let added = &events[16];
    assert_eq!(added["item"]["arguments"], "");
    assert_eq!(added["item"]["status"], "in_progress");
    let done = &events[19];
    assert_eq!(
        done,
        &json!({"type": "response.function_call_arguments.done",
        "sequence_number": 19, "item_id": call["id"], "output_index": 2, "name": "f",
        "arguments": "{\"a\": 1}"})
    );
    assert_eq!(
        events[2]["item"],
        json!({"id": reasoning["id"], "type": "reasoning",
        "summary": [], "content": [], "status": "in_progress"})
    );
    assert_eq!(
        events[3]["part"],
        json!({"type": "reasoning_text", "text": ""})
    );
    assert_eq!(events[6]["text"], "plan it");
    assert_eq!(
        events[7]["part"],
        json!({"type": "reasoning_text", "text": "plan it"})
    );
}

#[test]
fn the_whole_response_matches_the_stream() {
    let pieces = [("<think>r</think>a", None), (" b", Some("length"))];
    let mut streamed = shapes(true);
    let events = run(&mut streamed, &pieces);
    assert_eq!(events.last().unwrap()["type"], "response.incomplete");
    let mut whole = shapes(true);
    for (text, finish) in pieces {
        whole.step(piece(text, finish), None);
    }
    let body: Value = serde_json::from_slice(&whole.body(Usage::new(4, 3))).unwrap();
    assert_eq!(body["status"], "incomplete");
    assert_eq!(
        body["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    let strip = |v: &Value| -> Value {
        v.as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let mut i = i.clone();
                i["id"] = Value::Null;
                i
            })
            .collect()
    };
    let last = &events.last().unwrap()["response"];
    assert_eq!(strip(&body["output"]), strip(&last["output"]));
    assert_eq!(body["output"][1]["content"][0]["text"], "a b");
}

#[test]
fn nothing_generated_is_no_item_and_a_failure_is_an_error_event() {
    let mut s = shapes(false);
    let events = run(&mut s, &[("", Some("stop"))]);
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.in_progress",
            "response.completed"
        ]
    );
    assert_eq!(events[2]["response"]["output"], json!([]));
    let mut s = shapes(false);
    let mut buf = Vec::new();
    s.start(&mut buf);
    s.step(piece(" foo", None), Some(&mut buf));
    s.failure(&mut buf, &ApiError::EngineError("boom".into()));
    let events = parse(&buf);
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "error", "sequence_number": 5,
        "code": "InternalServerError", "message": "boom", "param": null})
    );
}

#[test]
fn the_usage_counts_the_reasoning_tokens() {
    let mut s = shapes(true);
    let mut buf = Vec::new();
    s.start(&mut buf);
    // Tokens "<think>", "plan", " it", "</think>", "Sure", then the stop token.
    let pieces = [
        ("<think>plan", vec![0, 7], None),
        (" it</think>Sure", vec![11, 14, 22, 26], Some("stop")),
    ];
    for (text, offsets, finish) in pieces {
        let mut p = piece(text, finish);
        p.token_offsets = offsets;
        s.step(p, Some(&mut buf));
    }
    s.finish(&mut buf, Usage::new(4, 6));
    let events = parse(&buf);
    let usage = &events.last().unwrap()["response"]["usage"];
    assert_eq!(usage["output_tokens"], 6);
    assert_eq!(
        usage["output_tokens_details"],
        json!({"reasoning_tokens": 4})
    );
}
