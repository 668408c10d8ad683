use serde_json::{json, Value};

use super::*;
use crate::logprobs::TokenTexts;
use crate::parsers::tools::{ToolFormat, ToolMode, ToolSettings};
use crate::validate::prompt::ChatOutput;

fn message() -> Message {
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
    let markers = crate::parsers::reasoning::markers_of("deepseek_r1");
    let choice = ChatChoiceState::new(
        0,
        &chat,
        markers,
        None,
        Arc::new(TokenTexts::new(tokenizer)),
    );
    Message::new("msg_1".into(), Arc::from("tiny"), 7, choice)
}

fn piece(text: &str, finish: Option<&'static str>) -> Piece {
    Piece {
        text: text.into(),
        finish,
        ..Piece::default()
    }
}

/// The (event name, data) pairs of an SSE body.
fn events(buf: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(buf).unwrap();
    assert!(text.ends_with("\n\n"), "{text}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "{e}");
            (name, data)
        })
        .collect()
}

const PIECES: [(&str, Option<&str>); 4] = [
    ("<think>hmm", None),
    (" ok</think>Hi", None),
    (
        " there<tool_call>{\"name\": \"f\", \"arguments\": {\"a\"",
        None,
    ),
    (": 1}}</tool_call>", Some("stop")),
];

#[test]
fn a_stream_opens_each_block_in_turn_and_closes_with_the_stop_reason() {
    let mut m = message();
    let mut buf = Vec::new();
    m.open(&mut buf);
    for (text, finish) in PIECES {
        m.piece(piece(text, finish), Some(&mut buf));
    }
    m.close(&mut buf, Usage::new(7, 9).with_cached(4));
    let evs = events(&buf);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(
        evs[0].1,
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "tiny", "content": [], "stop_reason": null,
               "stop_sequence": null, "usage": {"input_tokens": 7, "output_tokens": 0}}})
    );
    assert_eq!(evs[1].1, json!({"type": "ping"}));
    assert_eq!(
        evs[2].1,
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    );
    assert_eq!(
        evs[3].1,
        json!({"type": "content_block_delta", "index": 0,
               "delta": {"type": "thinking_delta", "thinking": "hmm"}})
    );
    assert_eq!(
        evs[6].1,
        json!({"type": "content_block_start", "index": 1,
               "content_block": {"type": "text", "text": ""}})
    );
    assert_eq!(
        evs[8].1["delta"],
        json!({"type": "text_delta", "text": " there"})
    );
    let start = &evs[10].1["content_block"];
    assert_eq!(start["type"], "tool_use");
    assert_eq!(start["name"], "f");
    assert_eq!(start["input"], json!({}));
    assert!(start["id"].as_str().unwrap().starts_with("call_"));
    let json_text: String = evs[11..13]
        .iter()
        .map(|(_, e)| {
            assert_eq!(e["delta"]["type"], "input_json_delta");
            e["delta"]["partial_json"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json_text).unwrap(),
        json!({"a": 1})
    );
    assert_eq!(evs[13].1, json!({"type": "content_block_stop", "index": 2}));
    assert_eq!(
        evs[14].1,
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 4, "output_tokens": 9}})
    );
    assert_eq!(evs[15].1, json!({"type": "message_stop"}));
}

#[test]
fn the_whole_message_has_the_blocks_in_generation_order() {
    let mut m = message();
    for (text, finish) in PIECES {
        m.piece(piece(text, finish), None);
    }
    let body: Value = serde_json::from_slice(&m.body(Usage::new(7, 9).with_cached(4))).unwrap();
    let id = body["content"][2]["id"].clone();
    assert_eq!(
        body,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "tiny",
               "content": [{"type": "thinking", "thinking": "hmm ok", "signature": ""},
                           {"type": "text", "text": "Hi there"},
                           {"type": "tool_use", "id": id, "name": "f", "input": {"a": 1}}],
               "stop_reason": "tool_use", "stop_sequence": null,
               "usage": {"input_tokens": 3, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 4, "output_tokens": 9}})
    );
    let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "type",
            "role",
            "model",
            "content",
            "stop_reason",
            "stop_sequence",
            "usage"
        ]
    );
}

#[test]
fn stop_reasons_map_the_chat_finish() {
    let cases = [
        (Some("stop"), None, "end_turn", Value::Null),
        (Some("stop"), Some("STOP"), "stop_sequence", json!("STOP")),
        (Some("length"), None, "max_tokens", Value::Null),
        (Some("length"), Some("STOP"), "max_tokens", Value::Null),
        (Some("abort"), None, "end_turn", Value::Null),
    ];
    for (finish, stop, reason, shown) in cases {
        let mut m = message();
        let mut p = piece("hello", finish);
        p.stop_sequence = stop.map(str::to_owned);
        m.piece(p, None);
        let body: Value = serde_json::from_slice(&m.body(Usage::new(7, 1))).unwrap();
        assert_eq!(body["stop_reason"], reason, "{finish:?} {stop:?}");
        assert_eq!(body["stop_sequence"], shown);
        assert_eq!(body["content"], json!([{"type": "text", "text": "hello"}]));
        let mut buf = Vec::new();
        m.close(&mut buf, Usage::new(7, 1));
        let evs = events(&buf);
        assert_eq!(evs[0].1["delta"]["stop_reason"], reason);
        assert_eq!(evs[0].1["delta"]["stop_sequence"], shown);
    }
}

#[test]
fn a_call_cut_short_has_an_empty_input_and_no_output_has_no_blocks() {
    assert_eq!(input_of("{\"a\": "), json!({}));
    assert_eq!(input_of("[1]"), json!({}));
    assert_eq!(
        input_of("{\"b\":1,\"a\":2}").to_string(),
        "{\"b\":1,\"a\":2}"
    );
    let mut m = message();
    let mut buf = Vec::new();
    m.piece(piece("", Some("length")), Some(&mut buf));
    assert!(buf.is_empty());
    m.close(&mut buf, Usage::new(7, 0));
    let names: Vec<String> = events(&buf).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["message_delta", "message_stop"]);
    assert!(m.blocks().is_empty());
}
