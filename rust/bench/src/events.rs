//! What `vrs-rs bench serve` tells its caller: one JSON object per stdout line.
//!
//! `{"event":"info",...}` once the target is known, `{"event":"phase","phase":...}` when
//! warm-up or the measured run starts, `{"event":"progress","completed":n,"failed":m,
//! "total":t,"elapsed_s":s,"p50_ttft_ms":..,"p99_ttft_ms":..,"p50_e2el_ms":..,
//! "p99_e2el_ms":..}` while it runs (see [`crate::progress`]), then `{"event":"result",...}` (the result-file keys), or
//! `{"event":"error","message":...}` and a non-zero exit.

use std::io::Write;

use serde_json::{json, Map, Value};

/// Writes one event line; a closed stdout (the caller went away) is ignored.
pub fn emit(event: &str, fields: Map<String, Value>) {
    let mut line = Map::with_capacity(fields.len() + 1);
    line.insert("event".into(), Value::String(event.into()));
    line.extend(fields);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", Value::Object(line));
    let _ = out.flush();
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

pub fn info(url: &str, model: &str, tokenizer: &str, num_prompts: usize) {
    let fields =
        json!({"url": url, "model": model, "tokenizer": tokenizer, "num_prompts": num_prompts});
    emit("info", object(fields));
}

pub fn phase(name: &str, total: usize) {
    emit("phase", object(json!({"phase": name, "total": total})));
}

pub fn error(message: &str) {
    let line = message.split_whitespace().collect::<Vec<_>>().join(" ");
    emit("error", object(json!({"message": line})));
}
