use serde_json::{json, Value};

use super::*;
use crate::logprobs::TokenTexts;
use crate::parsers::tools::{ToolFormat, ToolMode, ToolSettings};

fn chat(mode: ToolMode, parallel: bool) -> ChatOutput {
    ChatOutput {
        tools: ToolSettings {
            tools: Some(vec![json!({"type": "function", "function": {"name": "f"}})]),
            mode,
            name: None,
            parallel,
        },
        tool_format: Some(ToolFormat::Hermes),
        prefilled: false,
        constrained: false,
        reasoning_inside: false,
        echo: None,
    }
}

fn state(chat: &ChatOutput) -> ChatChoiceState {
    let model = crate::testutil::tiny_model_dir();
    let (tokenizer, _) = crate::text::load_text(model.path(), None).unwrap();
    ChatChoiceState::new(0, chat, None, None, Arc::new(TokenTexts::new(tokenizer)))
}

fn piece(text: &str, finish: Option<&'static str>) -> Piece {
    Piece {
        text: text.into(),
        finish,
        ..Piece::default()
    }
}

#[test]
fn a_call_streams_as_a_first_delta_then_argument_pieces() {
    let mut s = state(&chat(ToolMode::Auto, true));
    let pieces = [
        ("Hi <tool_", None),
        ("call>{\"name\": \"f\", \"arguments\": {\"a\"", None),
        (": 1}}</tool_call>", Some("stop")),
    ];
    let mut deltas = Vec::new();
    let mut finish = None;
    for (text, end) in pieces {
        let mut d = s.step(piece(text, end));
        finish = d.finish;
        deltas.push(serde_json::to_value(d.delta()).unwrap());
    }
    assert_eq!(deltas[0], json!({"content": "Hi "}));
    let first = &deltas[1]["tool_calls"][0];
    assert_eq!(first["index"], 0);
    assert_eq!(first["type"], "function");
    assert!(first["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(
        first["function"],
        json!({"name": "f", "arguments": "{\"a\""})
    );
    assert_eq!(
        deltas[2],
        json!({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})
    );
    assert_eq!(finish, Some("tool_calls"));
    let choice = serde_json::to_value(s.choice()).unwrap();
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Hi ");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["id"], first["id"]);
    assert_eq!(
        call["function"],
        json!({"name": "f", "arguments": "{\"a\": 1}"})
    );
}

#[test]
fn a_call_cut_by_length_keeps_its_arguments_and_finish() {
    let mut s = state(&chat(ToolMode::Auto, true));
    s.step(piece(
        "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": ",
        None,
    ));
    let d = s.step(piece("[1", Some("length")));
    assert_eq!(d.finish, Some("length"));
    let choice = serde_json::to_value(s.choice()).unwrap();
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(choice["message"]["content"], Value::Null);
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"]["arguments"],
        "{\"a\": [1"
    );
}

#[test]
fn bad_output_is_content_and_finishes_as_the_engine_said() {
    let mut s = state(&chat(ToolMode::Auto, true));
    let text = "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>";
    let d = s.step(piece(text, Some("stop")));
    assert_eq!(d.finish, Some("stop"));
    let choice = serde_json::to_value(s.choice()).unwrap();
    assert_eq!(
        choice["message"],
        json!({"role": "assistant", "content": text})
    );
}

#[test]
fn reasoning_tokens_are_counted_where_the_answer_is_split() {
    let model = crate::testutil::tiny_model_dir();
    let (tokenizer, _) = crate::text::load_text(model.path(), None).unwrap();
    let texts = Arc::new(TokenTexts::new(tokenizer));
    let markers = crate::parsers::reasoning::markers_of("qwen3");
    let run = |chat: &ChatOutput, markers| {
        let mut s = ChatChoiceState::new(0, chat, markers, None, Arc::clone(&texts));
        // The prompt left <think> open: "why", "</think>", "Hi", the stop token.
        let mut p = piece("why</think>Hi", Some("stop"));
        p.token_offsets = vec![0, 3, 11, 13];
        let delta = s.step(p);
        (s.reasoning_tokens(), delta.reasoning, delta.content)
    };
    let mut open = chat(ToolMode::Auto, true);
    open.reasoning_inside = true;
    assert_eq!(run(&open, markers), (Some(2), "why".into(), "Hi".into()));
    // A structured-output constraint: no split, nothing counted, but still reported.
    let constrained = ChatOutput {
        constrained: true,
        ..open.clone()
    };
    let unsplit = (Some(0), String::new(), "why</think>Hi".to_owned());
    assert_eq!(run(&constrained, markers), unsplit);
    // A server without a reasoning parser reports none.
    assert_eq!(run(&open, None).0, None);
}

/// A delta as [`shown`] sees it: reasoning, content, whether it has logprobs, token ids.
type Shown = (String, String, bool, Option<Vec<u32>>);

/// Each delta, then the whole choice, of an answer whose prompt left `<think>` open:
/// "why" (token 5), "</think>Hi" (6, 7), shown as `extras` ask (`markers`: the server's
/// reasoning parser).
fn shown(extras: &Extras, markers: Option<ReasoningMarkers>) -> (Vec<Shown>, Value) {
    let model = crate::testutil::tiny_model_dir();
    let (tokenizer, _) = crate::text::load_text(model.path(), None).unwrap();
    let mut open = chat(ToolMode::Auto, true);
    open.reasoning_inside = true;
    let mut s = ChatChoiceState::new(
        0,
        &open,
        markers,
        Some(0),
        Arc::new(TokenTexts::new(tokenizer)),
    )
    .shown(extras);
    let logprobs = |ids: &[u32]| {
        ids.iter()
            .map(|&id| vrs_wire::TokenLogprobs {
                token_id: id,
                logprob: -0.5,
                rank: 1,
                top_token_ids: vec![],
                top_logprobs: vec![],
            })
            .collect()
    };
    let pieces = [
        ("why", None, vec![5]),
        ("</think>Hi", Some("stop"), vec![6, 7]),
    ];
    let deltas = pieces
        .into_iter()
        .map(|(text, finish, ids)| {
            let mut p = piece(text, finish);
            p.logprobs = logprobs(&ids);
            p.token_offsets = (0..ids.len()).collect();
            p.token_ids = ids;
            let d = s.step(p);
            (d.reasoning, d.content, d.logprobs.is_some(), d.token_ids)
        })
        .collect();
    (deltas, serde_json::to_value(s.choice()).unwrap())
}

#[test]
fn include_and_separate_reasoning_show_it_as_vllm() {
    let markers = crate::parsers::reasoning::markers_of("qwen3");
    let ids = Extras {
        token_ids: true,
        ..Extras::default()
    };
    let (deltas, whole) = shown(&ids, markers);
    assert_eq!(
        deltas,
        [
            ("why".into(), String::new(), true, Some(vec![5])),
            (String::new(), "Hi".into(), true, Some(vec![6, 7]))
        ]
    );
    assert_eq!(whole["message"]["reasoning_content"], "why");
    assert_eq!(whole["token_ids"], json!([5, 6, 7]));
    // include_reasoning false: no reasoning, and no logprobs or token ids that show it.
    let hidden = Extras {
        include_reasoning: false,
        ..ids.clone()
    };
    let (deltas, whole) = shown(&hidden, markers);
    assert_eq!(
        deltas,
        [
            (String::new(), String::new(), false, None),
            (String::new(), "Hi".into(), false, None)
        ]
    );
    assert_eq!(
        whole,
        json!({"index": 0, "message": {"role": "assistant", "content": "Hi",
               "reasoning_content": null}, "logprobs": null, "finish_reason": "stop"})
    );
    // ... which needs a reasoning parser: without one there is none to hide.
    let (deltas, whole) = shown(&hidden, None);
    assert_eq!(
        deltas[0],
        (String::new(), "why".into(), true, Some(vec![5]))
    );
    assert_eq!(whole["token_ids"], json!([5, 6, 7]));
    // separate_reasoning false: the reasoning is content, in generation order.
    let merged = Extras {
        separate_reasoning: false,
        ..ids
    };
    let (deltas, whole) = shown(&merged, markers);
    assert_eq!(
        deltas,
        [
            (String::new(), "why".into(), true, Some(vec![5])),
            (String::new(), "Hi".into(), true, Some(vec![6, 7]))
        ]
    );
    assert_eq!(whole["message"]["content"], "whyHi");
    assert_eq!(whole["message"]["reasoning_content"], Value::Null);
}

#[test]
fn ids_as_tokens_name_the_chat_logprobs() {
    let extras = Extras {
        ids_as_tokens: true,
        ..Extras::default()
    };
    let (_, whole) = shown(&extras, None);
    let first = &whole["logprobs"]["content"][0];
    assert_eq!(first["token"], "token_id:5");
    assert_eq!(first["bytes"], json!(b"foo".to_vec()));
}
