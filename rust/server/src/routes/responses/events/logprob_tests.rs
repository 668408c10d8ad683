//! The output text's logprobs in the items and events: each text delta carries its
//! piece's tokens, the message the ones of its deltas, reasoning none. Mirrors
//! `tests/server/test_responses_logprobs.py`.

use serde_json::{json, Value};

use super::*;
use crate::logprobs::TokenTexts;
use crate::parsers::tools::{ToolMode, ToolSettings};
use crate::routes::responses::request::translate;
use crate::validate::prompt::ChatOutput;
use vrs_wire::TokenLogprobs;

fn shapes(top: Option<usize>) -> (ResponseEvents, Arc<TokenTexts>) {
    let chat = ChatOutput {
        tools: ToolSettings {
            tools: None,
            mode: ToolMode::Auto,
            name: None,
            parallel: true,
        },
        tool_format: None,
        prefilled: false,
        constrained: false,
        reasoning_inside: true,
        echo: None,
    };
    let model = crate::testutil::tiny_model_dir();
    let (tokenizer, _) = crate::text::load_text(model.path(), None).unwrap();
    let texts = Arc::new(TokenTexts::new(tokenizer));
    let markers = crate::parsers::reasoning::markers_of("deepseek_r1");
    let choice = ChatChoiceState::new(0, &chat, markers, top, Arc::clone(&texts));
    let echo = translate(br#"{"input": "x"}"#).unwrap().echo;
    let events = ResponseEvents::new(
        &"cd".repeat(16),
        7,
        Arc::from("tiny"),
        echo,
        choice,
        (Some("p"), &[1, 2, 3]),
    );
    (events, texts)
}

fn entry(token: u32, top: &[u32]) -> TokenLogprobs {
    TokenLogprobs {
        token_id: token,
        logprob: -0.5,
        rank: 1,
        top_token_ids: top.to_vec(),
        top_logprobs: (0..top.len()).map(|i| -0.5 - i as f64).collect(),
    }
}

fn piece(text: &str, finish: Option<&'static str>, logprobs: Vec<TokenLogprobs>) -> Piece {
    Piece {
        text: text.into(),
        finish,
        logprobs,
        ..Piece::default()
    }
}

fn pieces() -> Vec<Piece> {
    vec![
        piece("hmm", None, vec![entry(10, &[10, 11])]),
        piece(
            "</think>Hi",
            None,
            vec![entry(12, &[12, 13]), entry(14, &[14, 15])],
        ),
        piece(" there", Some("stop"), vec![entry(16, &[16, 17])]),
    ]
}

fn parse(bytes: &[u8]) -> Vec<Value> {
    std::str::from_utf8(bytes)
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e.split_once('\n').unwrap().1;
            serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap()
        })
        .collect()
}

#[test]
fn text_deltas_and_the_message_carry_their_tokens_logprobs() {
    let (mut s, texts) = shapes(Some(2));
    let mut buf = Vec::new();
    s.start(&mut buf);
    for p in pieces() {
        s.step(p, Some(&mut buf));
    }
    s.finish(&mut buf, Usage::new(5, 4));
    let events = parse(&buf);
    let deltas: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .collect();
    assert_eq!(
        deltas.iter().map(|d| &d["delta"]).collect::<Vec<_>>(),
        ["Hi", " there"]
    );
    let token = |id: u32| texts.text(id).to_string();
    assert_eq!(
        deltas[1]["logprobs"],
        json!([{"token": token(16), "logprob": -0.5, "top_logprobs": [
            {"token": token(16), "logprob": -0.5}, {"token": token(17), "logprob": -1.5}]}])
    );
    let first: Vec<&Value> = deltas[0]["logprobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|lp| &lp["token"])
        .collect();
    assert_eq!(first, [&json!(token(12)), &json!(token(14))]);
    let done = events
        .iter()
        .find(|e| e["type"] == "response.output_text.done")
        .unwrap();
    let mut both = deltas[0]["logprobs"].as_array().unwrap().clone();
    both.extend(deltas[1]["logprobs"].as_array().unwrap().iter().cloned());
    assert_eq!(done["logprobs"], Value::Array(both));
    let message = &events.last().unwrap()["response"]["output"][1];
    assert_eq!(message["type"], "message");
    let whole = &message["content"][0]["logprobs"];
    let bytes = |id: u32| json!(token(id).as_bytes());
    assert_eq!(
        whole[2],
        json!({"token": token(16), "logprob": -0.5, "bytes": bytes(16), "top_logprobs": [
            {"token": token(16), "logprob": -0.5, "bytes": bytes(16)},
            {"token": token(17), "logprob": -1.5, "bytes": bytes(17)}]})
    );
    assert_eq!(whole.as_array().unwrap().len(), 3);
    let (mut body, _) = shapes(Some(2));
    for p in pieces() {
        body.step(p, None);
    }
    let body: Value = serde_json::from_slice(&body.body(Usage::new(5, 4))).unwrap();
    assert_eq!(&body["output"][1]["content"][0]["logprobs"], whole);
}

#[test]
fn without_include_the_lists_stay_empty() {
    let (mut s, _) = shapes(None);
    let mut buf = Vec::new();
    s.start(&mut buf);
    s.step(
        piece("</think>Hi", Some("stop"), vec![entry(12, &[12])]),
        Some(&mut buf),
    );
    s.finish(&mut buf, Usage::new(5, 1));
    let events = parse(&buf);
    let delta = events
        .iter()
        .find(|e| e["type"] == "response.output_text.delta")
        .unwrap();
    assert_eq!(delta["logprobs"], json!([]));
    let last = &events.last().unwrap()["response"];
    assert_eq!(last["output"][0]["content"][0]["logprobs"], json!([]));
    assert_eq!(last["top_logprobs"], 0);
}
