//! One `bench serve` run: find the model and its tokenizer, build the prompts, probe the
//! endpoint, warm up, send the measured requests on schedule, and summarise them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use hyper::Uri;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::{Duration, Instant, MissedTickBehavior};

use crate::args::BenchArgs;
use crate::args::DatasetChoice;
use crate::client::connect::tls_config;
use crate::client::{parse_uri, request_body, HttpClient};
use crate::conversation;
use crate::dataset::{
    file_prompts, load_tokenizer, prefix_repetition_prompts, random_prompts, sonnet_prompts,
    ConversationSpec, FileSpec, PrefixSpec, RandomSpec, SonnetFormat, SonnetSpec,
};
use crate::events;
use crate::metrics::{Report, RequestRecord};
use crate::progress::{Tally, PROGRESS_EVERY};

/// One prepared request: the body is built before the clock starts.
#[derive(Clone)]
struct Job {
    body: Bytes,
    prompt_len: usize,
}

/// The served model and where its tokenizer lives.
struct Target {
    model: String,
    tokenizer: PathBuf,
}

fn has_tokenizer(dir: &Path) -> bool {
    dir.join("tokenizer.json").is_file()
}

/// `--model` defaults to the first model the server lists; `--tokenizer` to the listed
/// model's directory (its `root`, else its id) when that is a local directory.
async fn discover(client: &HttpClient, args: &BenchArgs) -> Result<Target, String> {
    let listed = match (&args.model, &args.tokenizer) {
        (Some(_), Some(_)) => None,
        _ => Some(client.get_json(&args.models_url()).await?),
    };
    let cards: &[Value] = match listed.as_ref().map(|v| &v["data"]) {
        Some(Value::Array(cards)) => cards,
        _ => &[],
    };
    let card = match &args.model {
        Some(name) => cards
            .iter()
            .find(|c| c["id"].as_str() == Some(name.as_str())),
        None => cards.first(),
    };
    let model = match (&args.model, card.and_then(|c| c["id"].as_str())) {
        (Some(name), _) => name.clone(),
        (None, Some(id)) => id.to_string(),
        (None, None) => {
            return Err(format!(
                "{} lists no model; pass --model",
                args.models_url()
            ));
        }
    };
    let tokenizer = match &args.tokenizer {
        Some(dir) => {
            let path = PathBuf::from(dir);
            if !has_tokenizer(&path) {
                return Err(format!(
                    "--tokenizer {dir}: no tokenizer.json in that directory"
                ));
            }
            path
        }
        None => {
            let candidates = [card.and_then(|c| c["root"].as_str()), Some(model.as_str())];
            candidates
                .into_iter()
                .flatten()
                .map(PathBuf::from)
                .find(|p| has_tokenizer(p))
                .ok_or_else(|| {
                    format!(
                        "the served model {model:?} is not a local directory with a \
                         tokenizer.json; pass --tokenizer DIR"
                    )
                })?
        }
    };
    Ok(Target { model, tokenizer })
}

/// Sends `jobs` (at most `concurrency` at once, arrivals Poisson at `rate` per second,
/// or all at once) and returns their records and the seconds from first send to last
/// answer.
async fn run_jobs(
    client: &HttpClient,
    uri: &Uri,
    jobs: Vec<Job>,
    concurrency: Option<usize>,
    rate: Option<f64>,
    seed: u64,
    show_progress: bool,
) -> (Vec<RequestRecord>, f64) {
    let total = jobs.len();
    let limit = concurrency.map(|n| Arc::new(Semaphore::new(n)));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = Instant::now();
    let dispatch = {
        let client = client.clone();
        let uri = uri.clone();
        tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut next = start;
            for job in jobs {
                if let Some(rate) = rate {
                    tokio::time::sleep_until(next).await;
                    let gap = -(1.0 - rng.random::<f64>()).ln() / rate;
                    next += Duration::from_secs_f64(gap);
                }
                let (client, uri, tx, limit) =
                    (client.clone(), uri.clone(), tx.clone(), limit.clone());
                tokio::spawn(async move {
                    let _permit = match &limit {
                        Some(limit) => limit.clone().acquire_owned().await.ok(),
                        None => None,
                    };
                    // vLLM's start_time: when the request is sent, after the permit.
                    let sent = start.elapsed().as_secs_f64();
                    let mut record = client.send(&uri, job.body, job.prompt_len).await;
                    record.start = sent;
                    let _ = tx.send(record);
                });
            }
        })
    };
    let mut records = Vec::with_capacity(total);
    let mut tally = Tally::new(start, total);
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    while records.len() < total {
        tokio::select! {
            record = rx.recv() => match record {
                Some(record) => {
                    tally.add(&record);
                    records.push(record);
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
    (records, duration)
}

/// The prompts of a single-turn dataset, sent on schedule after the probe and the warm-up:
/// their records and the seconds the measured run took.
async fn single_turn(
    client: &HttpClient,
    uri: &Uri,
    target: &Target,
    args: &BenchArgs,
) -> Result<(Vec<RequestRecord>, f64), String> {
    let spec = RandomSpec {
        input_len: args.random_input_len,
        output_len: args.random_output_len,
        range_ratio: args.random_range_ratio,
        prefix_len: args.random_prefix_len,
        num_prompts: args.num_prompts,
        seed: args.seed,
    };
    let (num_prompts, seed) = (args.num_prompts, args.seed);
    let dataset = args.dataset.clone();
    let tokenizer_dir = target.tokenizer.clone();
    let messages = args.backend.sends_messages();
    let prompts = tokio::task::spawn_blocking(move || match dataset {
        DatasetChoice::Random => random_prompts(&load_tokenizer(&tokenizer_dir)?, &spec),
        DatasetChoice::File(kind, path) => {
            let file = FileSpec {
                kind,
                path,
                num_prompts,
                seed,
            };
            file_prompts(&tokenizer_dir, &file)
        }
        DatasetChoice::Sonnet {
            path,
            shape,
            chat_template,
        } => {
            // vLLM's: a chat request sends the lines (the server templates them).
            let format = match (messages, chat_template) {
                (true, _) => SonnetFormat::ServerTemplate,
                (false, true) => SonnetFormat::Template,
                (false, false) => SonnetFormat::Raw,
            };
            let sonnet = SonnetSpec {
                path,
                shape,
                format,
                num_prompts,
                seed,
            };
            sonnet_prompts(&tokenizer_dir, &sonnet)
        }
        DatasetChoice::Conversation { .. } => {
            Err("the conversation dataset is run turn by turn, not as prompts".to_string())
        }
        DatasetChoice::PrefixRepetition {
            prefix_len,
            suffix_len,
            num_prefixes,
            output_len,
        } => {
            let shape = PrefixSpec {
                prefix_len,
                suffix_len,
                num_prefixes,
                output_len,
                num_prompts,
                seed,
            };
            prefix_repetition_prompts(&load_tokenizer(&tokenizer_dir)?, &shape)
        }
    })
    .await
    .map_err(|e| format!("prompt generation failed: {e}"))??;
    let jobs: Vec<Job> = prompts
        .iter()
        .map(|p| Job {
            body: request_body(
                args.backend,
                &target.model,
                &p.text,
                p.output_len,
                args.ignore_eos,
            ),
            prompt_len: p.prompt_len,
        })
        .collect();

    // vLLM's "initial test run": one request must succeed before anything is measured.
    let first = jobs.first().ok_or("the dataset is empty")?;
    let probe = client.send(uri, first.body.clone(), first.prompt_len).await;
    if let Some(error) = probe.error {
        return Err(error);
    }
    if args.warmup_requests > 0 {
        events::phase("warmup", args.warmup_requests);
        let warm: Vec<Job> = jobs
            .iter()
            .cycle()
            .take(args.warmup_requests)
            .cloned()
            .collect();
        run_jobs(
            client,
            uri,
            warm,
            args.max_concurrency,
            None,
            args.seed,
            false,
        )
        .await;
    }
    events::phase("benchmark", args.num_prompts);
    let (records, duration) = run_jobs(
        client,
        uri,
        jobs,
        args.max_concurrency,
        args.request_rate,
        args.seed,
        true,
    )
    .await;
    Ok((records, duration))
}

/// The whole run; `Ok` holds the result event's fields.
pub async fn bench(args: BenchArgs) -> Result<Map<String, Value>, String> {
    let tls = if args.https() {
        Some(tls_config(&args.trust)?)
    } else {
        None
    };
    let client = HttpClient::for_backend(args.backend, tls);
    let uri = parse_uri(&args.url())?;
    let target = discover(&client, &args).await?;
    let tokenizer_name = target.tokenizer.display().to_string();
    events::info(
        &args.url(),
        &target.model,
        &tokenizer_name,
        args.num_prompts,
    );
    let (records, duration, extra) = match &args.dataset {
        DatasetChoice::Conversation { path, output_len } => {
            let spec = ConversationSpec {
                path: path.clone(),
                output_len: *output_len,
                num_conversations: args.num_prompts,
                seed: args.seed,
            };
            conversation::bench(&client, &uri, &target.model, &target.tokenizer, spec, &args)
                .await?
        }
        _ => {
            let (records, duration) = single_turn(&client, &uri, &target, &args).await?;
            (records, duration, Map::new())
        }
    };
    let mut report = Report::new(
        &records,
        duration,
        &args.percentile_metrics,
        &args.metric_percentiles,
        args.goodput.as_deref(),
    );
    if args.backend.pooling() {
        report = report.pooling();
    }
    let mut result = Map::new();
    result.insert("label".into(), json!(args.label));
    result.insert("backend".into(), json!(args.backend.name()));
    result.insert("model".into(), json!(target.model));
    result.insert(
        "tokenizer".into(),
        json!(target.tokenizer.display().to_string()),
    );
    result.insert("base_url".into(), json!(args.base_url));
    result.insert("endpoint".into(), json!(args.endpoint));
    result.insert("num_prompts".into(), json!(args.num_prompts));
    result.insert("max_concurrency".into(), json!(args.max_concurrency));
    result.insert(
        "request_rate".into(),
        args.request_rate.map_or(json!("inf"), |r| json!(r)),
    );
    result.insert("random_input_len".into(), json!(args.random_input_len));
    result.insert("random_output_len".into(), json!(args.random_output_len));
    result.insert("random_range_ratio".into(), json!(args.random_range_ratio));
    result.insert("random_prefix_len".into(), json!(args.random_prefix_len));
    if let Some(slos) = &args.goodput {
        let slos: Map<String, Value> = slos
            .iter()
            .map(|(m, ms)| (m.key().to_string(), json!(ms)))
            .collect();
        result.insert("goodput_slos_ms".into(), Value::Object(slos));
    }
    result.extend(report.to_json());
    result.extend(extra);
    if args.save_detailed {
        result.extend(detailed(&records));
    }
    Ok(result)
}

/// vLLM's per-request lists (`--save-detailed`), in the order the requests finished:
/// `input_lens`, `output_lens`, `start_times` (seconds from the run's start), `ttfts` and
/// `itls` (seconds), `errors` ("" for a success).
fn detailed(records: &[RequestRecord]) -> Map<String, Value> {
    let list = |f: &dyn Fn(&RequestRecord) -> Value| Value::Array(records.iter().map(f).collect());
    let mut keys = Map::new();
    keys.insert("input_lens".into(), list(&|r| json!(r.prompt_len)));
    keys.insert("output_lens".into(), list(&|r| json!(r.output_tokens)));
    keys.insert("start_times".into(), list(&|r| json!(r.start)));
    keys.insert("ttfts".into(), list(&|r| json!(r.ttft)));
    keys.insert("itls".into(), list(&|r| json!(r.itl)));
    keys.insert(
        "errors".into(),
        list(&|r| json!(r.error.as_deref().unwrap_or(""))),
    );
    keys
}
