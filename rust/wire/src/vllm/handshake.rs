//! vLLM's startup handshake messages (plain `msgspec.msgpack`, no aux frames):
//! engine → frontend HELLO, frontend → engine [`EngineHandshakeMetadata`], engine →
//! frontend READY (handshake socket), then [`EngineCoreReadyResponse`] as the first
//! message on each input socket.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::msgpack::{
    get_bool, get_f64, get_i64, get_map, get_str, opt, opt_value, read_one, str_values, write, Any,
    At, OrderedMap,
};
use super::VllmWireError;

/// `status` of a handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum HandshakeStatus {
    #[serde(rename = "HELLO")]
    Hello,
    #[serde(rename = "READY")]
    Ready,
}

/// HELLO / READY: `{"status", "local", "headless", ...}` sent by an engine (DEALER,
/// identity = its rank as 2 bytes little-endian) on the handshake socket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct HandshakeMessage {
    pub status: HandshakeStatus,
    pub local: bool,
    pub headless: bool,
    /// READY with data parallelism: must equal the frontend's own config hash.
    pub parallel_config_hash: Option<String>,
    pub coord_store_port: Option<i64>,
    pub elastic_ep_max_dp_size: Option<i64>,
    pub num_redundant_experts: Option<i64>,
}

/// Decodes a HELLO or READY message.
pub fn decode_handshake(frame: &[u8]) -> Result<HandshakeMessage, VllmWireError> {
    const N: &str = "handshake";
    let v = read_one(frame)?;
    let (mut status, mut local, mut headless) = (None, None, None);
    let mut msg = HandshakeMessage {
        status: HandshakeStatus::Hello,
        local: false,
        headless: false,
        parallel_config_hash: None,
        coord_store_port: None,
        elastic_ep_max_dp_size: None,
        num_redundant_experts: None,
    };
    for (k, x) in get_map(&v, (N, "<map>"))? {
        match k.as_str() {
            Some("status") => {
                status = Some(match get_str(x, (N, "status"))?.as_str() {
                    "HELLO" => HandshakeStatus::Hello,
                    "READY" => HandshakeStatus::Ready,
                    _ => return Err(super::msgpack::type_err((N, "status"), "HELLO or READY", x)),
                })
            }
            Some("local") => local = Some(get_bool(x, (N, "local"))?),
            Some("headless") => headless = Some(get_bool(x, (N, "headless"))?),
            Some("parallel_config_hash") => {
                msg.parallel_config_hash = opt(x, (N, "parallel_config_hash"), get_str)?
            }
            Some("coord_store_port") => {
                msg.coord_store_port = opt(x, (N, "coord_store_port"), get_i64)?
            }
            Some("elastic_ep_max_dp_size") => {
                msg.elastic_ep_max_dp_size = opt(x, (N, "elastic_ep_max_dp_size"), get_i64)?
            }
            Some("num_redundant_experts") => {
                msg.num_redundant_experts = opt(x, (N, "num_redundant_experts"), get_i64)?
            }
            _ => {}
        }
    }
    let missing = |field: &str| VllmWireError::MissingField {
        name: N,
        field: field.into(),
    };
    msg.status = status.ok_or_else(|| missing("status"))?;
    msg.local = local.ok_or_else(|| missing("local"))?;
    msg.headless = headless.ok_or_else(|| missing("headless"))?;
    Ok(msg)
}

/// `EngineZmqAddresses`: where the engine connects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineZmqAddresses {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub coordinator_input: Option<String>,
    pub coordinator_output: Option<String>,
    pub frontend_stats_publish_address: Option<String>,
}

/// `EngineHandshakeMetadata`: the frontend's answer to HELLO.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineHandshakeMetadata {
    /// Sockets to connect to.
    pub addresses: EngineZmqAddresses,
    /// Data-parallel settings (`data_parallel_master_ip`, ...), in vLLM's key order.
    pub parallel_config: OrderedMap<String, Any>,
}

/// Encodes the answer to HELLO, byte for byte as vLLM's `msgspec.msgpack.encode`.
pub fn encode_handshake_metadata(meta: &EngineHandshakeMetadata) -> Vec<u8> {
    let a = &meta.addresses;
    let s = |x: &Option<String>| opt_value(x, |v| Value::from(v.as_str()));
    let addresses = Value::Map(vec![
        ("inputs".into(), str_values(&a.inputs)),
        ("outputs".into(), str_values(&a.outputs)),
        ("coordinator_input".into(), s(&a.coordinator_input)),
        ("coordinator_output".into(), s(&a.coordinator_output)),
        (
            "frontend_stats_publish_address".into(),
            s(&a.frontend_stats_publish_address),
        ),
    ]);
    let config = meta
        .parallel_config
        .0
        .iter()
        .map(|(k, v)| (Value::from(k.as_str()), v.0.clone()))
        .collect();
    write(&Value::Map(vec![
        ("addresses".into(), addresses),
        ("parallel_config".into(), Value::Map(config)),
    ]))
}

/// `EngineCoreReadyResponse`: the engine's first message on each input socket, with the
/// configuration it settled on.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineCoreReadyResponse {
    pub max_model_len: i64,
    pub num_gpu_blocks: i64,
    pub block_size: i64,
    pub dp_stats_address: Option<String>,
    pub dtype: String,
    pub vllm_version: String,
    pub world_size: i64,
    pub data_parallel_size: i64,
    pub tensor_parallel_size: i64,
    pub pipeline_parallel_size: i64,
    pub decode_context_parallel_size: i64,
    pub data_parallel_rank: i64,
    pub max_num_seqs: i64,
    pub max_num_batched_tokens: i64,
    pub instance_id: String,
    pub supports_lora: bool,
    pub max_loras: i64,
    pub mamba_block_size: Option<i64>,
    pub kv_cache_size_tokens: Option<i64>,
    pub kv_cache_max_concurrency: Option<f64>,
    pub kv_events_config: Option<Any>,
    pub weight_transfer_backend: Option<String>,
    pub enable_sleep_mode: bool,
    pub supports_draft_weight_updates: bool,
    pub effective_attention_block_size: Option<i64>,
    pub coord_store_port: i64,
    pub coordinator_input_address: Option<String>,
    pub coordinator_output_address: Option<String>,
}

/// Keys of [`EngineCoreReadyResponse`]; the first [`READY_REQUIRED`] have no default.
const READY_FIELDS: [&str; 28] = [
    "max_model_len",
    "num_gpu_blocks",
    "block_size",
    "dp_stats_address",
    "dtype",
    "vllm_version",
    "world_size",
    "data_parallel_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "decode_context_parallel_size",
    "data_parallel_rank",
    "max_num_seqs",
    "max_num_batched_tokens",
    "instance_id",
    "supports_lora",
    "max_loras",
    "mamba_block_size",
    "kv_cache_size_tokens",
    "kv_cache_max_concurrency",
    "kv_events_config",
    "weight_transfer_backend",
    "enable_sleep_mode",
    "supports_draft_weight_updates",
    "effective_attention_block_size",
    "coord_store_port",
    "coordinator_input_address",
    "coordinator_output_address",
];
const READY_REQUIRED: usize = 17;

/// Decodes the engine's ready response.
pub fn decode_ready_response(frame: &[u8]) -> Result<EngineCoreReadyResponse, VllmWireError> {
    const N: &str = "EngineCoreReadyResponse";
    let v = read_one(frame)?;
    let map = get_map(&v, (N, "<map>"))?;
    for key in &READY_FIELDS[..READY_REQUIRED] {
        if !map.iter().any(|(k, _)| k.as_str() == Some(*key)) {
            return Err(VllmWireError::MissingField {
                name: N,
                field: (*key).into(),
            });
        }
    }
    let mut r = EngineCoreReadyResponse::default();
    for (k, x) in map {
        let Some(&key) = READY_FIELDS.iter().find(|f| Some(**f) == k.as_str()) else {
            continue;
        };
        let at: At = (N, key);
        let i = || get_i64(x, at);
        let os = || opt(x, at, get_str);
        let oi = || opt(x, at, get_i64);
        match key {
            "max_model_len" => r.max_model_len = i()?,
            "num_gpu_blocks" => r.num_gpu_blocks = i()?,
            "block_size" => r.block_size = i()?,
            "dp_stats_address" => r.dp_stats_address = os()?,
            "dtype" => r.dtype = get_str(x, at)?,
            "vllm_version" => r.vllm_version = get_str(x, at)?,
            "world_size" => r.world_size = i()?,
            "data_parallel_size" => r.data_parallel_size = i()?,
            "tensor_parallel_size" => r.tensor_parallel_size = i()?,
            "pipeline_parallel_size" => r.pipeline_parallel_size = i()?,
            "decode_context_parallel_size" => r.decode_context_parallel_size = i()?,
            "data_parallel_rank" => r.data_parallel_rank = i()?,
            "max_num_seqs" => r.max_num_seqs = i()?,
            "max_num_batched_tokens" => r.max_num_batched_tokens = i()?,
            "instance_id" => r.instance_id = get_str(x, at)?,
            "supports_lora" => r.supports_lora = get_bool(x, at)?,
            "max_loras" => r.max_loras = i()?,
            "mamba_block_size" => r.mamba_block_size = oi()?,
            "kv_cache_size_tokens" => r.kv_cache_size_tokens = oi()?,
            "kv_cache_max_concurrency" => r.kv_cache_max_concurrency = opt(x, at, get_f64)?,
            "kv_events_config" => r.kv_events_config = opt(x, at, |y, _| Ok(Any(y.clone())))?,
            "weight_transfer_backend" => r.weight_transfer_backend = os()?,
            "enable_sleep_mode" => r.enable_sleep_mode = get_bool(x, at)?,
            "supports_draft_weight_updates" => r.supports_draft_weight_updates = get_bool(x, at)?,
            "effective_attention_block_size" => r.effective_attention_block_size = oi()?,
            "coord_store_port" => r.coord_store_port = i()?,
            "coordinator_input_address" => r.coordinator_input_address = os()?,
            "coordinator_output_address" => r.coordinator_output_address = os()?,
            _ => {}
        }
    }
    Ok(r)
}
