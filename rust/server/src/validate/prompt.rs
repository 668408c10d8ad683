//! Request body → what the engine receives: the prompt, its token ids and the lowered
//! sampling parameters. One implementation for the serving routes (`chat`, `completions`)
//! and the render service, in the check order both frontends share; a completions request's
//! batch of prompts is checked prompt by prompt. Mirrors `server/validate/prompt.py`.
//! Behaviour: docs/api.md, "Routes".

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use serde_json::{Map, Value};
use vrs_text::{ChatTemplateInput, Tokenizer};

use crate::edge::error::text_error;
use crate::edge::error::ApiError;
use crate::edge::metrics::Histogram;
use crate::openai::{
    ChatFields, CommonFields, CompletionFields, ExtraFields, PromptInput, SamplingFields,
};
use crate::parsers::reasoning;
use crate::parsers::tools::{self, tool_settings, ToolFormat, ToolMode, ToolSettings};
use crate::text::{offload, Template};
use crate::validate::params::{self, Endpoint, Settings};
use crate::validate::{beam_search, engine_fields, extras, sampling, structured};

mod message;
mod tool_calls;
use message::echoed;
pub use message::message_json;

/// The default of `--max-batch-prompts`: the most prompts one completions request may
/// carry.
pub const DEFAULT_MAX_BATCH_PROMPTS: usize = 256;

/// What prompt building needs from a server: the model's text assets and limits.
pub trait TextModel: Send + Sync + 'static {
    fn tokenizer(&self) -> &Tokenizer;
    fn template(&self) -> Option<&Template>;
    /// 404 unless `model` is absent or the served name.
    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError>;
    fn vocab_size(&self) -> u64;
    fn max_model_len(&self) -> u64;
    /// The tool-call format's name (`--tool-call-parser`, resolved).
    fn tool_parser(&self) -> Option<&'static str>;
    /// The reasoning parser's name (`--reasoning-parser`, resolved): which markers a
    /// prompt may leave open.
    fn reasoning_parser(&self) -> Option<&'static str> {
        None
    }
    /// `--scheduling-policy` (`fcfs` or `priority`); `None`: no engine to schedule (the
    /// render service), so any `priority` is taken.
    fn scheduling_policy(&self) -> Option<&'static str> {
        None
    }
    /// The most prompts one completions request may carry (`--max-batch-prompts`).
    fn max_batch_prompts(&self) -> usize {
        DEFAULT_MAX_BATCH_PROMPTS
    }
    /// Where chat template + tokenization times go, when they are measured.
    fn tokenize_latency(&self) -> Option<&Histogram> {
        None
    }
    /// Whether `truncate_prompt_tokens` keeps a prompt's last tokens when the request
    /// names no `truncation_side`: the tokenizer's `truncation_side` (transformers'
    /// default: `right`).
    fn truncates_left(&self) -> bool {
        self.tokenizer().config().truncation_side.as_deref() == Some("left")
    }
}

/// The 400 of a chat request to a model without a chat template.
pub const NO_CHAT_TEMPLATE: &str = "this model has no chat template, so /v1/chat/completions \
     is unavailable; start the server with --chat-template or use /v1/completions";

/// How a chat request's answer is parsed.
#[derive(Debug, Clone)]
pub struct ChatOutput {
    pub tools: ToolSettings,
    /// The tool-call format (`None`: tool calls are not parsed); with `tools.mode` it
    /// decides how the parser starts (inside a forced native call, forced JSON, free).
    pub tool_format: Option<ToolFormat>,
    /// The prompt forces a tool call (tool_choice required / named).
    pub prefilled: bool,
    /// A structured-output constraint applies: no reasoning split (the grammar starts at
    /// the first generated token).
    pub constrained: bool,
    /// The prompt leaves a `<think>` open.
    pub reasoning_inside: bool,
    /// `echo` with a last message from the assistant: its content, which goes before
    /// each choice's content.
    pub echo: Option<String>,
}

impl ChatOutput {
    /// Whether a reasoning parser splits the answer: not when the prompt forces a tool
    /// call or a structured-output constraint applies.
    pub fn splits_reasoning(&self) -> bool {
        !(self.prefilled || self.constrained)
    }
}

/// A checked request, ready for the engine (`settings.sampling.max_tokens` is set).
#[derive(Debug)]
pub struct Prompt {
    /// The rendered chat, or the completion prompt; `None` for token ids.
    pub text: Option<String>,
    pub ids: Vec<u32>,
    pub settings: Settings,
    /// Chat requests: how the answer is parsed.
    pub chat: Option<ChatOutput>,
}

fn finish(
    state: &impl TextModel,
    mut text: Option<String>,
    mut ids: Vec<u32>,
    mut settings: Settings,
    what: &str,
    chat: Option<ChatOutput>,
) -> Result<Prompt, ApiError> {
    if let Some(cut) = extras::truncated(&ids, &settings.extras) {
        // truncate_prompt_tokens: the text no longer matches the ids
        text = None;
        ids = cut;
    }
    settings.sampling.max_tokens = params::resolve_max_tokens(
        settings.max_tokens,
        settings.max_tokens_field,
        ids.len(),
        state.max_model_len(),
        what,
    )?;
    if settings.echo_only {
        // The prompt must be prefilled for its logprobs: one token, dropped.
        settings.sampling.max_tokens = 1;
    }
    Ok(Prompt {
        text,
        ids,
        settings,
        chat,
    })
}

/// What [`engine_fields`] needs of the server.
fn engine_server(state: &impl TextModel) -> engine_fields::Server<'_> {
    engine_fields::Server {
        scheduling_policy: state.scheduling_policy(),
        reasoning_parser: state.reasoning_parser(),
        tokenizer: state.tokenizer(),
    }
}

/// Runs `work` (template and/or tokenization), timing it when the server measures that.
fn timed<S: TextModel, T>(state: &S, work: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = work();
    if let Some(histogram) = state.tokenize_latency() {
        histogram.observe(started.elapsed());
    }
    out
}

/// A `/v1/chat/completions` body (or its render).
pub async fn chat<S: TextModel>(state: &Arc<S>, body: Bytes) -> Result<Prompt, ApiError> {
    chat_object(state, params::parse_object(&body)?, body.len()).await
}

/// A chat request already parsed: a body's object, or the chat request another API's
/// body translates into (Responses, Anthropic Messages), without a second parse. `size`:
/// the body's length in bytes (a large one renders off the async runtime).
pub async fn chat_object<S: TextModel>(
    state: &Arc<S>,
    map: Map<String, Value>,
    size: usize,
) -> Result<Prompt, ApiError> {
    params::check_keys(&map, Endpoint::Chat)?;
    let value = Value::Object(map);
    let (common, chat, extra, extensions): (CommonFields, ChatFields, SamplingFields, ExtraFields) =
        params::field_groups(&value)?;
    let max_override = chat
        .max_completion_tokens
        .map(|v| ("max_completion_tokens", v));
    let mut settings = params::validate(common, max_override, false, state.vocab_size())?;
    sampling::apply(extra, &mut settings, state.tokenizer(), state.vocab_size())?;
    structured::apply(&value, &mut settings)?;
    sampling::chat_logprobs(&chat, &mut settings)?;
    engine_fields::apply(&value, &mut settings, &engine_server(state.as_ref()))?;
    beam_search::check(&settings, Endpoint::Chat)?;
    settings.extras = extras::check(extensions, state.max_model_len(), state.truncates_left())?;
    state.check_model(settings.model.as_deref())?;
    let messages = match chat.messages {
        None => return Err(ApiError::bad("messages", "`messages` is required")),
        Some(m) if m.is_empty() => {
            return Err(ApiError::bad("messages", "`messages` must not be empty"))
        }
        Some(m) => m,
    };
    if state.template().is_none() {
        return Err(ApiError::bad_request(NO_CHAT_TEMPLATE));
    }
    let echo = chat
        .echo
        .unwrap_or(false)
        .then(|| messages.last().and_then(echoed))
        .flatten();
    let messages = messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message_json(i, m))
        .collect::<Result<_, _>>()?;
    let parser = state.tool_parser();
    let tools = tool_settings(
        value.get("tools"),
        value.get("tool_choice"),
        chat.parallel_tool_calls,
        parser,
    )?;
    let format = parser
        .filter(|_| tools.mode != ToolMode::None)
        .and_then(tools::format_of);
    let forcing = matches!(tools.mode, ToolMode::Required | ToolMode::Named)
        .then(|| tools::choice_text(tools.mode, tools.name.as_deref()));
    beam_search::check_tools(&settings, forcing.as_deref())?;
    structured::with_tools(&tools, format, &mut settings)?;
    engine_fields::with_tools(&tools, &settings)?;
    let forced = format.and_then(|f| tools::prefill(f, &tools));
    if let (Some((_, end)), ToolMode::Named) = (format.and_then(ToolFormat::native), tools.mode) {
        settings.stop.push(end.to_owned()); // one call, then stop
    }
    let continue_final = chat.continue_final_message.unwrap_or(false);
    let input = ChatTemplateInput {
        messages,
        tools: tools.tools.clone(),
        documents: None,
        add_generation_prompt: chat.add_generation_prompt.unwrap_or(!continue_final),
        continue_final_message: continue_final,
        kwargs: extras::template_kwargs(
            chat.chat_template_kwargs.unwrap_or_default(),
            settings.extras.reasoning_effort.as_deref(),
        ),
    };
    let st = Arc::clone(state);
    let prefill = forced.clone().unwrap_or_default();
    let (text, ids, reasoning_inside) = offload(size, move || {
        timed(st.as_ref(), || {
            let template = st
                .template()
                .ok_or_else(|| ApiError::Internal("no chat template".into()))?;
            let mut text = template.render(&input).map_err(text_error)?;
            let reasoning_inside = st
                .reasoning_parser()
                .and_then(reasoning::markers_of)
                .is_some_and(|markers| reasoning::starts_inside(markers, &text));
            text.push_str(&prefill);
            let ids = st.tokenizer().encode(&text, false).map_err(text_error)?;
            Ok((text, ids, reasoning_inside))
        })
    })
    .await?;
    let output = ChatOutput {
        tools,
        tool_format: format,
        prefilled: forced.is_some(),
        constrained: settings.constraint.is_some(),
        reasoning_inside,
        echo,
    };
    finish(
        state.as_ref(),
        Some(text),
        ids,
        settings,
        "messages",
        Some(output),
    )
}

/// A `/v1/completions` body (or its render): one [`Prompt`] per prompt of the batch,
/// each checked on its own (its own `max_tokens` default); any error fails them all.
pub async fn completion<S: TextModel>(
    state: &Arc<S>,
    body: Bytes,
) -> Result<Vec<Prompt>, ApiError> {
    let map = params::parse_object(&body)?;
    params::check_keys(&map, Endpoint::Completions)?;
    let value = Value::Object(map);
    let (common, fields, extra, extensions): (
        CommonFields,
        CompletionFields,
        SamplingFields,
        ExtraFields,
    ) = params::field_groups(&value)?;
    let echo = fields.echo.unwrap_or(false);
    let mut settings = params::validate(common, None, echo, state.vocab_size())?;
    sampling::apply(extra, &mut settings, state.tokenizer(), state.vocab_size())?;
    structured::apply(&value, &mut settings)?;
    sampling::completion_output(&fields, &mut settings)?;
    engine_fields::apply(&value, &mut settings, &engine_server(state.as_ref()))?;
    beam_search::check(&settings, Endpoint::Completions)?;
    settings.extras = extras::check(extensions, state.max_model_len(), state.truncates_left())?;
    state.check_model(settings.model.as_deref())?;
    let inputs = prompts(fields.prompt, state.max_batch_prompts())?;
    let st = Arc::clone(state);
    let size = body.len();
    let encoded = offload(size, move || {
        timed(st.as_ref(), || {
            inputs
                .into_iter()
                .map(|input| match input {
                    Input::Text(text) => {
                        let ids = st.tokenizer().encode(&text, true).map_err(text_error)?;
                        Ok((Some(text), ids))
                    }
                    Input::Ids(ids) => Ok((None, ids)),
                })
                .collect::<Result<Vec<_>, ApiError>>()
        })
    })
    .await?;
    encoded
        .into_iter()
        .map(|(text, ids)| {
            if text.is_none() {
                check_ids(state.vocab_size(), &ids)?;
            }
            finish(state.as_ref(), text, ids, settings.clone(), "prompt", None)
        })
        .collect()
}

/// One prompt of a completions batch.
enum Input {
    Text(String),
    Ids(Vec<u32>),
}

/// The prompts of `prompt`: at least one, at most `limit`, no empty string in a list.
fn prompts(prompt: Option<PromptInput>, limit: usize) -> Result<Vec<Input>, ApiError> {
    let inputs = match prompt {
        None => return Err(ApiError::bad("prompt", "`prompt` is required")),
        Some(PromptInput::Text(text)) => vec![Input::Text(text)],
        Some(PromptInput::Tokens(ids)) if ids.is_empty() => Vec::new(),
        Some(PromptInput::Tokens(ids)) => vec![Input::Ids(ids)],
        Some(PromptInput::Texts(texts)) => {
            if texts.iter().any(String::is_empty) {
                return Err(ApiError::bad(
                    "prompt",
                    "a prompt in the `prompt` list is an empty string",
                ));
            }
            texts.into_iter().map(Input::Text).collect()
        }
        Some(PromptInput::TokenLists(lists)) => lists.into_iter().map(Input::Ids).collect(),
    };
    if inputs.is_empty() {
        return Err(ApiError::bad(
            "prompt",
            "`prompt` must not be an empty list",
        ));
    }
    if inputs.len() > limit {
        return Err(ApiError::bad(
            "prompt",
            format!(
                "`prompt` holds {} prompts; at most {limit} are allowed per request \
                 (--max-batch-prompts {limit})",
                inputs.len()
            ),
        ));
    }
    Ok(inputs)
}

fn check_ids(vocab: u64, ids: &[u32]) -> Result<(), ApiError> {
    match ids.iter().find(|&&id| u64::from(id) >= vocab) {
        Some(bad) => Err(ApiError::bad(
            "prompt",
            format!("token id {bad} in `prompt` is out of the vocabulary (size {vocab})"),
        )),
        None => Ok(()),
    }
}
