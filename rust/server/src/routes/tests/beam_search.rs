//! Beam search through the serving router and the fake engine (whose every request
//! samples the script's first token, with logprobs -0.5, -1.5, ... for that token and the
//! ids after it): the steps it sends, the beams it answers (whole and streamed), the
//! replayed choices' usage, and what it refuses.

use super::*;

const COMPLETION: &str = "/v1/completions";
const CHAT: &str = "/v1/chat/completions";

fn texts(v: &Value) -> Vec<(String, String)> {
    v["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = c["text"]
                .as_str()
                .or_else(|| c["message"]["content"].as_str())
                .unwrap_or_default();
            (
                text.to_owned(),
                c["finish_reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn completions_beams_and_their_steps() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"prompt": [3, 4], "max_tokens": 3, "n": 2, "use_beam_search": true,
                      "temperature": 0.8, "top_p": 0.5});
    let (status, _, bytes) = call(&h, "POST", COMPLETION, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v = json_of(&bytes);
    // Token 5 then 6, 7, 8 at -0.5, -1.5, ...: the table's "ties-keep-their-order".
    let want = [(" foo foo foo", "length"), (" foo foo bar", "length")];
    let want: Vec<_> = want
        .iter()
        .map(|(t, f)| ((*t).into(), (*f).into()))
        .collect();
    assert_eq!(texts(&v), want);
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 6, "total_tokens": 8,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
    let steps = h.engine.added();
    let prompts: Vec<Vec<u32>> = steps.iter().map(|r| r.prompt_token_ids.clone()).collect();
    assert_eq!(
        prompts,
        [
            vec![3, 4],
            vec![3, 4, 5],
            vec![3, 4, 6],
            vec![3, 4, 5, 5],
            vec![3, 4, 5, 6]
        ]
    );
    for step in &steps {
        let sp = &step.sampling_params;
        assert_eq!(
            (sp.max_tokens, sp.temperature, sp.logprobs),
            (1, 0.0, Some(4))
        );
        assert_eq!((sp.top_p, sp.seed), (1.0, None));
    }
    // Every step finished: nothing to abort.
    assert!(h.engine.aborted().is_empty());
}

#[tokio::test]
async fn a_seeded_search_seeds_each_step_request() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"prompt": [3], "max_tokens": 2, "n": 2, "use_beam_search": true,
                      "seed": i64::MAX});
    let (status, _, _) = call(&h, "POST", COMPLETION, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let seeds: Vec<_> = h
        .engine
        .added()
        .iter()
        .map(|r| r.sampling_params.seed)
        .collect();
    assert_eq!(seeds, [Some(i64::MAX), Some(i64::MIN), Some(i64::MIN + 1)]);
}

#[tokio::test]
async fn chat_beams_whole_and_streamed() {
    // Token 10 then 0, 1 (EOS), 2: a finished beam, favoured by a negative penalty.
    let h = Harness::start(vec![10], Duration::ZERO);
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "max_tokens": 2, "n": 2, "use_beam_search": true,
                      "length_penalty": -1});
    let (status, _, bytes) = call(&h, "POST", CHAT, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v = json_of(&bytes);
    let want: Vec<(String, String)> = vec![
        (" assistant assistant".into(), "length".into()),
        (String::new(), "stop".into()),
    ];
    assert_eq!(texts(&v), want);
    // The finished beam's EOS is not counted (vLLM's beam usage).
    assert_eq!(v["usage"]["completion_tokens"], 2);

    let body = json!({"messages": messages, "max_tokens": 2, "n": 2, "use_beam_search": true,
                      "length_penalty": -1, "stream": true,
                      "stream_options": {"include_usage": true}});
    let (status, ct, bytes) = call(&h, "POST", CHAT, &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = events(&bytes);
    let mut streamed = vec![(String::new(), String::new()); 2];
    for e in &evs {
        for c in e["choices"].as_array().unwrap() {
            let i = usize::try_from(c["index"].as_u64().unwrap()).unwrap();
            streamed[i].0 += c["delta"]["content"].as_str().unwrap_or_default();
            if let Some(f) = c["finish_reason"].as_str() {
                streamed[i].1 = f.to_owned();
            }
        }
    }
    assert_eq!(streamed, want);
    assert_eq!(evs.last().unwrap()["usage"], v["usage"]);
}

#[tokio::test]
async fn a_batch_searches_each_prompt() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"prompt": ["hello", "world bar"], "max_tokens": 1, "n": 2,
                      "use_beam_search": true, "echo": true});
    let (status, _, bytes) = call(&h, "POST", COMPLETION, &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let v = json_of(&bytes);
    let got: Vec<String> = texts(&v).into_iter().map(|(t, _)| t).collect();
    assert_eq!(
        got,
        ["hello foo", "hello bar", "world bar foo", "world bar bar"]
    );
    let indexes: Vec<_> = v["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].clone())
        .collect();
    assert_eq!(indexes, [json!(0), json!(1), json!(2), json!(3)]);
    assert_eq!(v["usage"]["prompt_tokens"], 3);
    assert_eq!(v["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn refusals_name_the_field() {
    let h = Harness::start(vec![5], Duration::ZERO);
    for (path, body, param) in [
        (COMPLETION, json!({"prompt": "x", "stream": true}), "stream"),
        (COMPLETION, json!({"prompt": "x", "n": 11}), "n"),
        (
            COMPLETION,
            json!({"prompt": "x", "logprobs": 1}),
            "logprobs",
        ),
        (
            COMPLETION,
            json!({"prompt": "x", "max_tokens": 0, "echo": true}),
            "max_tokens",
        ),
        (
            CHAT,
            json!({"messages": [{"role": "user", "content": "x"}], "logprobs": true}),
            "logprobs",
        ),
        (
            CHAT,
            json!({"messages": [{"role": "user", "content": "x"}],
                      "response_format": {"type": "json_object"}}),
            "response_format",
        ),
        (
            COMPLETION,
            json!({"prompt": "x", "structured_outputs": {"regex": "a+"}}),
            "structured_outputs.regex",
        ),
    ] {
        let mut body = body;
        body["use_beam_search"] = json!(true);
        let (got, _) = crate::testutil::bad_request(&h, path, &body.to_string()).await;
        assert_eq!(got, param, "{body}");
    }
    assert!(h.engine.added().is_empty());
}

/// 40 steps of the fake's 20 ms: longer than the tests below wait.
const LONG: &str = r#"{"prompt": [3], "max_tokens": 40, "n": 2, "use_beam_search": true}"#;

/// Whether the engine gets no new request for 200 ms, within 5 s.
async fn stops_sending(h: &Harness) -> bool {
    for _ in 0..25 {
        let before = h.engine.added().len();
        tokio::time::sleep(Duration::from_millis(200)).await;
        if h.engine.added().len() == before {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn the_request_timeout_covers_the_search() {
    let options = crate::state::HttpOptions {
        request_timeout: Some(Duration::from_millis(300)),
        ..Default::default()
    };
    let h = Harness::with_options(vec![5], Duration::from_millis(20), options);
    let (status, _, bytes) = call(&h, "POST", COMPLETION, LONG).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{}", json_of(&bytes));
    assert_eq!(json_of(&bytes)["error"]["type"], "TimeoutError");
    assert!(stops_sending(&h).await);
    assert!(
        h.engine.added().len() < 1 + 2 * 39,
        "the search stopped early"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_ends_the_search() {
    let h = Harness::start(vec![5], Duration::from_millis(20));
    let gone = tokio::time::timeout(
        Duration::from_millis(300),
        call(&h, "POST", COMPLETION, LONG),
    )
    .await;
    assert!(gone.is_err(), "the search was still running");
    assert!(h.engine.added().len() > 1, "it had sent steps");
    assert!(stops_sending(&h).await);
    assert!(
        h.engine.added().len() < 1 + 2 * 39,
        "the search stopped early"
    );
    // The steps running when it went were aborted (their handles dropped).
    let aborted = h.engine.aborted();
    assert!(
        !aborted.is_empty() && aborted.iter().all(|id| id.contains('-')),
        "{aborted:?}"
    );
}
