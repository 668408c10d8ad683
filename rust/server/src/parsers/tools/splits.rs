//! Randomized split test: outputs built from every format's calls, syntax pieces and
//! cuts, pushed whole and in random pieces, give the same content and calls.

use serde_json::json;

use super::*;

/// Random outputs built from every format's syntax pieces: pushed whole and in random
/// pieces they give the same content and calls, and nothing panics.
#[test]
fn random_outputs_split_anywhere_agree_with_whole_ones() {
    const PIECES: &[&str] = &[
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<tool_call>",
        "</tool_call>",
        "<|python_tag|>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁sep｜>",
        "function",
        "\n```json\n",
        "\n```",
        "<|tool_call|>",
        "<function=f>",
        "<parameter=a>",
        "</parameter>",
        "</function>",
        "<|python_start|>",
        "<|python_end|>",
        "{\"name\": \"f\", \"arguments\": ",
        "{\"name\": \"g\", \"parameters\": ",
        "{\"arguments\": {}, \"name\": \"f\"}",
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        ",",
        ";",
        " ",
        "\n",
        "\"",
        "\\",
        "\\u00e9",
        "\\ud83c",
        "'",
        "f(",
        "g(",
        "a=",
        "1",
        "True",
        "None",
        "é",
        "🌸",
        "東京",
        "x",
        "f",
        "=",
        "\"s\"",
        ":",
        "{\"k\": [1, \"}\"]}",
    ];
    // Well-formed calls per format, in PARSER_NAMES' order.
    const CALLS: [&[&str]; 8] = [
        &["<｜tool▁call▁begin｜>{\"name\": \"f\", \"arguments\": {\"a\": \"}\"}}<｜tool▁call▁end｜>"],
        &["<tool_call>\n{\"name\": \"g\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>"],
        &["{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "; "],
        &["[TOOL_CALLS]f[ARGS]{\"a\": [1]}", "[TOOL_CALLS] [{\"name\": \"g\", \"arguments\": {}}]"],
        &["<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"],
        &["<tool_call>\n<function=f>\n<parameter=a>\n7\n</parameter>\n</function>\n</tool_call>"],
        &["[f(a=1, b='x'), g()]", "[g(c=[1, (2,)], d={'k': None})]"],
        &["<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 3}}, {\"name\": \"g\", \"arguments\": {}}]"],
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        // splitmix64
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    let tools = vec![
        json!({"type": "function", "function": {"name": "f",
            "parameters": {"properties": {"a": {"type": "integer"}}}}}),
        json!({"type": "function", "function": {"name": "g"}}),
    ];
    let modes = [ToolMode::Auto, ToolMode::Required, ToolMode::Named];
    let mut made = [0usize; 8];
    for round in 0..3000 {
        let name = PARSER_NAMES[round % PARSER_NAMES.len()];
        let calls = CALLS[round % PARSER_NAMES.len()];
        let mut text: String = (0..1 + next(12))
            .map(|_| match next(3) {
                0 => calls[next(calls.len())],
                _ => PIECES[next(PIECES.len())],
            })
            .collect();
        if next(4) == 0 {
            let cut = text
                .char_indices()
                .map(|(i, _)| i)
                .nth(next(text.chars().count()));
            text.truncate(cut.unwrap_or(text.len()));
        }
        let format = ToolFormat::from_name(name).unwrap();
        let mode = modes[next(modes.len())];
        let settings = ToolSettings {
            tools: Some(tools.clone()),
            mode,
            name: (mode == ToolMode::Named).then(|| "f".to_owned()),
            parallel: next(2) == 0,
        };
        let mut whole = ToolCallParser::new(format, &settings);
        let (content, calls) = collect(&mut whole, &[&text]);
        if mode == ToolMode::Auto && !calls.is_empty() {
            made[round % PARSER_NAMES.len()] += 1;
        }
        let cuts: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .filter(|_| next(3) == 0)
            .collect();
        let mut pieces = Vec::new();
        let mut at = 0;
        for cut in cuts.into_iter().chain([text.len()]) {
            pieces.push(&text[at..cut]);
            at = cut;
        }
        let mut split = ToolCallParser::new(format, &settings);
        let got = collect(&mut split, &pieces);
        assert_eq!(
            got,
            (content, calls),
            "{name} {mode:?} {text:?} in {pieces:?}"
        );
    }
    assert!(
        made.iter().all(|&n| n >= 20),
        "outputs with calls per parser: {made:?}"
    );
}

fn collect(parser: &mut ToolCallParser, pieces: &[&str]) -> (String, Vec<(String, String)>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut deltas: Vec<ToolDelta> = pieces.iter().map(|p| parser.push(p)).collect();
    deltas.push(parser.finish());
    for d in deltas {
        content.push_str(&d.content);
        ToolCall::accumulate(&mut calls, &d.calls);
    }
    let calls = calls.into_iter().map(|c| (c.name, c.arguments)).collect();
    (content, calls)
}
