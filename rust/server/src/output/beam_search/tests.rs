//! The search's steps and ranking on the shared table
//! `tests/request_cases/beam_search.json` (also run by tests/server/test_beam_search.py):
//! same candidates, same ties, same finished beams, bit for bit.

use serde_json::{json, Value};

use super::*;

const TABLE: &str = include_str!("../../../../../tests/request_cases/beam_search.json");

/// The case model's next-token logprobs after `tokens` (its `*` entry for any other).
fn entry(model: &Value, tokens: &[u32]) -> TokenLogprobs {
    let key: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let found = model
        .get(key.join(","))
        .or_else(|| model.get("*"))
        .unwrap_or_else(|| panic!("the case's model has no entry for {tokens:?}"));
    let top = found["top"].as_array().unwrap();
    TokenLogprobs {
        token_id: u32::try_from(found["token"].as_u64().unwrap()).unwrap(),
        logprob: found["logprob"].as_f64().unwrap(),
        rank: 1,
        top_token_ids: top
            .iter()
            .map(|p| u32::try_from(p[0].as_u64().unwrap()).unwrap())
            .collect(),
        top_logprobs: top.iter().map(|p| p[1].as_f64().unwrap()).collect(),
    }
}

fn searched(case: &Value) -> Vec<Beam> {
    let beam = BeamSearch {
        width: u32::try_from(case["width"].as_u64().unwrap()).unwrap(),
        length_penalty: case["length_penalty"].as_f64().unwrap(),
    };
    let eos: Vec<u32> = serde_json::from_value(case["eos_token_ids"].clone()).unwrap();
    let mut search = Search::new(beam, &eos, case["ignore_eos"].as_bool().unwrap());
    for _ in 0..case["max_tokens"].as_u64().unwrap() {
        let entries: Vec<TokenLogprobs> = search
            .beams
            .iter()
            .map(|b| entry(&case["model"], &b.tokens))
            .collect();
        search.advance(&entries);
        if search.beams.is_empty() {
            break;
        }
    }
    search.best()
}

#[test]
fn the_shared_table() {
    let table: Value = serde_json::from_str(TABLE).unwrap();
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 9);
    for case in cases {
        let got: Vec<Value> = searched(case)
            .iter()
            .map(|b| {
                json!({"tokens": b.tokens, "cum_logprob": b.cum_logprob, "steps": b.steps,
                       "finish": b.finish})
            })
            .collect();
        assert_eq!(Value::from(got), case["beams"], "case {}", case["id"]);
    }
}

#[test]
fn candidates_are_vllms_dict() {
    let entry = TokenLogprobs {
        token_id: 5,
        logprob: -0.9,
        rank: 3,
        top_token_ids: vec![6, 5, 7],
        top_logprobs: vec![-0.2, -0.3, -1.0],
    };
    assert_eq!(candidates(&entry), [(5, -0.3), (6, -0.2), (7, -1.0)]);
}

#[test]
fn score_divides_by_the_length_to_the_penalty() {
    let beam = |cum, steps| Beam::new(vec![4, 5], cum, steps, None);
    assert_eq!(score(&beam(-3.0, 3), 1.0), -1.0);
    assert_eq!(score(&beam(-3.0, 3), 0.0), -3.0);
    assert_eq!(score(&beam(-2.0, 0), 2.0), -2.0); // a beam of no token counts as 1
}
