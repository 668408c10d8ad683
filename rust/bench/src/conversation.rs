//! A multi-turn run (`--dataset-name conversation`): each conversation is a client that
//! sends its turns in order over chat completions, turn k with the history of turns
//! 1..k-1 and the server's own answers to them, waiting `--conversation-think-time`
//! seconds between an answer and its next turn. `--max-concurrency N` conversations run at
//! once (so at most N requests are in flight), `--request-rate R` starts conversations
//! at Poisson arrivals of R per second (vLLM's multi-turn benchmark: `--num-clients`
//! clients, each with one conversation at a time). A failed turn ends its conversation:
//! its later turns cannot be sent without the answer, and are counted as not sent.
//!
//! Besides the run's usual metrics, the result reports each turn's TTFT, prompt tokens and
//! the prompt tokens the server found in its prefix cache (`turns`), where prefix caching
//! across turns shows.

use std::path::Path;
use std::sync::Arc;

use hyper::Uri;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::{Duration, Instant, MissedTickBehavior};

use crate::args::BenchArgs;
use crate::client::{chat_body, HttpClient};
use crate::dataset::{conversations, load_tokenizer, Conversation, ConversationSpec};
use crate::events;
use crate::metrics::{percentile, RequestRecord};
use crate::progress::{Tally, PROGRESS_EVERY};

/// How the conversations are sent.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub model: String,
    pub max_concurrency: Option<usize>,
    /// New conversations per second; `None`: all at once.
    pub rate: Option<f64>,
    pub think_time: f64,
    pub ignore_eos: bool,
    pub seed: u64,
}

/// One sent turn: its number in its conversation (from 1) and what it measured.
#[derive(Debug, Clone)]
pub struct TurnRecord {
    pub turn: usize,
    pub record: RequestRecord,
}

enum Sent {
    Turn(TurnRecord),
    /// Turns of a conversation not sent after its failed turn.
    Dropped(usize),
}

/// Sends the conversation's turns in order; each answer goes into the next turn's history.
async fn converse(
    client: &HttpClient,
    uri: &Uri,
    conversation: &Conversation,
    schedule: &Schedule,
    start: Instant,
    tx: &mpsc::UnboundedSender<Sent>,
) {
    let mut history: Vec<Value> = conversation
        .system
        .iter()
        .map(|text| json!({"role": "system", "content": text}))
        .collect();
    let mut history_tokens = 0;
    for (k, turn) in conversation.turns.iter().enumerate() {
        if k > 0 && schedule.think_time > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(schedule.think_time)).await;
        }
        history.push(json!({"role": "user", "content": turn.user}));
        history_tokens += turn.user_len;
        let body = chat_body(
            &schedule.model,
            &history,
            turn.output_len,
            schedule.ignore_eos,
        );
        let sent = start.elapsed().as_secs_f64();
        let (mut record, answer) = client.send_turn(uri, body, history_tokens).await;
        record.start = sent;
        let success = record.success;
        history_tokens += record.output_tokens;
        let _ = tx.send(Sent::Turn(TurnRecord {
            turn: k + 1,
            record,
        }));
        if !success {
            let _ = tx.send(Sent::Dropped(conversation.turns.len() - k - 1));
            return;
        }
        history.push(json!({"role": "assistant", "content": answer}));
    }
}

/// Runs `conversations` on `schedule`: every sent turn's record, the turns not sent, and
/// the seconds from the first send to the last answer.
pub async fn run(
    client: &HttpClient,
    uri: &Uri,
    conversations: Vec<Conversation>,
    schedule: &Schedule,
    show_progress: bool,
) -> (Vec<TurnRecord>, usize, f64) {
    let total: usize = conversations.iter().map(|c| c.turns.len()).sum();
    let limit = schedule
        .max_concurrency
        .map(|n| Arc::new(Semaphore::new(n)));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let dispatch = {
        let (client, uri, schedule) = (client.clone(), uri.clone(), schedule.clone());
        tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(schedule.seed);
            let mut next = start;
            let schedule = Arc::new(schedule);
            for conversation in conversations {
                if let Some(rate) = schedule.rate {
                    tokio::time::sleep_until(next).await;
                    let gap = -(1.0 - rng.random::<f64>()).ln() / rate;
                    next += Duration::from_secs_f64(gap);
                }
                let (client, uri, tx, limit, schedule) = (
                    client.clone(),
                    uri.clone(),
                    tx.clone(),
                    limit.clone(),
                    schedule.clone(),
                );
                tokio::spawn(async move {
                    let _permit = match &limit {
                        Some(limit) => limit.clone().acquire_owned().await.ok(),
                        None => None,
                    };
                    converse(&client, &uri, &conversation, &schedule, start, &tx).await;
                });
            }
        })
    };
    let mut records = Vec::with_capacity(total);
    let mut dropped = 0;
    let mut tally = Tally::new(start, total);
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    while records.len() + dropped < total {
        tokio::select! {
            sent = rx.recv() => match sent {
                Some(Sent::Turn(turn)) => {
                    tally.add(&turn.record);
                    records.push(turn);
                }
                Some(Sent::Dropped(count)) => {
                    dropped += count;
                    tally.drop_pending(count);
                }
                None => break,
            },
            _ = ticker.tick(), if show_progress => tally.report(false),
        }
    }
    let duration = start.elapsed().as_secs_f64();
    let _ = dispatch.await;
    if show_progress {
        tally.report(true);
    }
    (records, dropped, duration)
}

/// The conversation run of `bench serve`: reads the conversations (with the tokenizer of
/// `tokenizer_dir`), sends the first turn of the first one as the probe (it must succeed),
/// then `warmup_requests` first turns unmeasured, then the conversations. Returns the
/// sent turns' records, the run's seconds, and the result's own keys (`num_conversations`,
/// `conversation_think_time`, `turns_not_sent`, `turns`).
pub async fn bench(
    client: &HttpClient,
    uri: &Uri,
    model: &str,
    tokenizer_dir: &Path,
    spec: ConversationSpec,
    args: &BenchArgs,
) -> Result<(Vec<RequestRecord>, f64, Map<String, Value>), String> {
    let dir = tokenizer_dir.to_path_buf();
    let conversations =
        tokio::task::spawn_blocking(move || conversations(&load_tokenizer(&dir)?, &spec))
            .await
            .map_err(|e| format!("reading the conversations failed: {e}"))??;
    let schedule = Schedule {
        model: model.to_string(),
        max_concurrency: args.max_concurrency,
        rate: args.request_rate,
        think_time: args.think_time,
        ignore_eos: args.ignore_eos,
        seed: args.seed,
    };
    let first_turns = |count: usize| -> Vec<Conversation> {
        conversations
            .iter()
            .cycle()
            .take(count)
            .map(|c| Conversation {
                turns: c.turns[..1].to_vec(),
                ..c.clone()
            })
            .collect()
    };
    // vLLM's "initial test run": one request must succeed before anything is measured.
    let (probe, _, _) = run(client, uri, first_turns(1), &schedule, false).await;
    if let Some(error) = probe.into_iter().find_map(|t| t.record.error) {
        return Err(error);
    }
    if args.warmup_requests > 0 {
        events::phase("warmup", args.warmup_requests);
        let warm = Schedule {
            rate: None,
            ..schedule.clone()
        };
        run(client, uri, first_turns(args.warmup_requests), &warm, false).await;
    }
    let total = conversations.iter().map(|c| c.turns.len()).sum();
    events::phase("benchmark", total);
    let num_conversations = conversations.len();
    let (turns, not_sent, duration) = run(client, uri, conversations, &schedule, true).await;
    let mut extra = Map::new();
    extra.insert("num_conversations".into(), json!(num_conversations));
    extra.insert("conversation_think_time".into(), json!(args.think_time));
    extra.insert("turns_not_sent".into(), json!(not_sent));
    extra.insert("turns".into(), Value::Array(per_turn(&turns)));
    let records = turns.into_iter().map(|t| t.record).collect();
    Ok((records, duration, extra))
}

/// Each turn's numbers (`turns` of the result): `turn` (from 1), `completed`, `failed`,
/// `mean_ttft_ms`, `median_ttft_ms`, `p99_ttft_ms`, `mean_input_tokens` and
/// `mean_cached_tokens` (null when the server reported no cached tokens).
pub fn per_turn(records: &[TurnRecord]) -> Vec<Value> {
    let last = records.iter().map(|r| r.turn).max().unwrap_or(0);
    (1..=last)
        .map(|turn| {
            let of_turn: Vec<&RequestRecord> = records
                .iter()
                .filter(|r| r.turn == turn)
                .map(|r| &r.record)
                .collect();
            let ok: Vec<&RequestRecord> = of_turn.iter().copied().filter(|r| r.success).collect();
            let mut ttft: Vec<f64> = ok.iter().map(|r| r.ttft * 1000.0).collect();
            ttft.sort_by(f64::total_cmp);
            let mean = |values: &[f64]| {
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
            };
            let input: Vec<f64> = ok.iter().map(|r| r.prompt_len as f64).collect();
            let cached: Vec<f64> = ok
                .iter()
                .filter_map(|r| r.cached_tokens.map(|n| n as f64))
                .collect();
            let mut row = Map::new();
            row.insert("turn".into(), json!(turn));
            row.insert("completed".into(), json!(ok.len()));
            row.insert("failed".into(), json!(of_turn.len() - ok.len()));
            row.insert("mean_ttft_ms".into(), json!(mean(&ttft)));
            let at = |p: f64| (!ttft.is_empty()).then(|| percentile(&ttft, p));
            row.insert("median_ttft_ms".into(), json!(at(50.0)));
            row.insert("p99_ttft_ms".into(), json!(at(99.0)));
            row.insert("mean_input_tokens".into(), json!(mean(&input)));
            row.insert("mean_cached_tokens".into(), json!(mean(&cached)));
            Value::Object(row)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(turn: usize, ttft: f64, prompt_len: usize, cached: Option<usize>) -> TurnRecord {
        TurnRecord {
            turn,
            record: RequestRecord {
                success: ttft > 0.0,
                ttft,
                prompt_len,
                cached_tokens: cached,
                ..Default::default()
            },
        }
    }

    #[test]
    fn turns_are_summarised_one_row_each() {
        let rows = per_turn(&[
            turn(1, 0.2, 10, Some(0)),
            turn(1, 0.4, 12, Some(0)),
            turn(2, 0.1, 30, Some(16)),
            turn(2, 0.0, 30, None),
            turn(3, 0.1, 50, None),
        ]);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0]["completed"], json!(2));
        assert!((rows[0]["mean_ttft_ms"].as_f64().unwrap() - 300.0).abs() < 1e-9);
        assert_eq!(rows[0]["mean_input_tokens"], json!(11.0));
        assert_eq!(rows[1]["failed"], json!(1));
        assert_eq!(rows[1]["mean_cached_tokens"], json!(16.0));
        assert_eq!(rows[2]["mean_cached_tokens"], Value::Null);
    }
}
