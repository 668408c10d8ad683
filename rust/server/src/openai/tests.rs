use super::*;
use serde_json::json;

#[test]
fn prompt_forms() {
    let p = |v: Value| serde_json::from_value::<PromptInput>(v);
    assert_eq!(p(json!("hi")).unwrap(), PromptInput::Text("hi".into()));
    assert_eq!(p(json!([1, 2])).unwrap(), PromptInput::Tokens(vec![1, 2]));
    assert_eq!(
        p(json!(["a"])).unwrap(),
        PromptInput::Texts(vec!["a".into()])
    );
    assert_eq!(
        p(json!([[3]])).unwrap(),
        PromptInput::TokenLists(vec![vec![3]])
    );
    let err = p(json!(5)).unwrap_err().to_string();
    assert!(
        err.contains("a string, a list of strings, a list of token ids"),
        "{err}"
    );
    assert!(p(json!([-1])).is_err());
}

#[test]
fn message_content_forms() {
    let m: ChatMessage = serde_json::from_value(json!({
        "role": "user", "content": [{"type": "text", "text": "a"}]
    }))
    .unwrap();
    assert_eq!(
        m.content,
        Some(MessageContent::Parts(vec![ContentPart {
            kind: "text".into(),
            text: Some("a".into())
        }]))
    );
    // a key no message has is dropped (as vLLM does)
    let extra: ChatMessage = serde_json::from_value(json!({"role": "user", "x": 1})).unwrap();
    assert_eq!((extra.role.as_str(), extra.content), ("user", None));
    assert!(serde_json::from_value::<ChatMessage>(json!({"content": "hi"})).is_err());
}

#[test]
fn chunk_shapes() {
    let header = Header {
        id: "chatcmpl-1",
        object: "chat.completion.chunk",
        created: 7,
        model: "m",
    };
    let choices = vec![ChatChunkChoice {
        index: 0,
        delta: Delta {
            role: Some("assistant"),
            content: Some(String::new()),
            ..Delta::default()
        },
        logprobs: None,
        finish_reason: None,
        token_ids: None,
    }];
    let v = serde_json::to_value(ChatChunk {
        header,
        choices,
        usage: None,
        prompt_logprobs: None,
        prompt_token_ids: None,
    })
    .unwrap();
    assert_eq!(
        v,
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7,
               "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant",
               "content": ""}, "logprobs": null, "finish_reason": null}]})
    );
    let header = Header {
        id: "cmpl-1",
        object: "text_completion",
        created: 7,
        model: "m",
    };
    let v = serde_json::to_value(Completion {
        header,
        choices: Vec::new(),
        usage: Some(Usage::new(3, 4).with_cached(2)),
    })
    .unwrap();
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
               "prompt_tokens_details": {"cached_tokens": 2}})
    );
    assert_eq!(
        serde_json::to_value(Usage::new(3, 0)).unwrap()["prompt_tokens_details"],
        json!({"cached_tokens": 0}),
        "a fresh prompt's usage still has its details (vLLM's shape)"
    );
    assert_eq!(v["choices"], json!([]));
}

#[test]
fn message_fields_appear_when_they_apply() {
    let plain = AssistantMessage {
        role: "assistant",
        content: Some("hi".into()),
        reasoning_content: None,
        tool_calls: Vec::new(),
    };
    assert_eq!(
        serde_json::to_value(plain).unwrap(),
        json!({"role": "assistant", "content": "hi"})
    );
    let calls = AssistantMessage {
        role: "assistant",
        content: None,
        reasoning_content: Some(None),
        tool_calls: vec![ToolCallOut {
            id: "call_1".into(),
            kind: "function",
            function: Function {
                name: "f".into(),
                arguments: "{}".into(),
            },
        }],
    };
    assert_eq!(
        serde_json::to_value(calls).unwrap(),
        json!({"role": "assistant", "content": null, "reasoning_content": null,
               "tool_calls": [{"id": "call_1", "type": "function",
                               "function": {"name": "f", "arguments": "{}"}}]})
    );
}

#[test]
fn tool_call_deltas_omit_absent_fields() {
    let first = ToolCallDelta {
        index: 1,
        id: Some("call_1".into()),
        kind: Some("function"),
        function: FunctionDelta {
            name: Some("f".into()),
            arguments: String::new(),
        },
    };
    assert_eq!(
        serde_json::to_value(first).unwrap(),
        json!({"index": 1, "id": "call_1", "type": "function",
               "function": {"name": "f", "arguments": ""}})
    );
    let later = ToolCallDelta {
        index: 1,
        id: None,
        kind: None,
        function: FunctionDelta {
            name: None,
            arguments: "{}".into(),
        },
    };
    assert_eq!(
        serde_json::to_value(later).unwrap(),
        json!({"index": 1, "function": {"arguments": "{}"}})
    );
}
