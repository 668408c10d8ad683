//! `vrs-rs bench serve`: a load generator for any OpenAI-compatible server (completions,
//! chat completions, the Responses API, embeddings) or Anthropic Messages server, measuring
//! with vLLM's definitions (`vllm bench serve`). The `vrs bench serve` app passes every
//! setting as `--args-json` and renders the JSON-lines events this writes (see
//! [`events`]).

pub mod args;
pub mod client;
pub mod conversation;
pub mod dataset;
pub mod events;
pub mod metrics;
pub mod payload;
pub mod progress;
pub mod runner;
pub mod sse;
pub mod sweep;

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::args::BenchArgs;

/// `vrs-rs bench ...`
#[derive(Debug, Args)]
pub struct BenchCli {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load-test an OpenAI-compatible (or Anthropic Messages) server; writes JSON-lines
    /// events to stdout.
    ///
    /// Normally run by `vrs bench serve`, which builds the settings document.
    Serve {
        /// Every setting as one JSON object (keys: base_url, endpoint, backend, model,
        /// tokenizer, dataset, dataset_path and the dataset's own keys, random_input_len,
        /// random_output_len, random_range_ratio, random_prefix_len, save_detailed,
        /// seed, num_prompts, max_concurrency, request_rate, ignore_eos, warmup_requests,
        /// percentile_metrics, metric_percentiles, goodput, label, insecure, ca_cert).
        #[arg(long, value_name = "JSON")]
        args_json: String,
    },
    /// Run `bench serve` over a list of concurrencies or request rates, against one or
    /// more servers; writes a result JSON per point and a summary CSV (JSON-lines events
    /// to stdout).
    ///
    /// Normally run by `vrs bench sweep`, which builds the settings document.
    Sweep {
        /// Every setting as one JSON object (keys: base_urls, labels, max_concurrency,
        /// request_rate, output_dir, resume, stop_at_slo, max_failed_ratio, and serve:
        /// the `bench serve` keys but base_url, label, max_concurrency, request_rate).
        #[arg(long, value_name = "JSON")]
        args_json: String,
    },
}

/// Runs a `bench` subcommand; failures are an error event and a non-zero exit code.
pub fn run(cli: BenchCli) -> ExitCode {
    match cli.command {
        BenchCommand::Serve { args_json } => serve(&args_json),
        BenchCommand::Sweep { args_json } => sweep(&args_json),
    }
}

/// Runs `future` on a new multi-threaded runtime; `None` (after an error event) when the
/// runtime cannot start.
fn block_on<T>(future: impl std::future::Future<Output = T>) -> Option<T> {
    raise_open_file_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vrs-bench")
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            events::error(&format!("cannot start the async runtime: {e}"));
            return None;
        }
    };
    let outcome = runtime.block_on(future);
    runtime.shutdown_background();
    Some(outcome)
}

/// `bench serve --args-json JSON`.
pub fn serve(args_json: &str) -> ExitCode {
    let args = match BenchArgs::from_json(args_json) {
        Ok(args) => args,
        Err(message) => {
            events::error(&message);
            return ExitCode::from(2);
        }
    };
    let Some(outcome) = block_on(runner::bench(args)) else {
        return ExitCode::FAILURE;
    };
    match outcome {
        Ok(result) => {
            events::emit("result", result);
            ExitCode::SUCCESS
        }
        Err(message) => {
            events::error(&message);
            ExitCode::FAILURE
        }
    }
}

/// `bench sweep --args-json JSON`: exit 0 when every server's sweep ran (or stopped on
/// its results), 1 when a point could not run, 2 for invalid settings.
pub fn sweep(args_json: &str) -> ExitCode {
    let plan = match sweep::Sweep::from_json(args_json) {
        Ok(plan) => plan,
        Err(message) => {
            events::error(&message);
            return ExitCode::from(2);
        }
    };
    match block_on(sweep::run(plan)) {
        Some(Ok(true)) => ExitCode::SUCCESS,
        Some(Ok(false)) | None => ExitCode::FAILURE,
        Some(Err(message)) => {
            events::error(&message);
            ExitCode::FAILURE
        }
    }
}

/// Every open connection is a file descriptor: lift the soft limit to the hard one.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a stack value of the type they expect.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}
