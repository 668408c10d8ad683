//! A fake vLLM 0.33 engine for tests (feature `test-util`): the engine side of vLLM's
//! wire, on `vrs_wire::vllm`'s handshake types and msgpack written as vLLM's encoder
//! writes it ([`message`]). It joins through the frontend-owned handshake
//! ([`Join::Handshake`]) or connects straight to adopted listeners
//! ([`Join::Direct`], the supervisor-owned start), then emits `script` tokens (cycled),
//! one per step: `length` at `max_tokens`, `stop` on the request's `_eos_token_id`
//! (no stop reason, as vLLM) or one of its stop token ids (that id as the stop reason).
//! Logprobs and prompt logprobs are the deterministic [`message::logprob_row`] arrays,
//! in aux frames when [`FakeVllm::aux`] is set. Steps are [`message::STEP_TIME`] apart
//! on the fake's clock; a request's first output carries QUEUED and SCHEDULED events
//! [`message::QUEUE_TIME`] apart, [`message::PREFILL_TIME`] before its step, and
//! [`message::CACHED_TOKENS`] in its prefill stats.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmpv::Value;
use vrs_wire::vllm as v;

pub mod message;

use message::{field, int, ABORT, ADD};

/// What the fake received: an ADD (id, prompt, the sampling-params map as sent) or an
/// ABORT.
#[derive(Debug, Clone, PartialEq)]
pub enum VllmReceived {
    Add {
        request_id: String,
        prompt: Vec<u32>,
        params: Value,
    },
    Abort(Vec<String>),
}

/// Controls and observations of a running fake vLLM engine.
#[derive(Clone, Default)]
pub struct FakeVllm {
    pub received: Arc<Mutex<Vec<VllmReceived>>>,
    /// Set: the engine sends `ENGINE_CORE_DEAD` and stops.
    pub kill: Arc<AtomicBool>,
    /// Arrays travel in aux frames whatever their size (vLLM: from 256 bytes).
    pub aux: bool,
    /// Set: the engine closes its sockets and stops, saying nothing (a process killed).
    pub vanish: Arc<AtomicBool>,
    /// The `current_wave` of every ADD, in order.
    pub waves: Arc<Mutex<Vec<i64>>>,
}

impl FakeVllm {
    /// The ids of the requests aborted so far.
    pub fn aborted(&self) -> Vec<String> {
        let log = self.received.lock().unwrap_or_else(|p| p.into_inner());
        log.iter()
            .filter_map(|r| match r {
                VllmReceived::Abort(ids) => Some(ids.clone()),
                VllmReceived::Add { .. } => None,
            })
            .flatten()
            .collect()
    }

    /// Waits up to 5 s for `pred`.
    pub fn wait_for(&self, pred: impl Fn(&FakeVllm) -> bool) -> bool {
        for _ in 0..500 {
            if pred(self) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }
}

/// How the fake reaches the frontend.
#[derive(Debug, Clone)]
pub enum Join {
    /// HELLO at this handshake address, connect where the metadata says, READY.
    Handshake(String),
    /// Connect to these input and output addresses directly.
    Direct { input: String, output: String },
}

/// A running request: id, `_eos_token_id`, stop ids, max tokens, logprobs, prompt
/// logprobs, prompt, tokens generated.
struct Running {
    id: String,
    eos: Option<u64>,
    stop: Vec<u64>,
    max_tokens: usize,
    logprobs: Option<usize>,
    prompt_logprobs: Option<usize>,
    prompt: Vec<u32>,
    generated: usize,
}

/// Runs engine `index` until killed or its frontend goes away (5 s without a handshake
/// answer). Panics on a protocol error: it is a test's engine.
pub fn run(join: Join, index: u16, script: Vec<u32>, delay: Duration, fake: FakeVllm) {
    let ctx = zmq::Context::new();
    let identity = index.to_le_bytes();
    let (input_address, output_address, hs) = match join {
        Join::Direct { input, output } => (input, output, None),
        Join::Handshake(address) => {
            let hs = ctx.socket(zmq::DEALER).unwrap();
            hs.set_identity(&identity).unwrap();
            hs.set_linger(1000).unwrap();
            hs.connect(&address).unwrap();
            hs.send(message::status("HELLO"), 0).unwrap();
            if hs.poll(zmq::POLLIN, 5000).unwrap() == 0 {
                return;
            }
            let meta = rmpv::decode::read_value(&mut &hs.recv_bytes(0).unwrap()[..]).unwrap();
            let addresses = field(&meta, "addresses");
            let first = |key| field(addresses, key)[0].as_str().unwrap().to_owned();
            (first("inputs"), first("outputs"), Some(hs))
        }
    };
    let input = ctx.socket(zmq::DEALER).unwrap();
    input.set_identity(&identity).unwrap();
    input.set_linger(1000).unwrap();
    input.connect(&input_address).unwrap();
    let output = ctx.socket(zmq::PUSH).unwrap();
    output.set_linger(1000).unwrap();
    output.connect(&output_address).unwrap();
    if let Some(hs) = &hs {
        hs.send(message::status("READY"), 0).unwrap();
    }
    input.send(message::ready_response(index), 0).unwrap();

    let mut running: Vec<Running> = Vec::new();
    let mut steps = 0;
    loop {
        if fake.vanish.load(Ordering::SeqCst) {
            return;
        }
        if fake.kill.load(Ordering::SeqCst) {
            output.send(v::ENGINE_CORE_DEAD, 0).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            return;
        }
        let wait = if running.is_empty() { 20 } else { 0 };
        while input.poll(zmq::POLLIN, wait).unwrap() > 0 {
            let frames = input.recv_multipart(0).unwrap();
            let body = rmpv::decode::read_value(&mut &frames[1][..]).unwrap();
            let log = |r| fake.received.lock().unwrap().push(r);
            match frames[0][..] {
                [ADD] => {
                    let items = body.as_array().unwrap();
                    let request_id = items[0].as_str().unwrap().to_owned();
                    let prompt: Vec<u32> = items[1]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| t.as_u64().unwrap() as u32)
                        .collect();
                    let params = items[3].clone();
                    let wave = items[12].as_i64().unwrap();
                    fake.waves.lock().unwrap().push(wave);
                    let opt = |key| int(&params, key);
                    running.push(Running {
                        id: request_id.clone(),
                        eos: opt("_eos_token_id"),
                        stop: field(&params, "stop_token_ids")
                            .as_array()
                            .map(|a| a.iter().filter_map(Value::as_u64).collect())
                            .unwrap_or_default(),
                        max_tokens: opt("max_tokens").unwrap_or(16) as usize,
                        logprobs: opt("logprobs").map(|k| k as usize),
                        prompt_logprobs: opt("prompt_logprobs").map(|k| k as usize),
                        prompt: prompt.clone(),
                        generated: 0,
                    });
                    log(VllmReceived::Add {
                        request_id,
                        prompt,
                        params,
                    });
                }
                [ABORT] => {
                    let ids: Vec<String> = body
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|s| s.as_str().unwrap().to_owned())
                        .collect();
                    // vLLM sends nothing for a request its frontend aborted.
                    running.retain(|r| !ids.contains(&r.id));
                    log(VllmReceived::Abort(ids));
                }
                _ => panic!("fake vLLM engine: unexpected request type {:?}", frames[0]),
            }
            if !running.is_empty() {
                break;
            }
        }
        if running.is_empty() {
            continue;
        }
        std::thread::sleep(delay);
        let now = message::step_time(steps);
        steps += 1;
        let mut aux = Vec::new();
        let mut outputs = Vec::new();
        running.retain_mut(|r| {
            let token = script[r.generated % script.len()];
            r.generated += 1;
            let t = u64::from(token);
            let (finish, stop_reason) = if Some(t) == r.eos {
                (Some(0), Value::Nil)
            } else if r.stop.contains(&t) {
                (Some(0), Value::from(t))
            } else if r.generated >= r.max_tokens {
                (Some(1), Value::Nil)
            } else {
                (None, Value::Nil)
            };
            outputs.push(message::output(
                r,
                token,
                finish,
                stop_reason,
                &mut aux,
                fake.aux,
                now,
            ));
            finish.is_none()
        });
        let running_now = running.len();
        let mut frames = vec![message::outputs(index, outputs, running_now, now)];
        frames.extend(aux);
        output.send_multipart(frames, 0).unwrap();
    }
}

impl message::Request for Running {
    fn id(&self) -> &str {
        &self.id
    }
    fn first(&self) -> bool {
        self.generated == 1
    }
    fn logprobs(&self) -> Option<usize> {
        self.logprobs
    }
    fn prompt_logprobs(&self) -> Option<usize> {
        self.prompt_logprobs
    }
    fn prompt(&self) -> &[u32] {
        &self.prompt
    }
}

/// A client connected over the frontend-owned handshake to `count` fake vLLM engines.
pub struct VllmConnection {
    pub client: Arc<crate::EngineClient>,
    /// Each engine's controls, by index.
    pub engines: Vec<FakeVllm>,
    pub group_ready: Vec<v::EngineCoreReadyResponse>,
    /// The input ROUTER's disconnect reports (the caller decides what a loss means).
    pub lost: tokio::sync::mpsc::UnboundedReceiver<String>,
}

/// Starts `count` fake vLLM engines emitting `script` (`delay` per step, arrays in aux
/// frames when `aux`), runs the handshake on loopback tcp and starts an
/// [`EngineClient`](crate::EngineClient) on [`VllmWire`](crate::vllm::VllmWire) with EOS
/// id 1.
pub fn connect(count: u16, script: Vec<u32>, delay: Duration, aux: bool) -> VllmConnection {
    connect_with(count, script, delay, aux, |wire| wire)
}

/// [`connect`] with the wire as `wire` leaves it (e.g. following a coordinator).
pub fn connect_with(
    count: u16,
    script: Vec<u32>,
    delay: Duration,
    aux: bool,
    wire: impl FnOnce(crate::vllm::VllmWire) -> crate::vllm::VllmWire,
) -> VllmConnection {
    let sockets = crate::vllm::bind_sockets("tcp://127.0.0.1:0").unwrap();
    let engines: Vec<FakeVllm> = (0..count)
        .map(|index| {
            let fake = FakeVllm {
                aux,
                ..FakeVllm::default()
            };
            let (join, script, f) = (
                Join::Handshake(sockets.handshake_address.clone()),
                script.clone(),
                fake.clone(),
            );
            std::thread::spawn(move || run(join, index, script, delay, f));
            fake
        })
        .collect();
    let cancel = AtomicBool::new(false);
    let group = crate::vllm::handshake(
        sockets,
        usize::from(count),
        Duration::from_secs(10),
        &cancel,
    )
    .unwrap();
    let (identities, readies): (Vec<_>, Vec<_>) = group.engines.into_iter().unzip();
    let blocks = readies[0].num_gpu_blocks as u64;
    let wire = Arc::new(wire(crate::vllm::VllmWire::new(vec![1], blocks)));
    let client = crate::EngineClient::start(group.input, group.output, identities, wire).unwrap();
    VllmConnection {
        client,
        engines,
        group_ready: readies,
        lost: group.lost,
    }
}
