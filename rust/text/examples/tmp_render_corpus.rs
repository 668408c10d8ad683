use std::io::Read;
use std::path::Path;
use serde_json::{json, Value};
use vrs_text::{ChatTemplate, ChatTemplateInput, Tokenizer};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tok = Tokenizer::from_dir(Path::new(&args[1])).unwrap();
    let tpl = ChatTemplate::from_config(tok.config(), args.get(2).map(Path::new)).unwrap();
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let cases: Vec<Value> = serde_json::from_str(&s).unwrap();
    let mut out = vec![];
    for c in cases {
        let input = ChatTemplateInput {
            messages: c["messages"].as_array().unwrap().clone(),
            tools: c["tools"].as_array().cloned(),
            documents: None,
            add_generation_prompt: c["agp"].as_bool().unwrap(),
            continue_final_message: c["cfm"].as_bool().unwrap(),
            kwargs: c["kwargs"].as_object().cloned().unwrap_or_default(),
        };
        match tpl.render(&input) {
            Ok(t) => { let ids = tok.encode(&t, false).unwrap(); out.push(json!({"text": t, "ids": ids})) }
            Err(e) => out.push(json!({"error": e.to_string()})),
        }
    }
    println!("{}", serde_json::to_string(&out).unwrap());
}
