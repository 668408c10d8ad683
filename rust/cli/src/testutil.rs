//! Test fixtures: a tiny word-level model directory and a fake engine that speaks the
//! real wire (handshake included) with scripted tokens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vrs_wire::{
    AbortRequests, EngineCoreOutput, EngineCoreRequest, EngineOutputs, HandshakeKind, Hello, Init,
    Ready, RequestType, ENGINE_DEAD_SENTINEL,
};

use crate::admission::Admission;
use crate::engine_client::EngineClient;
use crate::launcher;
use crate::logprobs::TokenTexts;
use crate::metrics::Metrics;
use crate::server::{AppState, HttpOptions};

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
pub const MAX_MODEL_LEN: u64 = 64;

/// A model directory with a word-level tokenizer and a chat template.
pub fn tiny_model_dir() -> tempfile::TempDir {
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
        "chat_template": "{% for m in messages %}<s> {{ m.role }} {{ m.content }} {% endfor %}{% if add_generation_prompt %}assistant{% endif %}{% if boom %}{{ raise_exception('boom!') }}{% endif %}"
    });
    std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
    dir
}

/// What the fake engine received.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Add(EngineCoreRequest),
    Abort(Vec<String>),
}

/// Controls and observations of a running fake engine.
#[derive(Clone, Default)]
pub struct FakeEngine {
    pub received: Arc<Mutex<Vec<Received>>>,
    pub kill: Arc<AtomicBool>,
}

impl FakeEngine {
    pub fn aborted(&self) -> Vec<String> {
        let log = self.received.lock().unwrap();
        log.iter()
            .filter_map(|r| match r {
                Received::Abort(ids) => Some(ids.clone()),
                Received::Add(_) => None,
            })
            .flatten()
            .collect()
    }

    pub fn added(&self) -> Vec<EngineCoreRequest> {
        let log = self.received.lock().unwrap();
        log.iter()
            .filter_map(|r| match r {
                Received::Add(req) => Some(req.clone()),
                Received::Abort(_) => None,
            })
            .collect()
    }

    /// Waits up to 5 s for `pred` on the log.
    pub fn wait_for(&self, pred: impl Fn(&FakeEngine) -> bool) -> bool {
        for _ in 0..500 {
            if pred(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// The engine side of the handshake, then a loop emitting `script` tokens (cycled), one
/// per step; `failed` answers INIT with FAILED instead.
pub fn run_fake_engine(
    address: String,
    script: Vec<u32>,
    delay: Duration,
    fake: FakeEngine,
    protocol_version: u32,
    failed: Option<String>,
) {
    let ctx = zmq::Context::new();
    let hs = ctx.socket(zmq::DEALER).unwrap();
    hs.set_identity(&[0, 0]).unwrap();
    hs.set_linger(1000).unwrap();
    hs.connect(&address).unwrap();
    let hello = Hello {
        protocol_version,
        engine_index: 0,
        pid: std::process::id(),
    };
    hs.send_multipart(
        [
            vec![HandshakeKind::Hello.as_byte()],
            vrs_wire::encode(&hello).unwrap(),
        ],
        0,
    )
    .unwrap();
    if hs.poll(zmq::POLLIN, 5000).unwrap() == 0 {
        return;
    }
    let frames = hs.recv_multipart(0).unwrap();
    let init: Init = vrs_wire::decode(&frames[1]).unwrap();
    if let Some(message) = failed {
        let body = vrs_wire::encode(&vrs_wire::Failed {
            engine_index: 0,
            message,
        })
        .unwrap();
        hs.send_multipart([vec![HandshakeKind::Failed.as_byte()], body], 0)
            .unwrap();
        return;
    }
    let input = ctx.socket(zmq::DEALER).unwrap();
    input.set_identity(&[0, 0]).unwrap();
    input.connect(&init.input_address).unwrap();
    let output = ctx.socket(zmq::PUSH).unwrap();
    output.set_linger(1000).unwrap();
    output.connect(&init.output_address).unwrap();
    let ready = Ready {
        engine_index: 0,
        max_model_len: MAX_MODEL_LEN,
        vocab_size: WORDS.len() as u64,
        block_size: 16,
        num_kv_blocks: 0,
        eos_token_ids: vec![1],
        model_name: "tiny".into(),
        is_mock: true,
    };
    let body = vrs_wire::encode(&ready).unwrap();
    hs.send_multipart([vec![HandshakeKind::Ready.as_byte()], body.clone()], 0)
        .unwrap();
    input
        .send_multipart([vec![HandshakeKind::Ready.as_byte()], body], 0)
        .unwrap();

    let mut running: Vec<(EngineCoreRequest, usize)> = Vec::new();
    loop {
        if fake.kill.load(Ordering::SeqCst) {
            output.send(ENGINE_DEAD_SENTINEL, 0).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            return;
        }
        let mut outputs = Vec::new();
        let wait = if running.is_empty() { 20 } else { 0 };
        while input.poll(zmq::POLLIN, wait).unwrap() > 0 {
            let frames = input.recv_multipart(0).unwrap();
            if frames[0] == [RequestType::Add.as_byte()] {
                let req: EngineCoreRequest = vrs_wire::decode(&frames[1]).unwrap();
                fake.received
                    .lock()
                    .unwrap()
                    .push(Received::Add(req.clone()));
                running.push((req, 0));
            } else {
                let abort: AbortRequests = vrs_wire::decode(&frames[1]).unwrap();
                fake.received
                    .lock()
                    .unwrap()
                    .push(Received::Abort(abort.request_ids.clone()));
                running.retain(|(r, _)| !abort.request_ids.contains(&r.request_id));
                for id in abort.request_ids {
                    outputs.push(output_of(id, vec![], Some("abort"), None));
                }
            }
            if !running.is_empty() {
                break;
            }
        }
        if !running.is_empty() {
            std::thread::sleep(delay);
        }
        running.retain_mut(|(req, generated)| {
            let token = script[*generated % script.len()];
            *generated += 1;
            let sp = &req.sampling_params;
            let (finish, stop) =
                if sp.stop_token_ids.contains(&token) || (!sp.ignore_eos && token == 1) {
                    (Some("stop"), Some(token))
                } else if *generated >= sp.max_tokens as usize {
                    (Some("length"), None)
                } else {
                    (None, None)
                };
            outputs.push(output_of(req.request_id.clone(), vec![token], finish, stop));
            finish.is_none()
        });
        if !outputs.is_empty() {
            let message = EngineOutputs {
                engine_index: 0,
                outputs,
                timestamp: 0.0,
                scheduler_stats: None,
                utility_output: None,
            };
            output.send(vrs_wire::encode(&message).unwrap(), 0).unwrap();
        }
    }
}

fn output_of(
    id: String,
    ids: Vec<u32>,
    finish: Option<&str>,
    stop: Option<u32>,
) -> EngineCoreOutput {
    EngineCoreOutput {
        request_id: id,
        new_token_ids: ids,
        finish_reason: finish.map(str::to_owned),
        stop_token_id: stop,
        new_logprobs: None,
        num_cached_tokens: 0,
        error_message: None,
    }
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
        let model = tiny_model_dir();
        let sockets = launcher::bind_sockets().unwrap();
        let engine = FakeEngine::default();
        let (address, fake) = (sockets.handshake_address.clone(), engine.clone());
        std::thread::spawn(move || run_fake_engine(address, script, delay, fake, 1, None));
        let (_tx, exit) = tokio::sync::watch::channel(None);
        let cancel = AtomicBool::new(false);
        let config = launcher::json_to_msgpack(&serde_json::json!({"model": "tiny"}));
        let (connected, ipc) =
            launcher::handshake(sockets, exit, config, Duration::from_secs(10), &cancel).unwrap();
        let client =
            EngineClient::start(connected.input, connected.output, vec![connected.identity])
                .unwrap();
        let (tokenizer, template) = crate::chat::load_text(model.path(), None).unwrap();
        let options = HttpOptions {
            max_request_body: crate::server::MAX_BODY_BYTES,
            ..HttpOptions::default()
        };
        let state = Arc::new(AppState {
            client: Arc::clone(&client),
            token_texts: Arc::new(TokenTexts::new(tokenizer.clone())),
            tokenizer,
            template,
            model_name: Arc::from("tiny"),
            model_root: model.path().display().to_string(),
            created: 1,
            max_model_len: connected.ready.max_model_len,
            vocab_size: connected.ready.vocab_size,
            admission: Admission::new(options.max_concurrent_requests),
            options,
            metrics: Arc::new(Metrics::default()),
        });
        Self {
            state,
            client,
            engine,
            _dirs: (model, ipc),
        }
    }
}
