use serde_json::json;

use super::*;

fn done(id: &str) -> Arc<Cell> {
    Cell::new(Entry::new(
        json!({"id": id, "status": "completed", "output": []}),
        vec![],
        vec![],
    ))
}

#[test]
fn the_least_recently_used_goes_first() {
    let store = ResponseStore::new(Some(2));
    store.put("a", done("a"));
    store.put("b", done("b"));
    assert!(store.get("a").is_some()); // now b is the oldest
    store.put("c", done("c"));
    assert!(store.get("b").is_none());
    assert!(store.get("a").is_some() && store.get("c").is_some());
    assert_eq!(store.len(), 2);
    assert!(store.delete("a").is_some() && store.get("a").is_none());
}

#[test]
fn stateful_fields_and_checks() {
    let off = ResponseStore::new(None);
    let asked = stateful(br#"{"input": "x", "background": true}"#, &off);
    assert!(asked.background && !asked.keep);
    let err = check(&asked, &off).unwrap_err();
    assert_eq!(err.body().error.param, Some("background"));
    let asked = stateful(br#"{"input": "x", "previous_response_id": "resp_1"}"#, &off);
    let err = check(&asked, &off).unwrap_err();
    assert_eq!(err.status().as_u16(), 404);
    assert_eq!(err.to_string(), "Response with id 'resp_1' not found.");
    let on = ResponseStore::new(Some(4));
    assert!(stateful(br#"{"input": "x"}"#, &on).keep);
    assert!(!stateful(br#"{"input": "x", "store": false}"#, &on).keep);
    assert!(!stateful(b"not json", &on).keep);
}

#[test]
fn history_is_vllms_rendering_with_the_calls_kept() {
    let entry = Entry::new(
        json!({"output": [
            {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "hmm"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "Hi."}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"}]}),
        vec![
            json!({"role": "system", "content": "old"}),
            json!({"role": "user", "content": "hello"}),
        ],
        vec![],
    );
    let history = history(&entry);
    assert_eq!(
        history,
        vec![
            json!({"role": "user", "content": "hello"}),
            json!({"role": "assistant", "content": "Hi."}),
            json!({"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}),
        ]
    );
    let cell = Cell::new(entry);
    let calls = known_calls(Some(&cell));
    assert!(calls.contains("c1") && calls.contains("c2") && calls.len() == 2);
    let mut messages = vec![
        json!({"role": "system", "content": "new"}),
        json!({"role": "user", "content": "next"}),
    ];
    continued(&mut messages, true, Some(&cell));
    assert_eq!(messages.len(), 5);
    assert_eq!(messages[1], json!({"role": "user", "content": "hello"}));
    assert_eq!(messages[4], json!({"role": "user", "content": "next"}));
}

#[test]
fn input_items_get_ids_and_parts() {
    let items = input_items(Some(&json!("hi")));
    assert_eq!(items[0]["type"], "message");
    assert_eq!(
        items[0]["content"],
        json!([{"type": "input_text", "text": "hi"}])
    );
    assert!(items[0]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("msg_")));
    let items = input_items(Some(&json!([
        {"role": "assistant", "content": "a", "id": "mine"},
        {"type": "function_call_output", "call_id": "c", "output": "1"}])));
    assert_eq!(items[0]["id"], "mine");
    assert_eq!(
        items[0]["content"],
        json!([{"type": "output_text", "text": "a"}])
    );
    assert!(items[1]["id"]
        .as_str()
        .is_some_and(|id| id.starts_with("fco_")));
}
