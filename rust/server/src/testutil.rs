//! Test fixtures: a tiny word-level model directory, and the serving state around an
//! engine client connected to the engine client crate's fake engine.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use vrs_engine_client::fake::{self, FakeEngine};
use vrs_engine_client::EngineClient;

use crate::edge::admission::Admission;
use crate::edge::body::MAX_BODY_BYTES;
use crate::edge::metrics::Metrics;
use crate::edge::queue::Queue;
use crate::logprobs::TokenTexts;
use crate::state::{AppState, HttpOptions};

/// Words of the tiny vocabulary; a word's id is its index.
pub const WORDS: &[&str] = &[
    "<s>",
    "</s>",
    "<unk>",
    "hello",
    "world",
    "foo",
    "bar",
    "STOP",
    "baz",
    "user",
    "assistant",
];
pub use vrs_engine_client::fake::MAX_MODEL_LEN;

// The fake engine reports this vocabulary in READY.
const _: () = assert!(WORDS.len() as u64 == fake::VOCAB_SIZE);

/// The tiny model's chat template; its `boom` kwarg makes it raise.
const TINY_TEMPLATE: &str = "{% for m in messages %}<s> {{ m.role }} {{ m.content }} {% endfor %}{% if add_generation_prompt %}assistant{% endif %}{% if boom %}{{ raise_exception('boom!') }}{% endif %}";

/// A model directory with a word-level tokenizer and a chat template.
pub fn tiny_model_dir() -> tempfile::TempDir {
    model_dir_with_template(TINY_TEMPLATE)
}

/// The tiny model's directory with `chat_template` as its chat template.
pub fn model_dir_with_template(chat_template: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let vocab: serde_json::Map<String, serde_json::Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| ((*w).to_owned(), serde_json::Value::from(i)))
        .collect();
    let special = |id: usize| {
        serde_json::json!({"id": id, "content": WORDS[id], "single_word": false, "lstrip": false,
                           "rstrip": false, "normalized": false, "special": true})
    };
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(0), special(1)],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let config = serde_json::json!({
        "bos_token": "<s>", "eos_token": "</s>",
        "chat_template": chat_template
    });
    std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
    dir
}

/// A connected client, its fake engine and the app state around them.
pub struct Harness {
    pub state: Arc<AppState>,
    pub client: Arc<EngineClient>,
    pub engine: FakeEngine,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Harness {
    pub fn start(script: Vec<u32>, delay: Duration) -> Self {
        Self::with_options(script, delay, HttpOptions::default())
    }

    /// A harness whose server has `options` (the body limit always the default).
    pub fn with_options(script: Vec<u32>, delay: Duration, options: HttpOptions) -> Self {
        Self::build(script, delay, options, None, None)
    }

    /// A harness whose fake engine is the pooling model `pooling` (its answers `delay`
    /// after each request), the server with `options`.
    pub fn pooling(pooling: fake::pooling::Pooling, delay: Duration, options: HttpOptions) -> Self {
        Self::build(vec![5], delay, options, None, Some(pooling))
    }

    /// A harness serving `served` instead of the tiny model's name, template and the fake
    /// engine's limits (the tokenizer stays the tiny word-level one).
    pub fn serving(
        script: Vec<u32>,
        delay: Duration,
        options: HttpOptions,
        served: &Served<'_>,
    ) -> Self {
        Self::build(script, delay, options, Some(served), None)
    }

    /// This harness with `readies` as the engines' READY messages the state keeps (what
    /// `/load` reports); the fake engine still answers every request.
    pub fn with_readies(mut self, readies: Vec<vrs_wire::Ready>) -> Self {
        Arc::get_mut(&mut self.state)
            .expect("a new harness's state is not shared")
            .readies = readies;
        self
    }

    fn build(
        script: Vec<u32>,
        delay: Duration,
        options: HttpOptions,
        served: Option<&Served<'_>>,
        pooling: Option<fake::pooling::Pooling>,
    ) -> Self {
        let model = model_dir_with_template(served.map_or(TINY_TEMPLATE, |s| s.chat_template));
        let connection = fake::connect_with(script, delay, pooling);
        let client = connection.client;
        let (tokenizer, template) = crate::text::load_text(model.path(), None).unwrap();
        let options = HttpOptions {
            max_request_body: MAX_BODY_BYTES,
            ..options
        };
        let state = Arc::new(AppState {
            client: Arc::clone(&client),
            token_texts: Arc::new(TokenTexts::new(tokenizer.clone())),
            tokenizer,
            template,
            model_name: Arc::from(served.map_or("tiny", |s| s.model_name)),
            model_root: model.path().display().to_string(),
            created: 1,
            max_model_len: served.map_or(connection.ready.max_model_len, |s| s.max_model_len),
            vocab_size: served.map_or(connection.ready.vocab_size, |s| s.vocab_size),
            eos_token_ids: connection.ready.eos_token_ids.clone(),
            serves: crate::state::Serves::of(&connection.ready),
            readies: vec![connection.ready.clone()],
            admission: Admission::new(options.max_concurrent_requests),
            queue: Queue::new(options.queue),
            options,
            metrics: Arc::new(Metrics::default()),
        });
        Self {
            state,
            client,
            engine: connection.engine,
            _dirs: (model, connection.ipc_dir),
        }
    }
}

/// What a [`Harness::serving`] serves in place of the tiny model: the name requests must
/// give, the chat template, and the context length and vocabulary size the request
/// checks use (the fake engine itself still reports its own in READY).
pub struct Served<'a> {
    pub model_name: &'a str,
    pub chat_template: &'a str,
    pub max_model_len: u64,
    pub vocab_size: u64,
}

/// One request through the serving router: (status, content type, body).
pub async fn call(
    h: &Harness,
    method: &str,
    path: &str,
    body: &str,
) -> (StatusCode, String, Bytes) {
    call_with_headers(h, method, path, body, &[]).await
}

/// One request through the serving router with extra `headers`: (status, content type,
/// body).
pub async fn call_with_headers(
    h: &Harness,
    method: &str,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, String, Bytes) {
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Body::from(body.to_owned())).unwrap();
    let response = crate::routes::router(Arc::clone(&h.state))
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    (status, content_type, bytes)
}

pub fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(bytes)))
}

/// The JSON payloads of an SSE body; asserts the framing and the final `[DONE]`.
pub fn events(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("bad event {e:?}"))
        })
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// The 400 of `body` on `path`: its `param` and message.
pub async fn bad_request(h: &Harness, path: &str, body: &str) -> (Value, String) {
    let (status, _, bytes) = call(h, "POST", path, body).await;
    let v = json_of(&bytes);
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
    let message = v["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (v["error"]["param"].clone(), message)
}
