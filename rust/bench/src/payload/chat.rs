//! OpenAI completions and chat completions chunks (`data: {...}` and `data: [DONE]`).

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{non_empty, unreadable, Payload};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// What a chat chunk adds to a conversation turn's answer: its text, and the prompt
/// counts of the usage chunk.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TurnChunk {
    pub text: String,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
}

/// The answer text and prompt usage of one chat chunk (nothing for `[DONE]`, an error or
/// data that is not a chunk: [`parse`] reports those).
pub fn turn(data: &[u8]) -> TurnChunk {
    let Ok(chunk) = serde_json::from_slice::<Chunk>(data) else {
        return TurnChunk::default();
    };
    let text = chunk
        .choices
        .first()
        .and_then(|c| c.delta.as_ref())
        .and_then(|d| d.content.as_deref())
        .unwrap_or("")
        .to_string();
    let usage = chunk.usage.as_ref();
    TurnChunk {
        text,
        prompt_tokens: usage.and_then(|u| u.prompt_tokens),
        cached_tokens: usage
            .and_then(|u| u.prompt_tokens_details.as_ref())
            .and_then(|d| d.cached_tokens),
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorBody<'a> {
    Object {
        #[serde(default, borrow)]
        message: Option<Cow<'a, str>>,
    },
    Text(#[serde(borrow)] Cow<'a, str>),
}

pub(super) fn parse(data: &[u8]) -> Result<Payload, String> {
    if data == b"[DONE]" {
        return Ok(Payload::Done);
    }
    let chunk: Chunk = serde_json::from_slice(data).map_err(|e| unreadable(data, e))?;
    if let Some(error) = chunk.error {
        let message = match error {
            ErrorBody::Object { message } => message.map(Cow::into_owned),
            ErrorBody::Text(text) => Some(text.into_owned()),
        };
        return Ok(Payload::Error(
            message.unwrap_or_else(|| "error event in stream".into()),
        ));
    }
    let content = chunk.choices.first().is_some_and(|choice| {
        non_empty(&choice.text)
            || choice.delta.as_ref().is_some_and(|d| {
                non_empty(&d.content)
                    || non_empty(&d.reasoning_content)
                    || non_empty(&d.reasoning)
                    || d.tool_calls.is_some()
            })
    });
    Ok(Payload::Chunk {
        content,
        choices: !chunk.choices.is_empty(),
        completion_tokens: chunk.usage.and_then(|u| u.completion_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_classified() {
        let chunk = |content, completion_tokens: Option<u64>| {
            Ok(Payload::Chunk {
                content,
                choices: completion_tokens.is_none(),
                completion_tokens,
            })
        };
        assert_eq!(parse(b"[DONE]"), Ok(Payload::Done));
        let text = br#"{"id":"c","choices":[{"index":0,"text":"hi","finish_reason":null}]}"#;
        assert_eq!(parse(text), chunk(true, None));
        let empty = br#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#;
        assert_eq!(parse(empty), chunk(false, None));
        let role = br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(parse(role), chunk(false, None));
        let delta = br#"{"choices":[{"delta":{"content":"caf\u00e9 \"x\""}}]}"#;
        assert_eq!(parse(delta), chunk(true, None));
        let think = br#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#;
        assert_eq!(parse(think), chunk(true, None));
        let tools = br#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#;
        assert_eq!(parse(tools), chunk(true, None));
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#;
        assert_eq!(parse(usage), chunk(false, Some(7)));
        let null_usage = br#"{"choices":[{"text":"a"}],"usage":null}"#;
        assert_eq!(parse(null_usage), chunk(true, None));
        let error = br#"{"error":{"message":"engine died","code":503}}"#;
        assert_eq!(parse(error), Ok(Payload::Error("engine died".into())));
        assert!(parse(b"not json").unwrap_err().contains("not json"));
    }

    #[test]
    fn turns_keep_the_text_and_the_prompt_usage() {
        let delta = br#"{"choices":[{"delta":{"content":"caf\u00e9"}}]}"#;
        assert_eq!(turn(delta).text, "café");
        assert_eq!(turn(delta).cached_tokens, None);
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,
            "prompt_tokens_details":{"cached_tokens":32}}}"#;
        let got = turn(usage);
        assert_eq!((got.prompt_tokens, got.cached_tokens), (Some(40), Some(32)));
        assert_eq!(turn(b"[DONE]"), TurnChunk::default());
    }
}
