//! The response of `POST /v1/responses`: one chat choice's deltas (reasoning, content, tool
//! calls, finish) as output items, streamed as typed SSE events or whole. Mirrors
//! `server/routes/responses/events.py`. Behaviour: docs/api.md, "Responses API".

use std::sync::Arc;

use serde::Serialize;
use serde_json::{json, Value};

use crate::edge::error::ApiError;
use crate::logprobs::TokenLogprob;
use crate::openai::Usage;
use crate::output::choice::{ChatChoiceState, ChatDelta};
use crate::output::generation::Piece;

use super::item::{empty_part, Item, Kind};
use super::request::Echo;
use super::wire::{
    write_event, ArgumentsDelta, Incomplete, RawMessage, ResponseObject, ResponseUsage, Streamed,
    TextDelta, WithResponse,
};

/// `enable_response_messages`: the prompt (text, ids) and the output so far (text, ids).
type RawMessages = ((String, Vec<u32>), (String, Vec<u32>));

/// The response's shapes: the echo, the one chat choice, the items so far.
pub struct ResponseEvents {
    id: String,
    created: u64,
    model: Arc<str>,
    echo: Echo,
    choice: ChatChoiceState,
    items: Vec<Item>,
    /// The last item has not ended.
    open: bool,
    finish: Option<&'static str>,
    sequence: u64,
    /// Whether the response is kept, and the response it continues (super::store).
    pub store: bool,
    pub previous_response_id: Option<String>,
    messages: Option<RawMessages>,
}

impl ResponseEvents {
    /// `hex`: the request's 32 hex digits (the id is `resp_<hex>`, or the request's
    /// `request_id`); `prompt`: the prompt's text and ids (kept with
    /// `enable_response_messages`).
    pub fn new(
        hex: &str,
        created: u64,
        model: Arc<str>,
        echo: Echo,
        choice: ChatChoiceState,
        prompt: (Option<&str>, &[u32]),
    ) -> Self {
        let messages = echo.response_messages.then(|| {
            let given = (prompt.0.unwrap_or_default().to_owned(), prompt.1.to_vec());
            (given, (String::new(), Vec::new()))
        });
        Self {
            id: echo
                .request_id
                .clone()
                .unwrap_or_else(|| format!("resp_{hex}")),
            messages,
            created,
            model,
            echo,
            choice,
            items: Vec::new(),
            open: false,
            finish: None,
            sequence: 0,
            store: false,
            previous_response_id: None,
        }
    }

    /// Appends the event `kind` with `fields` (a JSON object) after its type and
    /// sequence number.
    fn event<F: Serialize>(&mut self, buf: &mut Option<&mut Vec<u8>>, kind: &str, fields: F) {
        let Some(buf) = buf else { return };
        let sequence = self.sequence;
        self.sequence += 1;
        write_event(buf, kind, sequence, &fields);
    }

    /// The response object: `status`, the items so far (none while in progress).
    fn response(&self, status: &'static str, usage: Option<Usage>) -> ResponseObject<'_> {
        let done = status != "in_progress";
        let output = if done {
            self.items.iter().map(|i| i.json(true)).collect()
        } else {
            Vec::new()
        };
        ResponseObject {
            id: &self.id,
            object: "response",
            created_at: self.created,
            status,
            error: None,
            incomplete_details: (status == "incomplete").then_some(Incomplete {
                reason: "max_output_tokens",
            }),
            instructions: &self.echo.instructions,
            max_output_tokens: &self.echo.max_output_tokens,
            model: &self.model,
            output,
            parallel_tool_calls: &self.echo.parallel_tool_calls,
            previous_response_id: self.previous_response_id.as_deref(),
            reasoning: &self.echo.reasoning,
            store: self.store,
            temperature: &self.echo.temperature,
            text: &self.echo.text,
            tool_choice: &self.echo.tool_choice,
            tools: &self.echo.tools,
            top_logprobs: &self.echo.top_logprobs,
            top_p: &self.echo.top_p,
            truncation: "disabled",
            usage: usage
                .map(|u| ResponseUsage::from(u.with_reasoning(self.choice.reasoning_tokens()))),
            user: &self.echo.user,
            metadata: &self.echo.metadata,
            input_messages: self
                .messages
                .as_ref()
                .filter(|_| done)
                .map(|((text, ids), _)| [RawMessage::new(text, ids)]),
            output_messages: self.messages.as_ref().filter(|_| done).map(|(_, out)| {
                let (text, ids) = out;
                if text.is_empty() && ids.is_empty() {
                    Vec::new()
                } else {
                    vec![RawMessage::new(text, ids)]
                }
            }),
        }
    }

    fn status(&self) -> &'static str {
        if self.finish == Some("length") {
            "incomplete"
        } else {
            "completed"
        }
    }

    /// `response.created`, `response.in_progress`.
    pub fn start(&mut self, buf: &mut Vec<u8>) {
        // The in-progress object, serialized once for both events.
        let response = serde_json::value::to_raw_value(&self.response("in_progress", None));
        let Ok(response) = response else { return };
        for kind in ["response.created", "response.in_progress"] {
            let fields = WithResponse {
                response: &*response,
            };
            write_event(buf, kind, self.sequence, &fields);
            self.sequence += 1;
        }
    }

    /// The events of the next piece (`buf` `None`: the whole response only).
    pub fn step(&mut self, piece: Piece, buf: Option<&mut Vec<u8>>) {
        if let Some((_, (text, ids))) = &mut self.messages {
            text.push_str(&piece.text);
            ids.extend_from_slice(&piece.token_ids);
        }
        let delta = self.choice.step(piece);
        self.apply(delta, buf);
    }

    fn apply(&mut self, delta: ChatDelta, mut buf: Option<&mut Vec<u8>>) {
        let mut calls = delta.calls.into_iter().peekable();
        while let Some(call) = calls.next_if(|c| c.id.is_none()) {
            self.arguments(&call.arguments, &mut buf);
        }
        self.text(Kind::Reasoning, &delta.reasoning, None, &mut buf);
        let logprobs = delta.logprobs.as_deref();
        self.text(Kind::Message, &delta.content, logprobs, &mut buf);
        for call in calls {
            if let Some(call_id) = call.id {
                let kind = Kind::Call {
                    call_id,
                    name: call.name.unwrap_or_default(),
                };
                self.begin(kind, &mut buf);
            }
            self.arguments(&call.arguments, &mut buf);
        }
        if delta.finish.is_some() {
            self.finish = delta.finish;
        }
    }

    /// Reasoning or message text (a message's with the logprobs of its piece's tokens): to
    /// the open item of that kind, or a new one.
    fn text(
        &mut self,
        kind: Kind,
        text: &str,
        logprobs: Option<&[TokenLogprob]>,
        buf: &mut Option<&mut Vec<u8>>,
    ) {
        if text.is_empty() {
            return;
        }
        let continues = self.open && self.items.last().is_some_and(|i| i.kind == kind);
        if !continues {
            self.begin(kind, buf);
        }
        let at = self.items.len() - 1;
        let item = &mut self.items[at];
        item.text.push_str(text);
        let reasoning = item.kind == Kind::Reasoning;
        let logprobs = logprobs.unwrap_or_default();
        if !reasoning {
            item.logprobs.extend_from_slice(logprobs);
        }
        let Some(out) = buf else { return };
        let sequence = self.sequence;
        self.sequence += 1;
        let fields = TextDelta {
            item_id: &self.items[at].id,
            output_index: at,
            content_index: 0,
            delta: text,
            logprobs: (!reasoning).then_some(Streamed(logprobs)),
        };
        let kind = if reasoning {
            "response.reasoning_text.delta"
        } else {
            "response.output_text.delta"
        };
        write_event(out, kind, sequence, &fields);
    }

    /// Argument text of the call in progress (the open item, when it is a call).
    fn arguments(&mut self, text: &str, buf: &mut Option<&mut Vec<u8>>) {
        let at = self.items.len().wrapping_sub(1);
        let Some(item) = self.items.last_mut().filter(|_| self.open) else {
            return;
        };
        if text.is_empty() || !matches!(item.kind, Kind::Call { .. }) {
            return;
        }
        item.text.push_str(text);
        let Some(out) = buf else { return };
        let fields = ArgumentsDelta {
            item_id: &item.id,
            output_index: at,
            delta: text,
        };
        write_event(
            out,
            "response.function_call_arguments.delta",
            self.sequence,
            &fields,
        );
        self.sequence += 1;
    }

    /// Ends the open item, starts one of `kind`.
    fn begin(&mut self, kind: Kind, buf: &mut Option<&mut Vec<u8>>) {
        self.end(buf);
        let item = Item::new(kind);
        let at = self.items.len();
        let (id, added) = (item.id.clone(), item.json(false));
        let text_part = !matches!(item.kind, Kind::Call { .. });
        let part = empty_part(&item.kind);
        self.items.push(item);
        self.open = true;
        self.event(
            buf,
            "response.output_item.added",
            json!({"output_index": at, "item": added}),
        );
        if text_part {
            let fields = json!({"item_id": id, "output_index": at, "content_index": 0,
                                "part": part});
            self.event(buf, "response.content_part.added", fields);
        }
    }

    /// Ends the open item (its done events).
    fn end(&mut self, buf: &mut Option<&mut Vec<u8>>) {
        if !std::mem::take(&mut self.open) {
            return;
        }
        let at = self.items.len() - 1;
        let item = &self.items[at];
        let (id, text, kind, whole, part) = (
            item.id.clone(),
            item.text.clone(),
            item.kind.clone(),
            item.json(true),
            item.part(),
        );
        let streamed = item.streamed_logprobs();
        match &kind {
            Kind::Call { name, .. } => {
                let fields =
                    json!({"item_id": id, "output_index": at, "name": name, "arguments": text});
                self.event(buf, "response.function_call_arguments.done", fields);
            }
            Kind::Reasoning | Kind::Message => {
                let mut fields =
                    json!({"item_id": id, "output_index": at, "content_index": 0, "text": text});
                if kind == Kind::Reasoning {
                    self.event(buf, "response.reasoning_text.done", fields);
                } else {
                    fields["logprobs"] = streamed;
                    self.event(buf, "response.output_text.done", fields);
                }
                let fields = json!({"item_id": id, "output_index": at, "content_index": 0,
                                    "part": part});
                self.event(buf, "response.content_part.done", fields);
            }
        }
        self.event(
            buf,
            "response.output_item.done",
            json!({"output_index": at, "item": whole}),
        );
    }

    /// The stream's tail: the last item's end, then `response.completed` (or
    /// `response.incomplete` when cut by the token limit).
    pub fn finish(&mut self, buf: &mut Vec<u8>, usage: Usage) {
        let mut out = Some(buf);
        self.end(&mut out);
        let status = self.status();
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let Some(buf) = out else { return };
        write_event(
            buf,
            kind,
            self.sequence,
            &WithResponse {
                response: self.response(status, Some(usage)),
            },
        );
        self.sequence += 1;
    }

    /// An error after the stream began: one `error` event.
    pub fn failure(&mut self, buf: &mut Vec<u8>, err: &ApiError) {
        let body = err.body();
        let fields = json!({"code": body.error.kind, "message": body.error.message,
                            "param": null});
        self.event(&mut Some(buf), "error", fields);
    }

    /// The whole response.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The response object with `status` (`None`: the final status) and `usage`, as JSON.
    pub fn object(&self, status: Option<&'static str>, usage: Option<Usage>) -> Value {
        let status = status.unwrap_or_else(|| self.status());
        serde_json::to_value(self.response(status, usage)).unwrap_or_default()
    }

    pub fn body(mut self, usage: Usage) -> Vec<u8> {
        self.end(&mut None);
        serde_json::to_vec(&self.response(self.status(), Some(usage))).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod logprob_tests;
