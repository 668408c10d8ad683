//! One choice of a response: its generation's pieces turned into the endpoint's deltas
//! (streamed) and accumulated into its final form (not streamed). Chat runs the text through
//! the reasoning parser, then the tool-call parser, and counts reasoning tokens
//! ([`crate::output::reasoning_tokens`]); completions add the echoed prompt and prompt
//! logprobs. Mirrors `server/output/choice.py`. Behaviour: docs/api.md, "Responses".

use std::sync::Arc;

use crate::logprobs::{ChatLogprobs, CompletionLogprobs, PromptLogprobs, TokenLogprob, TokenTexts};
use crate::openai::{
    AssistantMessage, ChatChoice, CompletionChoice, Delta, Function, FunctionDelta, ToolCallDelta,
    ToolCallOut, Usage,
};
use crate::output::generation::Piece;
use crate::output::reasoning_tokens::ReasoningTokens;
use crate::parsers::reasoning::{ReasoningMarkers, ReasoningParser};
use crate::parsers::tools::{CallDelta, ToolCall, ToolCallParser};
use crate::validate::extras::Extras;
use crate::validate::prompt::ChatOutput;

/// What one piece adds to a chat choice.
#[derive(Debug)]
pub struct ChatDelta {
    pub reasoning: String,
    pub content: String,
    pub calls: Vec<CallDelta>,
    pub logprobs: Option<Vec<TokenLogprob>>,
    pub finish: Option<&'static str>,
    /// `return_token_ids`: the piece's tokens.
    pub token_ids: Option<Vec<u32>>,
}

impl ChatDelta {
    pub fn is_empty(&self) -> bool {
        self.reasoning.is_empty()
            && self.content.is_empty()
            && self.calls.is_empty()
            && self.logprobs.as_ref().map_or(true, Vec::is_empty)
            && self.finish.is_none()
            && self.token_ids.as_ref().map_or(true, Vec::is_empty)
    }

    pub fn delta(&mut self) -> Delta {
        Delta {
            role: None,
            content: (!self.content.is_empty()).then(|| std::mem::take(&mut self.content)),
            reasoning_content: (!self.reasoning.is_empty())
                .then(|| std::mem::take(&mut self.reasoning)),
            tool_calls: std::mem::take(&mut self.calls)
                .into_iter()
                .map(|c| ToolCallDelta {
                    index: c.index,
                    kind: c.id.is_some().then_some("function"),
                    id: c.id,
                    function: FunctionDelta {
                        name: c.name,
                        arguments: c.arguments,
                    },
                })
                .collect(),
        }
    }
}

/// Appends `more` to `calls`, merging a continued call's pieces into one delta.
fn merge(calls: &mut Vec<CallDelta>, more: Vec<CallDelta>) {
    for d in more {
        match calls.last_mut() {
            Some(last) if last.index == d.index && d.id.is_none() => {
                last.arguments.push_str(&d.arguments)
            }
            _ => calls.push(d),
        }
    }
}

/// A chat choice's parsers and, for a whole response, what it said so far.
pub struct ChatChoiceState {
    index: u32,
    reasoning_parser: Option<ReasoningParser>,
    reasoning_tokens: ReasoningTokens,
    tools: Option<ToolCallParser>,
    top: Option<usize>,
    texts: Arc<TokenTexts>,
    with_reasoning: bool,
    content: String,
    reasoning: String,
    calls: Vec<ToolCall>,
    logprobs: Vec<TokenLogprob>,
    finish: Option<&'static str>,
    /// vLLM's extensions (`include_reasoning`, `separate_reasoning`, token ids).
    shown: Extras,
    /// `return_token_ids`: the generated tokens so far.
    token_ids: Option<Vec<u32>>,
}

impl ChatChoiceState {
    pub fn new(
        index: u32,
        chat: &ChatOutput,
        reasoning_parser: Option<ReasoningMarkers>,
        top: Option<usize>,
        texts: Arc<TokenTexts>,
    ) -> Self {
        Self {
            index,
            reasoning_parser: reasoning_parser
                .filter(|_| chat.splits_reasoning())
                .map(|markers| ReasoningParser::new(markers, chat.reasoning_inside)),
            reasoning_tokens: ReasoningTokens::default(),
            tools: chat
                .tool_format
                .map(|format| ToolCallParser::new(format, &chat.tools)),
            top,
            texts,
            with_reasoning: reasoning_parser.is_some(),
            content: String::new(),
            reasoning: String::new(),
            calls: Vec::new(),
            logprobs: Vec::new(),
            finish: None,
            shown: Extras::default(),
            token_ids: None,
        }
    }

    /// This choice shown as vLLM's `extras` ask: `include_reasoning` false (with a
    /// reasoning parser) withholds the reasoning and, lest they show it, the logprobs and
    /// token ids.
    pub fn shown(mut self, extras: &Extras) -> Self {
        let hidden = self.with_reasoning && !extras.include_reasoning;
        if hidden {
            self.top = None;
        }
        self.token_ids = (extras.token_ids && !hidden).then(Vec::new);
        self.shown = extras.clone();
        self
    }

    pub fn step(&mut self, piece: Piece) -> ChatDelta {
        let last = piece.finish.is_some();
        let (mut reasoning, mut content) = match &mut self.reasoning_parser {
            Some(parser) => {
                let (mut r, mut c) = parser.push(&piece.text);
                if last {
                    let (r2, c2) = parser.finish();
                    r.push_str(&r2);
                    c.push_str(&c2);
                }
                self.reasoning_tokens
                    .count(parser, &piece.token_offsets, last);
                (r, c)
            }
            None => (String::new(), piece.text),
        };
        let mut calls = Vec::new();
        if let Some(parser) = &mut self.tools {
            let delta = parser.push(&content);
            content = delta.content;
            calls = delta.calls;
            if last {
                let end = parser.finish();
                content.push_str(&end.content);
                merge(&mut calls, end.calls);
            }
        }
        let mut finish = piece.finish;
        if finish == Some("stop") && self.tools.as_ref().is_some_and(|t| t.calls_made() > 0) {
            finish = Some("tool_calls");
        }
        if !self.shown.include_reasoning {
            reasoning.clear();
        } else if !self.shown.separate_reasoning && !reasoning.is_empty() {
            content.insert_str(0, &std::mem::take(&mut reasoning));
        }
        let as_ids = self.shown.ids_as_tokens;
        let logprobs = self.top.map(|top| {
            let entries = self.texts.chat(&piece.logprobs, top, as_ids);
            self.logprobs.extend(entries.iter().cloned());
            entries
        });
        let token_ids = self.token_ids.as_mut().map(|all| {
            all.extend_from_slice(&piece.token_ids);
            piece.token_ids
        });
        self.content.push_str(&content);
        self.reasoning.push_str(&reasoning);
        ToolCall::accumulate(&mut self.calls, &calls);
        self.finish = finish;
        ChatDelta {
            reasoning: std::mem::take(&mut reasoning),
            content,
            calls,
            logprobs,
            finish,
            token_ids,
        }
    }

    /// Its reasoning tokens so far when the server has a reasoning parser (0 where this
    /// request's answer is not split: a forced tool call, a structured-output constraint),
    /// `None` without one.
    pub fn reasoning_tokens(&self) -> Option<u32> {
        self.with_reasoning.then(|| self.reasoning_tokens.total())
    }

    /// `usage` (of every choice in `choices`) with their reasoning tokens, when the server
    /// counts them.
    pub fn usage_of(choices: &[ChatChoiceState], usage: Usage) -> Usage {
        let counted = choices.first().and_then(ChatChoiceState::reasoning_tokens);
        let total = choices.iter().filter_map(ChatChoiceState::reasoning_tokens);
        usage.with_reasoning(counted.map(|_| total.sum()))
    }

    /// The whole choice (after the last piece).
    pub fn choice(self) -> ChatChoice {
        let has_more = !self.calls.is_empty() || !self.reasoning.is_empty();
        let content = (!self.content.is_empty() || !has_more).then_some(self.content);
        let reasoning = self
            .with_reasoning
            .then(|| (!self.reasoning.is_empty()).then_some(self.reasoning));
        ChatChoice {
            index: self.index,
            message: AssistantMessage {
                role: "assistant",
                content,
                reasoning_content: reasoning,
                tool_calls: self
                    .calls
                    .into_iter()
                    .map(|c| ToolCallOut {
                        id: c.id,
                        kind: "function",
                        function: Function {
                            name: c.name,
                            arguments: c.arguments,
                        },
                    })
                    .collect(),
            },
            logprobs: self.top.map(|_| ChatLogprobs {
                content: self.logprobs,
            }),
            finish_reason: self.finish.unwrap_or("stop"),
            token_ids: self.token_ids,
        }
    }
}

/// What a completions choice shows of its prompt: the echoed text, and the ids whose
/// logprobs an echo with `logprobs` and `prompt_logprobs` show.
pub struct PromptView {
    pub echo: Option<String>,
    pub ids: Vec<u32>,
    /// `prompt_logprobs`: the top k per prompt token.
    pub prompt_top: Option<usize>,
    /// `return_tokens_as_token_ids`: logprobs name tokens `token_id:N`.
    pub ids_as_tokens: bool,
    /// `return_token_ids`: the choice shows the prompt's ids and its generated ones.
    pub token_ids: bool,
}

/// A completions choice: the echo (text and logprobs) and `prompt_logprobs` on the
/// first piece, offsets for logprobs.
pub struct CompletionChoiceState {
    index: u32,
    prompt: Arc<PromptView>,
    first: bool,
    top: Option<usize>,
    texts: Arc<TokenTexts>,
    offset: usize,
    text: String,
    logprobs: CompletionLogprobs,
    prompt_logprobs: Option<PromptLogprobs>,
    finish: Option<&'static str>,
    /// `return_token_ids`: the generated tokens so far.
    token_ids: Option<Vec<u32>>,
}

impl CompletionChoiceState {
    pub fn new(
        index: u32,
        prompt: Arc<PromptView>,
        top: Option<usize>,
        texts: Arc<TokenTexts>,
    ) -> Self {
        Self {
            index,
            first: true,
            top,
            texts,
            offset: 0,
            text: String::new(),
            logprobs: CompletionLogprobs::default(),
            prompt_logprobs: None,
            finish: None,
            token_ids: prompt.token_ids.then(Vec::new),
            prompt,
        }
    }

    /// The chunk's choice for `piece` (and its part of the whole).
    pub fn step(&mut self, piece: Piece) -> CompletionChoice {
        let mut text = String::new();
        let mut logprobs = CompletionLogprobs::default();
        let mut prompt_logprobs = None;
        let as_ids = self.prompt.ids_as_tokens;
        let first = std::mem::take(&mut self.first);
        if first {
            let entries = piece.prompt_logprobs.as_deref().unwrap_or_default();
            let prompt = &self.prompt;
            if let Some(echo) = &prompt.echo {
                text.push_str(echo);
                if let Some(top) = self.top {
                    let (part, offset) = self.texts.echo(&prompt.ids, entries, top, as_ids);
                    logprobs = part;
                    self.offset = offset;
                }
            }
            prompt_logprobs = prompt
                .prompt_top
                .map(|k| self.texts.prompt(prompt.ids.len(), entries, k));
            self.prompt_logprobs.clone_from(&prompt_logprobs);
        }
        text.push_str(&piece.text);
        let logprobs = self.top.map(|top| {
            let (part, offset) = self
                .texts
                .completion(&piece.logprobs, top, self.offset, as_ids);
            self.offset = offset;
            logprobs.extend(part);
            self.logprobs.extend(logprobs.clone());
            logprobs
        });
        self.text.push_str(&text);
        self.finish = piece.finish;
        let token_ids = self.token_ids.as_mut().map(|all| {
            all.extend_from_slice(&piece.token_ids);
            piece.token_ids
        });
        let prompt_token_ids = (first && token_ids.is_some()).then(|| self.prompt.ids.clone());
        CompletionChoice {
            index: self.index,
            text,
            logprobs,
            finish_reason: piece.finish,
            token_ids,
            prompt_logprobs,
            prompt_token_ids,
        }
    }

    pub fn choice(self) -> CompletionChoice {
        let prompt_token_ids = self.token_ids.is_some().then(|| self.prompt.ids.clone());
        CompletionChoice {
            index: self.index,
            text: self.text,
            logprobs: self.top.map(|_| self.logprobs),
            finish_reason: Some(self.finish.unwrap_or("stop")),
            token_ids: self.token_ids,
            prompt_logprobs: self.prompt_logprobs,
            prompt_token_ids,
        }
    }
}

#[cfg(test)]
mod tests;
