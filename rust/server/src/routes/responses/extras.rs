//! What vLLM's Responses request takes beyond OpenAI's and chat takes too (its sampling
//! extensions, `structured_outputs`, `chat_template_kwargs`) and `include`'s output text
//! logprobs, into the chat request. Mirrors `_extras` of
//! `server/routes/responses/request.py`. Behaviour: docs/api.md, "Responses API".

use serde_json::{json, Map, Value};

use crate::edge::error::ApiError;

use super::fields::{bad, boolean, object, string};

/// vLLM's extensions of the Responses request that chat takes too: passed to the chat
/// request under the same name (their values are checked there).
pub const EXTRAS: &[&str] = &[
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "stop_token_ids",
    "ignore_eos",
    "skip_special_tokens",
    "logit_bias",
    "structured_outputs",
];

/// vLLM's extensions of the Responses request that only it has: the response's id, and
/// the raw prompt and output in the response object ([`own`]).
pub const OWN: &[&str] = &["request_id", "enable_response_messages"];

/// What [`OWN`] asks for: the response's id (`None`: `resp_<hex>`), and whether the final
/// object carries the raw prompt and output (`enable_response_messages`: the chat request
/// then has its pieces carry their token ids).
pub fn own(
    map: &Map<String, Value>,
    chat: &mut Map<String, Value>,
) -> Result<(Option<String>, bool), ApiError> {
    let given = |key: &str| map.get(key).filter(|v| !v.is_null());
    let request_id = match given("request_id") {
        Some(id) => Some(string(Some(id), "request_id")?.to_owned()),
        None => None,
    };
    let messages = match given("enable_response_messages") {
        Some(flag) => boolean(flag, "enable_response_messages")?,
        None => false,
    };
    if messages {
        chat.insert("return_token_ids".into(), Value::Bool(true));
    }
    Ok((request_id, messages))
}

/// The `include` value that asks for the output text's logprobs.
const LOGPROBS: &str = "message.output_text.logprobs";

/// What `include` may ask for: the output text's logprobs; the others concern built-in
/// tools, images and encrypted reasoning this server does not produce (accepted, no
/// effect, as vLLM takes them).
pub const INCLUDABLE: &[&str] = &[
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    LOGPROBS,
    "reasoning.encrypted_content",
];

/// The most `top_logprobs` (the engine's limit, as chat's).
pub const MAX_TOP_LOGPROBS: u64 = 20;

/// `include`'s logprobs, vLLM's extensions and `chat_template_kwargs` into `chat` (where
/// chat's `reasoning_effort`, from `reasoning.effort`, wins over the kwargs' own).
pub fn extras(map: &Map<String, Value>, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let given = |key: &str| map.get(key).filter(|v| !v.is_null());
    let includes = given("include").and_then(Value::as_array);
    if includes.is_some_and(|items| items.iter().any(|i| i == LOGPROBS)) {
        chat.insert("logprobs".into(), Value::Bool(true));
        let top = given("top_logprobs").cloned().unwrap_or(json!(0));
        chat.insert("top_logprobs".into(), top);
    }
    for key in EXTRAS {
        if let Some(value) = given(key) {
            chat.insert((*key).into(), value.clone());
        }
    }
    let format = given("text")
        .and_then(|t| t.get("format"))
        .filter(|f| !f.is_null());
    if given("structured_outputs").is_some() && format.is_some() {
        return Err(bad(
            "structured_outputs",
            "only one structured-output constraint may be given; this request sets \
             `text.format` and `structured_outputs`",
        ));
    }
    if let Some(kwargs) = given("chat_template_kwargs") {
        let kwargs = object(Some(kwargs), "chat_template_kwargs")?.clone();
        chat.insert("chat_template_kwargs".into(), Value::Object(kwargs));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::edge::error::ApiError;
    use crate::routes::responses::request::translate;

    fn chat(body: Value) -> serde_json::Map<String, Value> {
        translate(body.to_string().as_bytes())
            .unwrap_or_else(|e| panic!("{body}: {e:?}"))
            .chat
    }

    fn refused(body: Value) -> (String, String) {
        match translate(body.to_string().as_bytes()) {
            Err(ApiError::BadRequest { message, param }) => (param.unwrap_or_default(), message),
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn include_logprobs_asks_the_chat_path_for_them() {
        let logprobs = "message.output_text.logprobs";
        let out = chat(json!({"input": "x", "include": [logprobs], "top_logprobs": 3}));
        assert_eq!(
            (&out["logprobs"], &out["top_logprobs"]),
            (&json!(true), &json!(3))
        );
        let out = chat(json!({"input": "x", "include": [logprobs]}));
        assert_eq!(out["top_logprobs"], 0);
        let quiet = json!({"input": "x", "top_logprobs": 5,
                           "include": ["reasoning.encrypted_content", "file_search_call.results"]});
        let translated = translate(quiet.to_string().as_bytes()).unwrap();
        assert!(translated.chat.get("logprobs").is_none());
        assert!(translated.chat.get("top_logprobs").is_none());
        assert_eq!(translated.echo.top_logprobs, 5);
    }

    #[test]
    fn vllm_extensions_pass_to_chat() {
        let extras = json!({"min_p": 0.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
                            "repetition_penalty": 1.2, "stop_token_ids": [7], "ignore_eos": true,
                            "skip_special_tokens": false, "logit_bias": {"5": 1},
                            "structured_outputs": {"regex": "a+"}});
        let mut body = extras.clone();
        body["input"] = json!("x");
        body["top_k"] = json!(3);
        let out = chat(body);
        for (key, value) in extras.as_object().unwrap() {
            assert_eq!(&out[key], value, "{key}");
        }
        assert_eq!(out["top_k"], 3);
    }

    #[test]
    fn chat_template_kwargs_pass_beside_the_effort() {
        let kwargs = json!({"enable_thinking": false, "reasoning_effort": "high"});
        let body = json!({"input": "x", "reasoning": {"effort": "low"},
                          "chat_template_kwargs": kwargs});
        let out = chat(body);
        // chat's reasoning_effort wins over the kwargs' own when the template renders
        assert_eq!(
            (&out["chat_template_kwargs"], &out["reasoning_effort"]),
            (&kwargs, &json!("low"))
        );
        let body = json!({"input": "x", "chat_template_kwargs": {"a": 1}});
        assert_eq!(chat(body)["chat_template_kwargs"], json!({"a": 1}));
    }

    #[test]
    fn refusals() {
        let both = json!({"input": "x", "structured_outputs": {"regex": "a"},
                          "text": {"format": {"type": "text"}}});
        assert_eq!(
            refused(both),
            (
                "structured_outputs".into(),
                "only one structured-output constraint may be given; this request sets \
                 `text.format` and `structured_outputs`"
                    .into()
            )
        );
        assert_eq!(
            refused(json!({"input": "x", "chat_template_kwargs": [1]})),
            (
                "chat_template_kwargs".into(),
                "invalid value for 'chat_template_kwargs': expected an object".into()
            )
        );
    }

    #[test]
    fn request_id_and_response_messages_go_to_the_echo() {
        let body = json!({"input": "x", "request_id": "r-1", "enable_response_messages": true});
        let translated = translate(body.to_string().as_bytes()).unwrap();
        let echo = &translated.echo;
        assert_eq!(
            (echo.request_id.as_deref(), echo.response_messages),
            (Some("r-1"), true)
        );
        assert_eq!(translated.chat["return_token_ids"], true);
        let off = json!({"input": "x", "enable_response_messages": false});
        let translated = translate(off.to_string().as_bytes()).unwrap();
        assert!(translated.echo.request_id.is_none() && !translated.echo.response_messages);
        assert!(translated.chat.get("return_token_ids").is_none());
    }
}
