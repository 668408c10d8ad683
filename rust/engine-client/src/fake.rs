//! A fake engine for tests (feature `test-util`): it speaks the real wire, handshake
//! included, and emits scripted tokens, one per step. Logprobs are synthetic and
//! deterministic ([`prompt_logprobs`], [`token_logprobs`]); a request's first output
//! carries [`QUEUE_TIME`], [`PREFILL_TIME`] and its prefix-cache hit ([`cached_tokens`]:
//! the whole [`BLOCK_SIZE`] blocks it shares with a prompt the fake saw before), its last
//! [`DECODE_TIME`]. A request whose structured-output regex is [`INVALID_REGEX`] ends at
//! once with `error` and `error_kind` `invalid_request` (as the engine refuses a spec that
//! does not compile); one whose regex is [`FAILING_REGEX`] ends with `error` and no kind
//! (the engine failed it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vrs_wire::{
    AbortRequests, EngineCoreOutput, EngineCoreRequest, EngineOutputs, ErrorKind, HandshakeKind,
    Hello, Init, Ready, RequestType, ENGINE_DEAD_SENTINEL,
};

use crate::client::EngineClient;
use crate::launcher;

mod logprobs;
pub mod pooling;
pub mod vllm;

pub use logprobs::{prompt_logprobs, token_logprobs};

/// The context length the fake engine reports in READY.
pub const MAX_MODEL_LEN: u64 = 64;
/// The vocabulary size the fake engine reports in READY (token 1 is its EOS).
pub const VOCAB_SIZE: u64 = 11;

/// The queue time (seconds) the fake engine reports with a request's first output.
pub const QUEUE_TIME: f64 = 0.25;
/// The prefill time (seconds) it reports with it.
pub const PREFILL_TIME: f64 = 0.125;
/// The decode time (seconds) it reports with a request's final output.
pub const DECODE_TIME: f64 = 0.5;

/// The block size of the fake's prefix cache (and of its READY).
pub const BLOCK_SIZE: usize = 16;

/// The prompt tokens a request finds in the fake's prefix cache, as the engine reports
/// them: the whole blocks of the longest prefix it shares with an `earlier` prompt, never
/// its last token (the engine always computes that one).
pub fn cached_tokens(earlier: &[Vec<u32>], prompt: &[u32]) -> u64 {
    let shared = earlier
        .iter()
        .map(|e| e.iter().zip(prompt).take_while(|(a, b)| a == b).count())
        .max()
        .unwrap_or(0)
        .min(prompt.len().saturating_sub(1));
    (shared / BLOCK_SIZE * BLOCK_SIZE) as u64
}

/// A structured-output regex the fake engine refuses as the request's fault.
pub const INVALID_REGEX: &str = "(unclosed";
/// The fake engine's message refusing [`INVALID_REGEX`].
pub const INVALID_MESSAGE: &str = "the regex does not compile: missing ) at 9 — `(unclosed`";
/// A structured-output regex the fake engine fails as its own fault.
pub const FAILING_REGEX: &str = "engine fault";

/// The error output of a request the fake engine fails at once, if it does.
fn refused(req: &EngineCoreRequest) -> Option<EngineCoreOutput> {
    let regex = req
        .sampling_params
        .structured_outputs
        .as_ref()?
        .regex
        .as_deref()?;
    let (message, kind) = match regex {
        INVALID_REGEX => (INVALID_MESSAGE, Some(ErrorKind::InvalidRequest.as_str())),
        FAILING_REGEX => ("grammar backend crashed", None),
        _ => return None,
    };
    let mut out = output_of(req.request_id.clone(), vec![], Some("error"), None);
    out.error_message = Some(message.to_owned());
    out.error_kind = kind.map(str::to_owned);
    Some(out)
}

/// What the fake engine received.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // a test log, not a hot path
pub enum Received {
    Add(EngineCoreRequest),
    Abort(Vec<String>),
}

/// Controls and observations of a running fake engine.
#[derive(Clone, Default)]
pub struct FakeEngine {
    pub received: Arc<Mutex<Vec<Received>>>,
    pub kill: Arc<AtomicBool>,
    /// `Some`: a pooling model (READY announces it; pooling requests are answered).
    pub pooling: Option<pooling::Pooling>,
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
    let (runner, pooling_tasks, classify_labels) = fake.pooling.as_ref().map_or_else(
        || ("generate".into(), vec![], vec![]),
        pooling::Pooling::announced,
    );
    let ready = Ready {
        engine_index: 0,
        max_model_len: MAX_MODEL_LEN,
        vocab_size: VOCAB_SIZE,
        block_size: BLOCK_SIZE as u64,
        num_kv_blocks: 0,
        eos_token_ids: vec![1],
        model_name: "tiny".into(),
        is_mock: true,
        runner,
        pooling_tasks,
        classify_labels,
        ranks: vec![],
    };
    let body = vrs_wire::encode(&ready).unwrap();
    hs.send_multipart([vec![HandshakeKind::Ready.as_byte()], body.clone()], 0)
        .unwrap();
    input
        .send_multipart([vec![HandshakeKind::Ready.as_byte()], body], 0)
        .unwrap();

    // Each running request with the tokens generated and its prefix-cache hit.
    let mut running: Vec<(EngineCoreRequest, usize, u64)> = Vec::new();
    let mut seen: Vec<Vec<u32>> = Vec::new();
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
                match refused(&req) {
                    Some(out) => outputs.push(out),
                    None => {
                        let cached = cached_tokens(&seen, &req.prompt_token_ids);
                        seen.push(req.prompt_token_ids.clone());
                        running.push((req, 0, cached));
                    }
                }
            } else {
                let abort: AbortRequests = vrs_wire::decode(&frames[1]).unwrap();
                fake.received
                    .lock()
                    .unwrap()
                    .push(Received::Abort(abort.request_ids.clone()));
                running.retain(|(r, _, _)| !abort.request_ids.contains(&r.request_id));
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
        running.retain_mut(|(req, generated, cached)| {
            if let Some(params) = &req.pooling_params {
                outputs.push(pooling::output(fake.pooling.as_ref(), req, params, *cached));
                return false;
            }
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
            let mut out = output_of(req.request_id.clone(), vec![token], finish, stop);
            if let Some(k) = sp.logprobs {
                out.new_logprobs = Some(vec![token_logprobs(token, k)]);
            }
            if *generated == 1 {
                out.num_cached_tokens = *cached;
                out.queue_time = Some(QUEUE_TIME);
                out.prefill_time = Some(PREFILL_TIME);
                out.prompt_logprobs = sp
                    .prompt_logprobs
                    .map(|k| prompt_logprobs(&req.prompt_token_ids, k));
            }
            if finish.is_some() {
                out.decode_time = Some(DECODE_TIME);
            }
            outputs.push(out);
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
        prompt_logprobs: None,
        queue_time: None,
        prefill_time: None,
        error_kind: None,
        decode_time: None,
        pooling_output: None,
    }
}

/// A client connected to a fake engine over the real handshake and sockets.
pub struct FakeConnection {
    pub client: Arc<EngineClient>,
    pub engine: FakeEngine,
    pub ready: Ready,
    /// The private directory of the ipc sockets; removed on drop.
    pub ipc_dir: tempfile::TempDir,
}

/// Starts a fake engine emitting `script` (one token per step, `delay` apart) and
/// connects an [`EngineClient`] to it.
pub fn connect(script: Vec<u32>, delay: Duration) -> FakeConnection {
    connect_with(script, delay, None)
}

/// [`connect`] to a fake engine that is the pooling model `pooling` when `Some`.
pub fn connect_with(
    script: Vec<u32>,
    delay: Duration,
    pooling: Option<pooling::Pooling>,
) -> FakeConnection {
    let sockets = launcher::bind_sockets().unwrap();
    let engine = FakeEngine {
        pooling,
        ..FakeEngine::default()
    };
    let (address, fake) = (sockets.handshake_address.clone(), engine.clone());
    std::thread::spawn(move || run_fake_engine(address, script, delay, fake, 1, None));
    let (_tx, exit) = tokio::sync::watch::channel(None);
    let cancel = AtomicBool::new(false);
    let config = launcher::json_to_msgpack(&serde_json::json!({"model": "tiny"}));
    let (connected, ipc_dir) =
        launcher::handshake(sockets, exit, config, Duration::from_secs(10), &cancel).unwrap();
    let client = EngineClient::start(
        connected.input,
        connected.output,
        vec![connected.identity],
        Arc::new(crate::wire::VrsWire),
    )
    .unwrap();
    FakeConnection {
        client,
        engine,
        ready: connected.ready,
        ipc_dir,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_are_whole_shared_blocks_short_of_the_last_token() {
        let first: Vec<u32> = (0..40).collect();
        assert_eq!(cached_tokens(&[], &first), 0, "a fresh prompt");
        let earlier = [first.clone()];
        assert_eq!(cached_tokens(&earlier, &first), 32, "the same prompt again");
        let mut forked = first[..20].to_vec();
        forked.extend([99; 20]);
        assert_eq!(cached_tokens(&earlier, &forked), 16, "20 shared: one block");
        assert_eq!(
            cached_tokens(&earlier, &first[..16]),
            0,
            "the last token is computed"
        );
        assert_eq!(cached_tokens(&earlier, &first[..17]), 16);
    }
}
