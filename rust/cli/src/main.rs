//! `vrs-rs`: the vrs Rust frontend binary.

mod args;
mod frontend;
mod logfmt;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use vrs_server::args::EngineKind;

use crate::args::{render_args, serve_args, RenderCli, ServeCli};

/// Tokenization and JSON handling allocate many small short-lived buffers across worker
/// threads; mimalloc's thread-local free lists serve them far faster than glibc malloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "vrs-rs",
    version,
    about = "vrs Rust frontend: OpenAI-compatible HTTP in front of vrs's engine or vLLM's"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the engine (`python -m engine --headless`, or with --engine vllm vLLM's
    /// headless engine, or wait for remote ones) and serve the OpenAI API.
    ///
    /// Normally run by `vrs serve`, which passes every setting as --args-json; the
    /// individual flags allow running it on its own.
    Serve(Box<ServeCli>),
    /// Serve the OpenAI API on sockets and engines set up by the parent process.
    ///
    /// Run by `vrs frontend`, which binds the HTTP and engine listeners, starts the
    /// engines and passes the listening fds on; vrs-rs adopts them and serves. Also
    /// vLLM's Rust frontend worker: `VLLM_USE_RUST_FRONTEND=1
    /// VLLM_RUST_FRONTEND_PATH=vrs-rs vllm serve MODEL` (told by the absence of
    /// --input-address/--output-address).
    Frontend(Box<frontend::FrontendCli>),
    /// Benchmarks (`bench serve`: load-test an OpenAI-compatible server).
    Bench(vrs_bench::BenchCli),
    /// Serve template rendering + tokenization only (no engine, no weights): what the
    /// engine would receive for a chat or completions request.
    ///
    /// Normally run by `vrs render`, which passes every setting as --args-json.
    Render(Box<RenderCli>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Bench(bench) => vrs_bench::run(bench),
        Cmd::Serve(serve) => {
            let args = match serve_args(*serve) {
                Ok(args) => args,
                Err(e) => {
                    eprintln!("vrs-rs serve: error: {e}");
                    return ExitCode::from(2);
                }
            };
            init_tracing(args.log_level());
            match args.engine_kind() {
                EngineKind::Vrs => run_async("serve", vrs_server::lifecycle::serve::run(args)),
                EngineKind::Vllm => {
                    run_async("serve", vrs_server::lifecycle::vllm::serve::run(args))
                }
            }
        }
        Cmd::Frontend(cli) => {
            let contract = match cli.contract() {
                Ok(contract) => contract,
                Err(e) => {
                    eprintln!("vrs-rs frontend: error: {e}");
                    return ExitCode::from(2);
                }
            };
            init_tracing(contract.log_level());
            run_async("frontend", frontend::run(contract))
        }
        Cmd::Render(render) => {
            let args = match render_args(*render) {
                Ok(args) => args,
                Err(e) => {
                    eprintln!("vrs-rs render: error: {e}");
                    return ExitCode::from(2);
                }
            };
            init_tracing(args.log_level());
            run_async("render", vrs_server::lifecycle::render::run(args))
        }
    }
}

/// Runs a subcommand's future on a multi-threaded runtime; its value is the exit code.
fn run_async(name: &str, future: impl std::future::Future<Output = u8>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("vrs-rs-worker")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("vrs-rs {name}: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(future);
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    ExitCode::from(code)
}

fn init_tracing(level: &str) {
    use tracing_subscriber::EnvFilter;
    let level = vrs_server::args::tracing_level(level).unwrap_or("info");
    // The binary's crates log at the chosen level; dependencies only warnings.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "warn,vrs_rs={level},vrs_server={level},vrs_engine_client={level}"
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .event_format(logfmt::Layout)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent_and_versioned() {
        Cli::command().debug_assert();
        let err = Cli::try_parse_from(["vrs-rs", "--version"]).err().unwrap();
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        assert!(err.to_string().contains(env!("CARGO_PKG_VERSION")));
        let help = Cli::command()
            .find_subcommand_mut("serve")
            .unwrap()
            .render_long_help()
            .to_string();
        for flag in [
            "--args-json",
            "--host",
            "--port",
            "--served-model-name",
            "--mock",
            "--max-model-len",
            "--engine",
            "--vllm-python",
            "--vllm-engine-command",
        ] {
            assert!(help.contains(flag), "serve --help lacks {flag}");
        }
    }
}
