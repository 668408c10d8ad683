//! `/classify`, `/pooling` on a classifier, `/score` (cosine on an embedding model, pairs
//! on a cross-encoder) and the rerank routes (order, `top_n`, `return_documents`).

use std::time::Duration;

use serde_json::json;
use vrs_engine_client::fake::pooling::{
    activated, class_logits, embedding, normalized, pair_logit, Pooling,
};
use vrs_wire::PoolingTask::{Classify, Score};

use super::{embedder, f32s, floats, keys, ok, usage};
use crate::state::HttpOptions;
use crate::testutil::{bad_request, Harness};

#[tokio::test]
async fn classify_and_pooling_shapes() {
    let labels = ["neg", "pos", "meh"];
    let h = Harness::pooling(
        Pooling::new(&[Classify], &labels),
        Duration::ZERO,
        HttpOptions::default(),
    );
    let v = ok(&h, "/classify", json!({"input": ["hello world", "foo"]})).await;
    assert!(v["id"].as_str().unwrap().starts_with("classify-"), "{v}");
    assert_eq!(
        keys(&v),
        ["id", "object", "created", "model", "data", "usage"]
    );
    for (item, ids) in v["data"]
        .as_array()
        .unwrap()
        .iter()
        .zip([vec![3, 4], vec![5]])
    {
        assert_eq!(keys(item), ["index", "label", "probs", "num_classes"]);
        let probs = f32s(activated(&class_logits(&ids, 3)));
        let best = crate::routes::pooling::classify::argmax(&probs).unwrap();
        assert_eq!(floats(&item["probs"]), probs);
        assert_eq!(
            (item["label"].clone(), item["num_classes"].clone()),
            (json!(labels[best]), json!(3))
        );
    }
    assert_eq!(v["usage"], usage(3));
    let v = ok(
        &h,
        "/classify",
        json!({"input": [3], "use_activation": false}),
    )
    .await;
    assert_eq!(floats(&v["data"][0]["probs"]), f32s(class_logits(&[3], 3)));
    // A model without labels: transformers' default `LABEL_<i>`.
    let unlabelled = Harness::pooling(
        Pooling::new(&[Classify], &[]),
        Duration::ZERO,
        HttpOptions::default(),
    );
    let v = ok(&unlabelled, "/classify", json!({"input": [3]})).await;
    assert_eq!(
        (
            v["data"][0]["label"].clone(),
            v["data"][0]["num_classes"].clone()
        ),
        (json!("LABEL_0"), json!(1))
    );
    let v = ok(&h, "/pooling", json!({"input": [3]})).await;
    assert!(v["id"].as_str().unwrap().starts_with("pooling-"), "{v}");
    assert_eq!(keys(&v["data"][0]), ["index", "object", "data"]);
    assert_eq!(v["data"][0]["object"], "pooling");
    assert_eq!(
        floats(&v["data"][0]["data"]),
        f32s(activated(&class_logits(&[3], 3)))
    );
}

#[tokio::test]
async fn score_on_an_embedding_model_is_the_cosine_similarity() {
    let h = embedder();
    let body = json!({"queries": "hello", "documents": ["hello", "world foo"]});
    let v = ok(&h, "/score", body).await;
    assert!(v["id"].as_str().unwrap().starts_with("score-"), "{v}");
    assert_eq!(
        keys(&v),
        ["id", "object", "created", "model", "data", "usage"]
    );
    assert_eq!(keys(&v["data"][0]), ["index", "object", "score"]);
    let cosine = crate::routes::pooling::score::cosine;
    let q = f32s(normalized(&embedding(&[3])));
    let hello = cosine(&q, &q);
    assert!((hello - 1.0).abs() < 1e-12, "{hello}");
    assert_eq!(v["data"][0]["score"].as_f64().unwrap(), hello);
    let d = f32s(normalized(&embedding(&[4, 5])));
    assert_eq!(v["data"][1]["score"].as_f64().unwrap(), cosine(&q, &d));
    assert_eq!(v["usage"], usage(4), "each text counted once");
    assert_eq!(h.engine.added().len(), 3, "the query embedded once");
    for (body, words) in [
        (
            json!({"text_1": ["a", "b"], "text_2": ["a", "b", "c"]}),
            "1:1, 1:N or N:N",
        ),
        (
            json!({"text_1": [], "text_2": ["a"]}),
            "At least one text element must be given (`text_1` is empty)",
        ),
        (json!({"text_1": "a"}), "`text_2` is required"),
        (
            json!({}),
            "send the texts to score as `queries` and `documents`",
        ),
        (
            json!({"text_1": "a", "text_2": "b", "max_tokens_per_doc": 3}),
            "send 0 or leave it out",
        ),
        (
            json!({"text_1": "a", "text_2": [{"type": "image_url"}]}),
            "multi-modal score inputs are not supported",
        ),
    ] {
        let (_, message) = bad_request(&h, "/v1/score", &body.to_string()).await;
        assert!(message.contains(words), "{body}: {message}");
    }
}

#[tokio::test]
async fn score_on_a_cross_encoder_tokenizes_each_pair_together() {
    let h = Harness::pooling(
        Pooling::new(&[Score], &[]),
        Duration::ZERO,
        HttpOptions::default(),
    );
    let v = ok(
        &h,
        "/v1/score",
        json!({"text_1": "hello world", "text_2": ["foo", "bar baz"]}),
    )
    .await;
    let sent = h.engine.added();
    assert_eq!(sent[0].prompt_token_ids, [3, 4, 5]);
    assert_eq!(sent[1].prompt_token_ids, [3, 4, 6, 8]);
    for (req, item) in sent.iter().zip(v["data"].as_array().unwrap()) {
        let params = req.pooling_params.as_ref().unwrap();
        assert_eq!(
            (params.task.as_str(), params.token_type_start),
            ("score", Some(2))
        );
        let want = f32s(activated(&[pair_logit(&req.prompt_token_ids, Some(2))]));
        assert_eq!(item["score"].as_f64().unwrap(), want[0]);
    }
    assert_eq!(v["usage"], usage(7));
}

#[tokio::test]
async fn rerank_sorts_keeps_top_n_and_returns_documents() {
    let h = embedder();
    let body = json!({"query": "hello", "documents": ["world", "hello", "foo bar"], "top_n": 2});
    for path in ["/rerank", "/v1/rerank", "/v2/rerank"] {
        let v = ok(&h, path, body.clone()).await;
        assert_eq!(keys(&v), ["id", "model", "usage", "results"]);
        assert_eq!(v["usage"], json!({"prompt_tokens": 5, "total_tokens": 5}));
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(keys(&results[0]), ["index", "document", "relevance_score"]);
        assert_eq!(results[0]["index"], 1);
        assert_eq!(
            results[0]["document"],
            json!({"text": "hello", "multi_modal": null})
        );
        let hello = f32s(normalized(&embedding(&[3])));
        let top = crate::routes::pooling::score::cosine(&hello, &hello);
        assert_eq!(results[0]["relevance_score"].as_f64().unwrap(), top);
        let scores: Vec<f64> = results
            .iter()
            .map(|r| r["relevance_score"].as_f64().unwrap())
            .collect();
        assert!(scores[0] >= scores[1], "{v}");
    }
    let body = json!({"query": "hello", "documents": ["world", "hello", "foo"], "return_documents": false});
    let v = ok(&h, "/rerank", body).await;
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "top_n 0: all");
    assert_eq!(keys(&results[0]), ["index", "relevance_score"]);
    let mut indices: Vec<u64> = results
        .iter()
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    indices.sort_unstable();
    assert_eq!(indices, [0, 1, 2]);
}

/// `/invocations` on a pooling model: the body's keys pick the route (`query` rerank,
/// `text_1` score, `input` the model's task), the answer that route's; else a 400.
#[tokio::test]
async fn invocations_route_a_pooling_body_by_its_keys() {
    let unstamped = |mut v: serde_json::Value| {
        let map = v.as_object_mut().unwrap();
        map.remove("id");
        map.remove("created");
        v
    };
    let embed = embedder();
    let scorer = Harness::pooling(
        Pooling::new(&[Classify, Score], &[]),
        Duration::ZERO,
        HttpOptions::default(),
    );
    let rerank = json!({"query": "q", "documents": ["a b", "c"]});
    let cases = [
        (
            &embed,
            json!({"input": ["one", "two three"]}),
            "/v1/embeddings",
        ),
        (&embed, rerank.clone(), "/rerank"),
        (
            &scorer,
            json!({"text_1": "q", "text_2": ["a", "b"]}),
            "/score",
        ),
        (&scorer, json!({"input": "q"}), "/classify"),
        (&scorer, rerank, "/rerank"),
    ];
    for (h, body, path) in cases {
        let got = ok(h, "/invocations", body.clone()).await;
        let want = ok(h, path, body).await;
        assert_eq!(unstamped(got), unstamped(want), "{path}");
    }
    let (_, message) = bad_request(&embed, "/invocations", r#"{"prompt": "x"}"#).await;
    assert!(
        message.contains("Cannot find suitable handler") && message.contains("`query`"),
        "{message}"
    );
}
