"""vLLM's `vllm bench serve` flags in `vrs bench serve`: the names vrs accepts as aliases
are declared on the typer command (cli/commands/bench.py); this module maps vLLM's
backend names, names the result file as vLLM does, and refuses vLLM's other flags with a
message naming what vrs offers instead (source: vllm/benchmarks/serve.py and
docs/benchmarking/cli.md in the vllm-project/vllm repository).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    # typer ships its own click (typer._click); TyperCommand.parse_args takes its Context.
    from typer._click import Context

# vLLM backend name -> the vrs backend that sends the same requests.
BACKENDS = {
    "openai-completions": "openai-completions",
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic-messages": "anthropic-messages",
    "openai-embeddings": "openai-embeddings",
    "vllm": "openai-completions",
    "openai": "openai-completions",
}
TEXT_ONLY = ("vrs bench serve measures text generation and text embeddings: use --backend "
             "openai-completions (vLLM's vllm/openai), openai-chat, openai-responses, "
             "anthropic-messages or openai-embeddings")

NO_EQUIVALENT = "vrs bench serve has no equivalent"
RANDOM_ONLY = ("vrs bench serve makes the random, sharegpt, custom, sonnet, "
               "prefix_repetition and conversation datasets: use --dataset-name random with "
               "--random-input-len/--random-output-len/--random-prefix-len, sharegpt / custom "
               "with --dataset-path, sonnet with --dataset-path and --sonnet-input-len, "
               "prefix_repetition with --prefix-repetition-*, or conversation (multi-turn "
               "chats) with --dataset-path")
# Option prefixes of vLLM's other datasets (and its sharegpt / custom options vrs lacks).
DATASET_PREFIXES = ("--hf-", "--sharegpt-", "--custom-", "--random-mm-", "--spec-bench-",
                    "--speed-bench-", "--blazedit-", "--bfcl-", "--prefix-repetition-",
                    "--random-batch-", "--timed-trace-")
# sonnet: vLLM's earlier dataset (0.33 no longer has it), with its --sonnet-* flags.
# conversation: vrs's own (vLLM runs multi-turn chats with benchmarks/multi_turn).
DATASETS = ("random", "sharegpt", "custom", "sonnet", "prefix_repetition", "conversation")
GREEDY = "vrs bench serve sends greedy requests (temperature 0); " + NO_EQUIVALENT
REFUSED = {
    "--no-oversample": "too few entries are drawn again (vLLM's default); not "
                       "oversampling: " + NO_EQUIVALENT,
    "--enable-multimodal-chat": RANDOM_ONLY,
    "--trust-remote-code": RANDOM_ONLY,
    "--append-result": "use a new --result-filename per run; appending: " + NO_EQUIVALENT,
    "--metadata": "use --label to name a run; other metadata: " + NO_EQUIVALENT,
    "--burstiness": "arrivals are Poisson (vLLM's default --burstiness 1) at "
                    "--request-rate; other burstiness: " + NO_EQUIVALENT,
    "--ramp-up-strategy": "use a fixed --request-rate; ramp-up: " + NO_EQUIVALENT,
    "--ramp-up-start-rps": "use a fixed --request-rate; ramp-up: " + NO_EQUIVALENT,
    "--ramp-up-end-rps": "use a fixed --request-rate; ramp-up: " + NO_EQUIVALENT,
    "--ready-check-timeout-sec": "start the server first (vrs serve prints its address "
                                 "once it listens); waiting: " + NO_EQUIVALENT,
    "--probe-request-rate": NO_EQUIVALENT,
    "--self-timed": "arrivals follow --request-rate (Poisson) or --max-concurrency; a "
                    "trace's own timing: " + NO_EQUIVALENT,
    "--plot-timeline": NO_EQUIVALENT,
    "--timeline-itl-thresholds": NO_EQUIVALENT,
    "--plot-dataset-stats": NO_EQUIVALENT,
    "--no-stream": "requests are always streamed (TTFT needs it); " + NO_EQUIVALENT,
    "--profile": NO_EQUIVALENT,
    "--served-model-name": "use --model (the name sent in requests) and --tokenizer",
    "--lora-modules": "use --model with the adapter's served name",
    "--header": NO_EQUIVALENT,
    "--extra-body": NO_EQUIVALENT,
    "--logprobs": NO_EQUIVALENT,
    "--use-beam-search": NO_EQUIVALENT,
    "--tokenizer-mode": "use --tokenizer DIR (a tokenizer.json); other modes: "
                        + NO_EQUIVALENT,
    "--request-id-prefix": NO_EQUIVALENT,
    "--top-p": GREEDY, "--top-k": GREEDY, "--min-p": GREEDY, "--temperature": GREEDY,
    "--frequency-penalty": GREEDY, "--presence-penalty": GREEDY,
    "--repetition-penalty": GREEDY,
}


def refusal(flag: str) -> str | None:
    """Why a vLLM flag that vrs does not take is refused; None for flags vLLM lacks."""
    if flag in REFUSED:
        return REFUSED[flag]
    if flag.startswith(DATASET_PREFIXES):
        return RANDOM_ONLY
    return None


def value_refusal(flag: str, value: str) -> str | None:
    """Why a value of --backend / --dataset-name is refused; None when vrs takes it."""
    if flag == "--backend" and value not in BACKENDS:
        return TEXT_ONLY
    if flag in ("--dataset-name", "--dataset") and value not in DATASETS:
        return RANDOM_ONLY
    return None


def result_filename(label: str | None, backend_name: str, request_rate: float,
                    max_concurrency: int | None, model: str, date: str) -> str:
    """vLLM's default name: {label}-{rate}qps[-concurrencyN]-{model basename}-{date}.json
    (the label defaults to the backend; the rate is spelled as Python prints a float)."""
    concurrency = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
    base_model = model.rstrip("/").split("/")[-1]
    return f"{label or backend_name}-{request_rate}qps{concurrency}-{base_model}-{date}.json"


class VllmFlagsCommand(TyperCommand):
    """Refuses vLLM-only flags with a message naming what vrs offers instead (click's
    own 'No such option' would say nothing of it)."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        known = {name for param in self.params for name in getattr(param, "opts", [])}
        for index, arg in enumerate(args):
            if arg == "--":
                break
            flag, eq, value = arg.partition("=")
            if not flag.startswith("--"):
                continue
            if flag not in known:
                reason = refusal(flag)
                if reason is not None:
                    raise typer.BadParameter(
                        f"a `vllm bench serve` option vrs does not take: {reason}.",
                        ctx=ctx, param_hint=f"'{flag}'")
                continue
            if not eq:
                value = args[index + 1] if index + 1 < len(args) else ""
            reason = value_refusal(flag, value)
            if reason is not None:
                raise typer.BadParameter(f"{value!r}: {reason}.", ctx=ctx,
                                         param_hint=f"'{flag}'")
        return super().parse_args(ctx, args)
