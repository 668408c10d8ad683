//! The fake engine as a pooling model: what it announces in READY ([`Pooling`]) and its
//! deterministic answers, computed from the prompt ids alone so that tests can predict
//! them ([`embedding`], [`class_logits`], [`pair_logit`]).
//!
//! * embed: [`EMBED_DIM`] values, value `j` = `1 + Σ_i (id_i + 1)·(j + 1)·(-1)^i / 8`,
//!   L2-normalized unless `normalize` is `false`; `dimensions` keeps the first
//!   `dimensions` values (then normalizes) when the fake is Matryoshka, else it is
//!   refused as `invalid_request` ([`NOT_MATRYOSHKA`]), as is `dimensions` beyond
//!   [`EMBED_DIM`].
//! * classify: one logit per label, logit `k` = `((Σ ids + 3k) mod 7) / 2`; softmax (a
//!   sigmoid for one label) unless `use_activation` is `false`.
//! * score: one value, the sigmoid of [`pair_logit`] (raw with `use_activation` false).
//!
//! A task the fake does not announce is refused as `invalid_request`.

use vrs_wire::{
    EngineCoreOutput, EngineCoreRequest, ErrorKind, PoolingParams, PoolingTask, Runner,
};

use super::{output_of, PREFILL_TIME, QUEUE_TIME};

/// What the fake engine announces in READY: its runner, pooling tasks and class labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooling {
    pub runner: Runner,
    pub tasks: Vec<PoolingTask>,
    pub labels: Vec<String>,
    /// Whether `dimensions` (Matryoshka truncation) is served.
    pub matryoshka: bool,
}

impl Pooling {
    /// A pooling model serving `tasks`, with `labels` for its classes.
    pub fn new(tasks: &[PoolingTask], labels: &[&str]) -> Self {
        Self {
            runner: Runner::Pooling,
            tasks: tasks.to_vec(),
            labels: labels.iter().map(|l| (*l).to_owned()).collect(),
            matryoshka: true,
        }
    }

    /// The READY strings: runner, tasks, labels.
    pub fn announced(&self) -> (String, Vec<String>, Vec<String>) {
        (
            self.runner.as_str().to_owned(),
            self.tasks.iter().map(|t| t.as_str().to_owned()).collect(),
            self.labels.clone(),
        )
    }
}

/// The length of the fake's embeddings.
pub const EMBED_DIM: usize = 8;
/// The fake's refusal of `dimensions` when it is not Matryoshka.
pub const NOT_MATRYOSHKA: &str = "this model does not support matryoshka representation; \
                                  `dimensions` cannot be set";

/// The raw (unnormalized) embedding of `ids`.
pub fn embedding(ids: &[u32]) -> Vec<f64> {
    (0..EMBED_DIM)
        .map(|j| {
            let sum: f64 = ids
                .iter()
                .enumerate()
                .map(|(i, &id)| {
                    let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                    sign * f64::from(id + 1) * (j as f64 + 1.0)
                })
                .sum();
            1.0 + sum / 8.0
        })
        .collect()
}

/// `v` scaled to unit L2 norm (a zero vector stays zero).
pub fn normalized(v: &[f64]) -> Vec<f64> {
    let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
    if norm == 0.0 {
        return v.to_vec();
    }
    v.iter().map(|x| x / norm).collect()
}

/// The `classes` raw logits of `ids`.
pub fn class_logits(ids: &[u32], classes: usize) -> Vec<f64> {
    let sum: u64 = ids.iter().map(|&id| u64::from(id)).sum();
    (0..classes as u64)
        .map(|k| ((sum + 3 * k) % 7) as f64 / 2.0)
        .collect()
}

/// Softmax of `logits`, or the sigmoid of a single one.
pub fn activated(logits: &[f64]) -> Vec<f64> {
    if let [one] = logits {
        return vec![sigmoid(*one)];
    }
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// The raw relevance logit of a pair tokenized together, the second sequence starting at
/// `start`: `(Σ first ids − Σ second ids) / 10` (`start` absent: all ids are the first's).
pub fn pair_logit(ids: &[u32], start: Option<u64>) -> f64 {
    let split = start.map_or(ids.len(), |s| (s as usize).min(ids.len()));
    let first: f64 = ids[..split].iter().map(|&id| f64::from(id)).sum();
    let second: f64 = ids[split..].iter().map(|&id| f64::from(id)).sum();
    (first - second) / 10.0
}

/// Float32 rounding, as the engine's float32 tensors carry them (as float64).
fn f32_values(v: Vec<f64>) -> Vec<f64> {
    v.into_iter().map(|x| f64::from(x as f32)).collect()
}

/// The one output of pooling request `req` (`cached`: its prefix-cache hit): its
/// answer, or the `invalid_request` error refusing it (every request is refused by a fake
/// that is no pooling model).
pub fn output(
    pooling: Option<&Pooling>,
    req: &EngineCoreRequest,
    params: &PoolingParams,
    cached: u64,
) -> EngineCoreOutput {
    let answer = match pooling {
        Some(pooling) => answer(pooling, req, params),
        None => Err("this model is a generation model: it serves no pooling task".into()),
    };
    match answer {
        Ok(values) => {
            let mut out = output_of(req.request_id.clone(), vec![], Some("stop"), None);
            out.pooling_output = Some(values);
            out.num_cached_tokens = cached;
            out.queue_time = Some(QUEUE_TIME);
            out.prefill_time = Some(PREFILL_TIME);
            out
        }
        Err(message) => {
            let mut out = output_of(req.request_id.clone(), vec![], Some("error"), None);
            out.error_message = Some(message);
            out.error_kind = Some(ErrorKind::InvalidRequest.as_str().to_owned());
            out
        }
    }
}

/// The answer to a pooling request: its `pooling_output`, or the `invalid_request`
/// message refusing it.
pub fn answer(
    pooling: &Pooling,
    req: &EngineCoreRequest,
    params: &PoolingParams,
) -> Result<Vec<f64>, String> {
    let task = PoolingTask::from_wire(&params.task)
        .ok_or_else(|| format!("unknown pooling task {:?}", params.task))?;
    if !pooling.tasks.contains(&task) {
        return Err(format!(
            "this model does not serve the {:?} task",
            params.task
        ));
    }
    let ids = &req.prompt_token_ids;
    let out = match task {
        PoolingTask::Embed => {
            let mut v = embedding(ids);
            if let Some(d) = params.dimensions {
                if !pooling.matryoshka {
                    return Err(NOT_MATRYOSHKA.to_owned());
                }
                if d == 0 || d as usize > EMBED_DIM {
                    return Err(format!(
                        "dimensions {d} is out of range: this model's embeddings have \
                         {EMBED_DIM} values"
                    ));
                }
                v.truncate(d as usize);
            }
            if params.normalize == Some(false) {
                v
            } else {
                normalized(&v)
            }
        }
        PoolingTask::Classify => {
            let logits = class_logits(ids, pooling.labels.len().max(1));
            if params.use_activation == Some(false) {
                logits
            } else {
                activated(&logits)
            }
        }
        PoolingTask::Score => {
            let logit = pair_logit(ids, params.token_type_start);
            if params.use_activation == Some(false) {
                vec![logit]
            } else {
                vec![sigmoid(logit)]
            }
        }
    };
    Ok(f32_values(out))
}
