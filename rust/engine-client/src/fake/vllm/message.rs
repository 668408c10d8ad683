//! The fake vLLM engine's messages, written as vLLM's `MsgpackEncoder` writes them:
//! `array_like` structs as arrays of every field, dataclasses as maps, arrays as
//! `[dtype, shape, data]` with the bytes inline (ext 3) or in an aux frame.

use rmpv::Value;

/// Request-type frames.
pub const ADD: u8 = 0x00;
pub const ABORT: u8 = 0x01;

/// Seconds between a request's QUEUED and SCHEDULED events.
pub const QUEUE_TIME: f64 = 0.25;
/// Seconds between SCHEDULED and the step that gave its first token.
pub const PREFILL_TIME: f64 = 0.125;
/// `prefill_stats.num_cached_tokens` of every first output.
pub const CACHED_TOKENS: u64 = 16;
/// KV blocks the fake reports (`num_gpu_blocks`), and its `kv_cache_usage`.
pub const NUM_GPU_BLOCKS: i64 = 400;
pub const KV_USAGE: f64 = 0.25;
/// Each step's prefix-cache delta: queries, hits.
pub const PREFIX_DELTA: (i64, i64) = (10, 4);
/// `max_model_len` the fake reports.
pub const MAX_MODEL_LEN: i64 = 2048;

/// Seconds between two steps on the fake's clock (its step timestamps).
pub const STEP_TIME: f64 = 0.5;

/// The engine clock's timestamp of step `n` (from 0).
pub fn step_time(n: u64) -> f64 {
    100.0 + n as f64 * STEP_TIME
}

/// What [`output`] needs of a running request.
pub trait Request {
    fn id(&self) -> &str;
    /// Whether this is the request's first output.
    fn first(&self) -> bool;
    fn logprobs(&self) -> Option<usize>;
    fn prompt_logprobs(&self) -> Option<usize>;
    fn prompt(&self) -> &[u32];
}

static NIL: Value = Value::Nil;

/// The value at `key` of a msgpack map (nil when absent or not a map).
pub fn field<'a>(map: &'a Value, key: &str) -> &'a Value {
    map.as_map()
        .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some(key)))
        .map_or(&NIL, |(_, v)| v)
}

/// An unsigned int at `key` of a map.
pub fn int(map: &Value, key: &str) -> Option<u64> {
    field(map, key).as_u64()
}

fn write(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut out, value);
    out
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

/// HELLO or READY on the handshake socket.
pub fn status(status: &str) -> Vec<u8> {
    write(&map(vec![
        ("status", status.into()),
        ("local", true.into()),
        ("headless", true.into()),
    ]))
}

/// The `EngineCoreReadyResponse` of engine `index`.
pub fn ready_response(index: u16) -> Vec<u8> {
    write(&map(vec![
        ("max_model_len", MAX_MODEL_LEN.into()),
        ("num_gpu_blocks", NUM_GPU_BLOCKS.into()),
        ("block_size", 16.into()),
        ("dp_stats_address", Value::Nil),
        ("dtype", "bfloat16".into()),
        ("vllm_version", "0.33.0".into()),
        ("world_size", 1.into()),
        ("data_parallel_size", 1.into()),
        ("tensor_parallel_size", 1.into()),
        ("pipeline_parallel_size", 1.into()),
        ("decode_context_parallel_size", 1.into()),
        ("data_parallel_rank", i64::from(index).into()),
        ("max_num_seqs", 256.into()),
        ("max_num_batched_tokens", 8192.into()),
        ("instance_id", format!("fake-{index}").into()),
        ("supports_lora", false.into()),
        ("max_loras", 0.into()),
    ]))
}

/// The fake's logprobs of one position whose token is `token`: ids `[token, token+1,
/// ...]` (1 + k), logprobs `-0.5, -1.0, ...`; rank 1.
pub fn logprob_row(token: u32, k: usize) -> (Vec<i64>, Vec<f32>) {
    let ids = (0..=k).map(|j| i64::from(token) + j as i64).collect();
    let lps = (0..=k).map(|j| -0.5 * (j as f32 + 1.0)).collect();
    (ids, lps)
}

/// `[dtype, shape, data]`: data inline, or in a new aux frame (`force_aux`, or from 256
/// bytes as vLLM).
fn array(
    dtype: &str,
    shape: &[usize],
    data: Vec<u8>,
    aux: &mut Vec<Vec<u8>>,
    force: bool,
) -> Value {
    let data = if force || data.len() >= 256 {
        aux.push(data);
        Value::from(aux.len() as u64)
    } else {
        Value::Ext(3, data)
    };
    let shape = shape.iter().map(|&d| Value::from(d as u64)).collect();
    Value::Array(vec![dtype.into(), Value::Array(shape), data])
}

/// `[ids, logprobs, ranks]` arrays of the rows for `tokens`; `torch`: tensor dtype names.
fn logprob_arrays(
    tokens: &[u32],
    k: usize,
    torch: bool,
    aux: &mut Vec<Vec<u8>>,
    force: bool,
) -> Vec<Value> {
    let (mut ids, mut lps, mut ranks) = (Vec::new(), Vec::new(), Vec::new());
    for &t in tokens {
        let (i, l) = logprob_row(t, k);
        if torch {
            i.iter()
                .for_each(|x| ids.extend_from_slice(&x.to_le_bytes()));
            ranks.extend_from_slice(&1i64.to_le_bytes());
        } else {
            i.iter()
                .for_each(|&x| ids.extend_from_slice(&(x as i32).to_le_bytes()));
            ranks.extend_from_slice(&1i32.to_le_bytes());
        }
        l.iter()
            .for_each(|x| lps.extend_from_slice(&x.to_le_bytes()));
    }
    let shape = [tokens.len(), k + 1];
    let (di, df, dr) = if torch {
        ("int64", "float32", "int64")
    } else {
        ("<i4", "<f4", "<i4")
    };
    vec![
        array(di, &shape, ids, aux, force),
        array(df, &shape, lps, aux, force),
        array(dr, &shape[..1], ranks, aux, force),
    ]
}

/// One `EngineCoreOutput` (19 fields) for `token` in the step at `now`; `finish` is
/// vLLM's int.
pub fn output(
    r: &impl Request,
    token: u32,
    finish: Option<u8>,
    stop_reason: Value,
    aux: &mut Vec<Vec<u8>>,
    force_aux: bool,
    now: f64,
) -> Value {
    let logprobs = r.logprobs().map_or(Value::Nil, |k| {
        let mut tuple = logprob_arrays(&[token], k, false, aux, force_aux);
        tuple.push(Value::Nil);
        Value::Array(tuple)
    });
    let first = r.first();
    let prompt_logprobs = match r.prompt_logprobs() {
        Some(k) if first => {
            let mut tuple = logprob_arrays(&r.prompt()[1..], k, true, aux, force_aux);
            tuple.extend([Value::Nil, Value::Nil]);
            Value::Array(tuple)
        }
        _ => Value::Nil,
    };
    let (events, prefill) = if first {
        let event = |kind: i64, t: f64| map(vec![("type", kind.into()), ("timestamp", t.into())]);
        (
            Value::Array(vec![
                event(1, now - PREFILL_TIME - QUEUE_TIME),
                event(2, now - PREFILL_TIME),
            ]),
            map(vec![
                ("num_prompt_tokens", (r.prompt().len() as u64).into()),
                ("num_cached_tokens", CACHED_TOKENS.into()),
            ]),
        )
    } else {
        (Value::Nil, Value::Nil)
    };
    let mut fields = vec![
        r.id().into(),
        Value::Array(vec![u64::from(token).into()]),
        logprobs,
        prompt_logprobs,
        Value::Nil,
        finish.map_or(Value::Nil, Value::from),
        stop_reason,
        events,
    ];
    fields.extend([Value::Nil, Value::Nil, Value::Nil]); // kv, ec transfer; trace headers
    fields.push(prefill);
    fields.push(Value::Nil); // routed experts
    fields.push(0.into()); // num_nans_in_logits
    fields.extend(vec![Value::Nil; 5]);
    Value::Array(fields)
}

/// One `EngineCoreOutputs` (9 fields) of the step at `now`, with scheduler stats.
pub fn outputs(index: u16, outputs: Vec<Value>, running: usize, now: f64) -> Vec<u8> {
    let prefix = map(vec![
        ("reset", false.into()),
        ("requests", 1.into()),
        ("queries", PREFIX_DELTA.0.into()),
        ("hits", PREFIX_DELTA.1.into()),
    ]);
    let stats = map(vec![
        ("num_running_reqs", (running as u64).into()),
        ("num_waiting_reqs", 0.into()),
        ("kv_cache_usage", KV_USAGE.into()),
        ("prefix_cache_stats", prefix),
    ]);
    let mut fields = vec![
        i64::from(index).into(),
        Value::Array(outputs),
        stats,
        now.into(),
    ];
    fields.extend(vec![Value::Nil; 5]);
    write(&Value::Array(fields))
}
