//! A Messages body (`POST /v1/messages`, `/v1/messages/count_tokens`) → the equivalent chat
//! completions request (messages: `blocks::messages`), or a 400 naming the field path.
//! Mirrors `server/routes/messages/request.py`. Behaviour: docs/api.md, "Anthropic Messages
//! API", "Request fields".

use serde_json::{Map, Value};

use super::blocks;
use super::config::{output_config, template_kwargs, thinking_enabled};
use super::json::{
    array, at, at_least, boolean, cache_control, get, integer, join, known_keys, need, number,
    object, one_of, required, string, system_text,
};
use crate::edge::error::ApiError;
use crate::validate::params;

/// Which route the body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `POST /v1/messages`: `max_tokens` required.
    Create,
    /// `POST /v1/messages/count_tokens`: `max_tokens` optional, `stream` refused.
    CountTokens,
}

/// Top-level fields taken (`service_tier` is checked to be a string and ignored).
const KEYS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "tools",
    "tool_choice",
    "stop_sequences",
    "temperature",
    "top_p",
    "top_k",
    "stream",
    "metadata",
    "thinking",
    "output_config",
    "cache_control",
    "service_tier",
    "seed",
];

/// Anthropic fields for features this server does not have.
const REFUSED: &[&str] = &["container", "mcp_servers", "context_management"];

/// What the translation needs of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Server {
    /// The server has a reasoning parser (which `thinking` enabled needs).
    pub reasoning: bool,
    /// The chat template takes no system message after the first: a `system` message
    /// joins the system prompt.
    pub merge_system: bool,
}

/// The chat request equivalent to `body`.
pub fn translate(body: &[u8], mode: Mode, server: Server) -> Result<Value, ApiError> {
    let map = params::parse_object(body)?;
    check_keys(&map, mode)?;
    let mut chat = Map::new();
    let model = string(need(&map, "model", "")?, "model")?;
    chat.insert("model".into(), Value::String(model.to_owned()));
    let max_tokens = match (get(&map, "max_tokens"), mode) {
        (Some(v), _) => Some(at_least(v, "max_tokens", 1)?),
        (None, Mode::Create) => return Err(required("max_tokens")),
        (None, Mode::CountTokens) => None,
    };
    let list = need(&map, "messages", "")?;
    let system = match get(&map, "system") {
        Some(system) => system_text(system, "system", false)?,
        None => String::new(),
    };
    let list = array(list, "messages")?;
    if list.is_empty() {
        return Err(ApiError::bad(
            "messages",
            "at least one message is required",
        ));
    }
    let messages = blocks::messages(list, system, server.merge_system)?;
    chat.insert("messages".into(), Value::Array(messages));
    // count_tokens checks `max_tokens` (and the thinking budget against it) but renders
    // without it.
    if let (Some(n), Mode::Create) = (max_tokens, mode) {
        chat.insert("max_tokens".into(), Value::from(n));
    }
    if let Some(tools) = get(&map, "tools") {
        chat.insert("tools".into(), Value::Array(function_tools(tools)?));
    }
    if let Some(choice) = get(&map, "tool_choice") {
        tool_choice(choice, &mut chat)?;
    }
    if let Some(stops) = get(&map, "stop_sequences") {
        let list = array(stops, "stop_sequences")?;
        for (i, s) in list.iter().enumerate() {
            string(s, &at("stop_sequences", i))?;
        }
        chat.insert("stop".into(), stops.clone());
    }
    sampling(&map, &mut chat)?;
    if let Some(metadata) = get(&map, "metadata") {
        if let Some(user) = user_id(metadata)? {
            chat.insert("user".into(), Value::String(user));
        }
    }
    if let Some(tier) = get(&map, "service_tier") {
        string(tier, "service_tier")?;
    }
    let (thinking, budget) = match get(&map, "thinking") {
        Some(thinking) => thinking_enabled(thinking, max_tokens, server.reasoning)?,
        None => (None, None),
    };
    let effort = match get(&map, "output_config") {
        Some(config) => output_config(config, &mut chat)?,
        None => None,
    };
    cache_control(&map, "")?;
    let kwargs = template_kwargs(thinking, effort);
    if !kwargs.is_empty() {
        chat.insert("chat_template_kwargs".into(), Value::Object(kwargs));
    }
    if let Some(budget) = budget {
        // Enforced by the engine, as vLLM maps it (`thinking_token_budget`).
        chat.insert("thinking_token_budget".into(), Value::from(budget));
    }
    Ok(Value::Object(chat))
}

/// The chat request's structured-output field and the Messages field it comes from.
const FORMAT: (&str, &str) = ("response_format", "output_config.format");

/// The Messages name of the chat request's field `param` (the chat checks' errors and an
/// engine's refusal of the structured-output constraint name the former).
pub fn messages_param(param: &str) -> String {
    let (chat, ours) = FORMAT;
    match param.strip_prefix(chat) {
        Some(rest) if rest.is_empty() || rest.starts_with(['.', '[']) => {
            format!(
                "{ours}{}",
                rest.strip_prefix(".json_schema").unwrap_or(rest)
            )
        }
        _ => param.to_owned(),
    }
}

/// The Messages name of a whole chat request field (a structured-output constraint's:
/// `response_format` is `output_config.format`).
pub fn messages_field(field: &'static str) -> &'static str {
    if field == FORMAT.0 {
        FORMAT.1
    } else {
        field
    }
}

/// The chat path's error with its `param` named as this API names it.
pub fn renamed(err: ApiError) -> ApiError {
    err.rename_param(messages_param)
}

/// `temperature`, `top_p`, `top_k`, `seed`, `stream`: typed here, passed on under the same
/// names (the chat checks their ranges).
fn sampling(map: &Map<String, Value>, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    for key in ["temperature", "top_p", "top_k", "seed", "stream"] {
        let Some(v) = get(map, key) else { continue };
        match key {
            "temperature" | "top_p" => number(v, key)?,
            "top_k" => {
                at_least(v, key, 0)?;
            }
            "seed" => {
                integer(v, key)?;
            }
            _ => {
                boolean(v, key)?;
            }
        }
        chat.insert(key.into(), v.clone());
    }
    Ok(())
}

/// The first unknown field (in body order), then the first refused one, then (count_tokens)
/// `stream`.
fn check_keys(map: &Map<String, Value>, mode: Mode) -> Result<(), ApiError> {
    let known = |k: &str| KEYS.contains(&k) || REFUSED.contains(&k);
    if let Some(k) = map.keys().find(|k| !known(k)) {
        return Err(ApiError::bad(k.as_str(), format!("unknown field '{k}'")));
    }
    let refused = |(k, v): &(&String, &Value)| REFUSED.contains(&k.as_str()) && !v.is_null();
    if let Some((k, _)) = map.iter().find(refused) {
        return Err(ApiError::bad(
            k.as_str(),
            format!("{k} is not supported by this server"),
        ));
    }
    if mode == Mode::CountTokens && map.contains_key("stream") {
        return Err(ApiError::bad(
            "stream",
            "stream is not supported by count_tokens",
        ));
    }
    Ok(())
}

/// `tools` → chat function tools; a tool of another `type` (Anthropic's server tools) is a
/// 400.
fn function_tools(tools: &Value) -> Result<Vec<Value>, ApiError> {
    let list = array(tools, "tools")?;
    let mut out = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let path = at("tools", i);
        let map = object(tool, &path)?;
        if let Some(kind) = get(map, "type") {
            let tpath = join(&path, "type");
            let kind = string(kind, &tpath)?;
            if kind != "custom" {
                return Err(ApiError::bad(
                    tpath,
                    format!(
                        "tool type '{kind}' is not supported: only custom tools (name, \
                         description, input_schema)"
                    ),
                ));
            }
        }
        known_keys(
            map,
            &[
                "type",
                "name",
                "description",
                "input_schema",
                "cache_control",
            ],
            &path,
        )?;
        let name = string(need(map, "name", &path)?, &join(&path, "name"))?;
        let schema = need(map, "input_schema", &path)?;
        object(schema, &join(&path, "input_schema"))?;
        let mut function = Map::new();
        function.insert("name".into(), Value::String(name.to_owned()));
        if let Some(description) = get(map, "description") {
            let d = string(description, &join(&path, "description"))?;
            function.insert("description".into(), Value::String(d.to_owned()));
        }
        function.insert("parameters".into(), schema.clone());
        cache_control(map, &path)?;
        let mut chat_tool = Map::new();
        chat_tool.insert("type".into(), Value::String("function".into()));
        chat_tool.insert("function".into(), Value::Object(function));
        out.push(Value::Object(chat_tool));
    }
    Ok(out)
}

/// `tool_choice` → chat `tool_choice` (and `parallel_tool_calls: false` with
/// `disable_parallel_tool_use`).
fn tool_choice(choice: &Value, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let map = object(choice, "tool_choice")?;
    let kind = one_of(
        need(map, "type", "tool_choice")?,
        "tool_choice.type",
        &["auto", "any", "tool", "none"],
    )?;
    let mut allowed = vec!["type"];
    if kind != "none" {
        allowed.push("disable_parallel_tool_use");
    }
    if kind == "tool" {
        allowed.push("name");
    }
    known_keys(map, &allowed, "tool_choice")?;
    let value = match kind {
        "auto" => Value::String("auto".into()),
        "any" => Value::String("required".into()),
        "none" => Value::String("none".into()),
        _ => {
            let name = string(need(map, "name", "tool_choice")?, "tool_choice.name")?;
            let mut function = Map::new();
            function.insert("name".into(), Value::String(name.to_owned()));
            let mut named = Map::new();
            named.insert("type".into(), Value::String("function".into()));
            named.insert("function".into(), Value::Object(function));
            Value::Object(named)
        }
    };
    chat.insert("tool_choice".into(), value);
    if let Some(flag) = get(map, "disable_parallel_tool_use") {
        if boolean(flag, "tool_choice.disable_parallel_tool_use")? {
            chat.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    Ok(())
}

/// `metadata.user_id` (the only metadata key taken).
fn user_id(metadata: &Value) -> Result<Option<String>, ApiError> {
    let map = object(metadata, "metadata")?;
    known_keys(map, &["user_id"], "metadata")?;
    get(map, "user_id")
        .map(|u| string(u, "metadata.user_id").map(str::to_owned))
        .transpose()
}

#[cfg(test)]
mod client_shapes;
#[cfg(test)]
mod tests;
