//! Chat template content format: how a message's content reaches the chat template
//! (`--chat-template-content-format`, vLLM's option and values). Mirrors
//! `server/text/content_format.py` rule for rule.
//!
//! - `string`: a list of text parts is joined with `"\n"`; a string stays; null stays
//!   absent.
//! - `openai`: the content is a list of `{"type": "text", "text": ...}` parts (vLLM's
//!   rule): a list stays a list (each part reduced to those two keys), a string becomes a
//!   list of one part, null becomes `[]`.
//! - `auto` (default): `openai` when the template loops over a message's content, else
//!   `string`; decided once per template (the `tool_use` one separately), logged at start.
//!
//! Detection (vLLM's `_detect_content_format`, vllm/entrypoints/chat_utils.py), on
//! minijinja's syntax tree of the template:
//! 1. *messages names*: `messages`, then every `{% set NAME = E %}` whose `E` reads a
//!    messages name, to a fixed point. `E` reads `x` when it is `x`, or a filter or test
//!    applied to something that reads `x` (`x | reverse`), or a slice of it (`x[1:]`).
//! 2. *message names*: the target of every `{% for T in E %}` whose `E` reads a messages
//!    name.
//! 3. *content loops*: every `{% for P in E %}` whose `E` reads `m.content` or
//!    `m['content']` of a message name (through filters, tests and slices the same way),
//!    or is the bare name `content` (a macro parameter or variable of that name: vLLM's
//!    rule since vllm-project/vllm#42660, e.g. `{% for part in content %}` in a
//!    `render_content(content)` macro). `openai` when there is one.
//!
//! Anything else is `string`: a template that only prints or tests content, a loop over
//! another variable set from content, over `content | list`, or over
//! `messages[0].content`. A template that does not parse, a `set` of a tuple or namespace
//! attribute from a messages name, a loop with a tuple target over a messages name, or a
//! tuple target on the first content loop (in document order) also mean `string` (where
//! vLLM's walk gives up).
//! Checked against the shared table `tests/parser_cases/content_format.jsonl`.

use std::borrow::Cow;
use std::collections::BTreeSet;

use minijinja::machinery::ast::{Expr, ForLoop, Set, Stmt};
use minijinja::machinery::{parse, WhitespaceConfig};
use serde_json::{Map, Value as Json};

/// What the template receives as a message's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentFormat {
    /// One string: text parts joined with newlines.
    String,
    /// A list of `{"type": "text", "text": ...}` parts.
    OpenAi,
}

impl ContentFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::OpenAi => "openai",
        }
    }
}

/// `--chat-template-content-format`: a fixed format, or `auto` (detected per template).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentFormatOption {
    #[default]
    Auto,
    Fixed(ContentFormat),
}

impl ContentFormatOption {
    /// The option's value (`None`: `auto`); an error naming the choices otherwise.
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("auto") => Ok(Self::Auto),
            Some("string") => Ok(Self::Fixed(ContentFormat::String)),
            Some("openai") => Ok(Self::Fixed(ContentFormat::OpenAi)),
            Some(other) => Err(format!(
                "chat_template_content_format must be one of auto, string, openai; got {other:?}"
            )),
        }
    }

    /// The format for a template whose detected format is `detected`, and why (for the
    /// start-up log).
    pub fn resolve(self, detected: ContentFormat) -> (ContentFormat, String) {
        match self {
            Self::Fixed(format) if format == detected => {
                (format, "--chat-template-content-format".into())
            }
            Self::Fixed(format) => (
                format,
                format!(
                    "--chat-template-content-format; auto would give {}",
                    detected.name()
                ),
            ),
            Self::Auto => {
                let why = match detected {
                    ContentFormat::OpenAi => "the template loops over message content",
                    ContentFormat::String => "the template does not loop over message content",
                };
                (detected, format!("auto: {why}"))
            }
        }
    }
}

/// `openai` when the template `source` loops over a message's content, else `string`.
pub fn detect(source: &str) -> ContentFormat {
    let Ok(tree) = parse(
        source,
        "chat_template",
        // (`Default::default()`: SyntaxConfig is a unit struct unless minijinja's
        // custom_syntax feature is on somewhere in the build)
        Default::default(),
        WhitespaceConfig::default(),
    ) else {
        return ContentFormat::String;
    };
    let mut walk = Walk::default();
    walk.stmt(&tree);
    walk.format().unwrap_or(ContentFormat::String)
}

/// The `set`s and `for`s of a template, in document order.
#[derive(Default)]
struct Walk<'t, 's> {
    sets: Vec<&'t Set<'s>>,
    loops: Vec<&'t ForLoop<'s>>,
}

impl<'t, 's> Walk<'t, 's> {
    fn stmts(&mut self, stmts: &'t [Stmt<'s>]) {
        for stmt in stmts {
            self.stmt(stmt);
        }
    }

    fn stmt(&mut self, stmt: &'t Stmt<'s>) {
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::ForLoop(f) => {
                self.loops.push(f);
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(c) => {
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            Stmt::WithBlock(w) => self.stmts(&w.body),
            Stmt::Set(s) => self.sets.push(s),
            Stmt::SetBlock(s) => self.stmts(&s.body),
            Stmt::AutoEscape(a) => self.stmts(&a.body),
            Stmt::FilterBlock(f) => self.stmts(&f.body),
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Macro(m) => self.stmts(&m.body),
            Stmt::CallBlock(c) => self.stmts(&c.macro_decl.body),
            _ => {}
        }
    }

    /// The detected format; `None` where the walk gives up (a target it does not follow).
    fn format(&self) -> Option<ContentFormat> {
        let mut messages = BTreeSet::from(["messages"]);
        loop {
            let mut grew = false;
            for set in &self.sets {
                if messages.iter().any(|name| reads(&set.expr, name, None)) {
                    grew |= messages.insert(target(&set.target)?);
                }
            }
            if !grew {
                break;
            }
        }
        let mut message = BTreeSet::new();
        for each in &self.loops {
            if messages.iter().any(|name| reads(&each.iter, name, None)) {
                message.insert(target(&each.target)?);
            }
        }
        let first = self.loops.iter().find(|l| {
            message
                .iter()
                .any(|name| reads(&l.iter, name, Some("content")))
                || is_var(&l.iter, "content")
        });
        match first {
            None => Some(ContentFormat::String),
            Some(first) => target(&first.target).map(|_| ContentFormat::OpenAi),
        }
    }
}

/// The name a `set` or `for` binds; `None` for tuples and namespace attributes.
fn target<'s>(expr: &Expr<'s>) -> Option<&'s str> {
    match expr {
        Expr::Var(v) => Some(v.id),
        _ => None,
    }
}

/// Whether `expr` is `name` (with `key`: `name.key` / `name['key']`), possibly under
/// filters, tests and slices.
fn reads(expr: &Expr<'_>, name: &str, key: Option<&str>) -> bool {
    match expr {
        Expr::Filter(f) => f.expr.as_ref().is_some_and(|e| reads(e, name, key)),
        Expr::Test(t) => reads(&t.expr, name, key),
        Expr::Slice(s) => reads(&s.expr, name, key),
        Expr::Var(v) => key.is_none() && v.id == name,
        Expr::GetAttr(a) => key == Some(a.name) && is_var(&a.expr, name),
        Expr::GetItem(i) => match (&i.subscript_expr, key) {
            (Expr::Const(c), Some(key)) => c.value.as_str() == Some(key) && is_var(&i.expr, name),
            _ => false,
        },
        _ => false,
    }
}

fn is_var(expr: &Expr<'_>, name: &str) -> bool {
    matches!(expr, Expr::Var(v) if v.id == name)
}

/// A message's `content` in `format` (text parts are checked already: each is an object
/// with a string `text`); `None` when the message is to have no `content` key, borrowed
/// when unchanged.
pub(crate) fn convert(content: Option<&Json>, format: ContentFormat) -> Option<Cow<'_, Json>> {
    let text_of = |part: &Json| part.get("text").cloned().unwrap_or(Json::Null);
    match (format, content) {
        (ContentFormat::String, Some(Json::Array(parts))) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Json::as_str))
                .collect();
            Some(Cow::Owned(Json::String(texts.join("\n"))))
        }
        (ContentFormat::String, other) => other.filter(|c| !c.is_null()).map(Cow::Borrowed),
        (ContentFormat::OpenAi, None | Some(Json::Null)) => {
            Some(Cow::Owned(Json::Array(Vec::new())))
        }
        (ContentFormat::OpenAi, Some(Json::String(text))) => {
            Some(Cow::Owned(Json::Array(vec![text_part(Json::String(
                text.clone(),
            ))])))
        }
        (ContentFormat::OpenAi, Some(Json::Array(parts))) => Some(Cow::Owned(Json::Array(
            parts.iter().map(|p| text_part(text_of(p))).collect(),
        ))),
        (ContentFormat::OpenAi, Some(other)) => Some(Cow::Borrowed(other)),
    }
}

fn text_part(text: Json) -> Json {
    let mut part = Map::new();
    part.insert("type".into(), Json::String("text".into()));
    part.insert("text".into(), text);
    Json::Object(part)
}

#[cfg(test)]
mod tests;
