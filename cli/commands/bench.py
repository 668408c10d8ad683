"""`vrs bench serve`: load-test an OpenAI-compatible server (the load generator is vrs-rs)."""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cli.bench_vllm import BACKENDS, VllmFlagsCommand

app = typer.Typer(
    name="bench",
    help="Benchmarks: measure a running server.",
    rich_markup_mode="rich",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class Backend(StrEnum):
    openai_completions = "openai-completions"
    openai_chat = "openai-chat"
    openai_responses = "openai-responses"
    anthropic_messages = "anthropic-messages"
    openai_embeddings = "openai-embeddings"
    vllm = "vllm"  # vLLM's names of openai-completions
    openai = "openai"


class Dataset(StrEnum):
    random = "random"
    sharegpt = "sharegpt"
    custom = "custom"
    sonnet = "sonnet"
    prefix_repetition = "prefix_repetition"


def vrs_backend(backend: Backend) -> Backend:
    """vLLM's names (vllm, openai) become the vrs backend that sends the same requests."""
    return Backend(BACKENDS[backend.value])


@app.command("serve", cls=VllmFlagsCommand)
def serve(
    base_url: Annotated[str | None, typer.Option(
        help="Server address, e.g. http://127.0.0.1:8000 or https://host:8443. "
             "Default: http://HOST:PORT.")] = None,
    host: Annotated[str, typer.Option(help="Server host (when --base-url is not given).")]
        = "127.0.0.1",
    port: Annotated[int, typer.Option(
        min=1, max=65535, help="Server port (when --base-url is not given).")] = 8000,
    endpoint: Annotated[str | None, typer.Option(
        help="Request path. Default: /v1/completions; /v1/chat/completions, /v1/responses, "
             "/v1/messages or /v1/embeddings for openai-chat, openai-responses, "
             "anthropic-messages or openai-embeddings.")] = None,
    backend: Annotated[Backend, typer.Option(
        callback=vrs_backend, metavar="API",
        help="Which API the requests use: openai-completions (vLLM's vllm and openai name "
             "it too), openai-chat, openai-responses (the Responses API), anthropic-messages "
             "(Anthropic's Messages API; no --ignore-eos for these two) or openai-embeddings "
             "(each prompt embedded: E2EL and input tokens only).")]
        = Backend.openai_completions,
    model: Annotated[str | None, typer.Option(
        help="Model name sent in requests. Default: the first model of GET /v1/models.")]
        = None,
    tokenizer: Annotated[Path | None, typer.Option(
        exists=True, file_okay=False, help="Tokenizer directory (with tokenizer.json). "
        "Default: the served model's directory, when the server reports a local one.")]
        = None,
    dataset: Annotated[Dataset, typer.Option(
        "--dataset-name", "--dataset",
        help="Where prompts come from: random (generated), sharegpt (a ShareGPT JSON "
             "file), custom (a JSONL file of {\"prompt\", \"output_tokens\"?}), sonnet "
             "(lines of a text file: shared first lines, then random ones) or "
             "prefix_repetition (shared random prefixes, then random suffixes), as vLLM "
             "makes them.")] = Dataset.random,
    dataset_path: Annotated[Path | None, typer.Option(
        metavar="FILE", help="The sharegpt, custom or sonnet dataset's file.")] = None,
    sharegpt_output_len: Annotated[int | None, typer.Option(
        min=1, help="ShareGPT: max_tokens of each request. Default: the length of the "
                    "conversation's answer.")] = None,
    custom_output_len: Annotated[int, typer.Option(
        min=-1, help="Custom: max_tokens of each request; -1: each line's "
                     "output_tokens.")] = 256,
    sonnet_input_len: Annotated[int, typer.Option(
        min=1, help="Sonnet: most tokens of each prompt (in the chat template), the "
                    "instruction and shared lines included.")] = 550,
    sonnet_output_len: Annotated[int, typer.Option(
        min=1, help="Sonnet: max_tokens of each request.")] = 150,
    sonnet_prefix_len: Annotated[int, typer.Option(
        min=0, help="Sonnet: tokens of the shared prefix (the instruction and the file's "
                    "first lines).")] = 200,
    prefix_repetition_prefix_len: Annotated[int, typer.Option(
        min=0, help="Prefix repetition: tokens of each shared prefix.")] = 256,
    prefix_repetition_suffix_len: Annotated[int, typer.Option(
        min=0, help="Prefix repetition: tokens of each prompt's own suffix.")] = 256,
    prefix_repetition_num_prefixes: Annotated[int, typer.Option(
        min=1, help="Prefix repetition: distinct prefixes (each gets num-prompts / this "
                    "suffixes).")] = 10,
    prefix_repetition_output_len: Annotated[int, typer.Option(
        min=1, help="Prefix repetition: max_tokens of each request.")] = 128,
    skip_chat_template: Annotated[bool, typer.Option(
        "--skip-chat-template", help="Custom, and sonnet over completions: send each prompt "
                                     "as it is, not wrapped in the model's chat "
                                     "template.")] = False,
    random_input_len: Annotated[int, typer.Option(
        "--random-input-len", "--input-len", min=0,
        help="Random dataset: prompt length in tokens (exact for the tokenizer).")]
        = 1024,
    random_output_len: Annotated[int, typer.Option(
        "--random-output-len", "--output-len", min=1,
        help="Random dataset: max_tokens of each request.")] = 128,
    random_range_ratio: Annotated[float, typer.Option(
        min=0.0, max=1.0,
        help="Random dataset: lengths vary uniformly within len*(1-r) .. len*(1+r).")] = 0.0,
    random_prefix_len: Annotated[int, typer.Option(
        min=0, help="Random dataset: tokens every prompt starts with (the same ones), "
                    "before its own --random-input-len.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the prompts and arrival times.")] = 0,
    num_prompts: Annotated[int, typer.Option(min=1, help="Requests to send.")] = 1000,
    max_concurrency: Annotated[int | None, typer.Option(
        min=1, help="Most requests in flight at once. Default: no limit.")] = None,
    request_rate: Annotated[float, typer.Option(
        min=0.0,
        help="Requests per second, Poisson arrivals; inf sends all at once.")] = math.inf,
    ignore_eos: Annotated[bool, typer.Option(
        "--ignore-eos", help="Ask the server to ignore EOS, so every request generates "
                             "exactly its max_tokens.")] = False,
    warmup_requests: Annotated[int, typer.Option(
        "--warmup-requests", "--num-warmups", min=0,
        help="Requests sent (and not measured) before the run.")] = 0,
    percentile_metrics: Annotated[str | None, typer.Option(
        help="Comma-separated metrics to report: ttft, tpot, itl, e2el (vLLM's default "
             "leaves out e2el). Default: all four; e2el for openai-embeddings, which "
             "measures nothing else.")]
        = None,
    metric_percentiles: Annotated[str, typer.Option(
        help="Comma-separated percentiles to report, e.g. 50,90,99.")] = "99",
    goodput: Annotated[list[str] | None, typer.Option(
        help="Service level objectives in ms, e.g. ttft:500 or 'ttft:500 tpot:50' "
             "(repeatable); adds request_goodput.")] = None,
    result_file: Annotated[Path | None, typer.Option(
        dir_okay=False, help="Write the result JSON (vLLM's key names) to this file.")]
        = None,
    save_result: Annotated[bool, typer.Option(
        "--save-result", help="Write the result JSON under vLLM's file name "
        "({label}-{rate}qps[-concurrencyN]-{model}-{date}.json).")] = False,
    result_dir: Annotated[Path | None, typer.Option(
        file_okay=False, help="With --save-result: the directory of the result file "
                              "(default: the current one).")] = None,
    result_filename: Annotated[str | None, typer.Option(
        help="With --save-result: the result file's name instead of vLLM's.")] = None,
    label: Annotated[str | None, typer.Option(help="A name for this run, kept in the "
                                                      "result.")] = None,
    insecure: Annotated[bool, typer.Option(
        "--insecure", help="https: accept any server certificate (a self-signed test "
                           "server); nothing is checked.")] = False,
    ca_cert: Annotated[Path | None, typer.Option(
        exists=True, dir_okay=False, metavar="PATH",
        help="https: PEM file of the CA certificates the server's certificate must chain "
             "to. Default: the system's trust store.")] = None,
) -> None:
    """Load-test an OpenAI-compatible server and report vLLM's serving metrics.

    Works against any OpenAI-compatible server (vrs serve, vrs serve --frontend python,
    vLLM, SGLang...): completions, chat completions or the Responses API, an Anthropic
    Messages server (--backend anthropic-messages), or embeddings (--backend
    openai-embeddings). The load generator runs in vrs-rs;
    this shows its progress and results. vLLM's `vllm bench serve` flags work under
    their names where vrs does the same (--dataset-name, --input-len, --num-warmups,
    --save-result, --backend vllm...); the others are refused with what vrs offers
    instead.
    """
    from cli.bench_args import BenchOptions
    from cli.bench_runner import run_bench

    run_bench(BenchOptions(
        base_url=base_url, host=host, port=port, endpoint=endpoint, backend=backend.value,
        model=model, tokenizer=tokenizer, dataset=dataset.value, dataset_path=dataset_path,
        sharegpt_output_len=sharegpt_output_len, custom_output_len=custom_output_len,
        skip_chat_template=skip_chat_template,
        sonnet=(sonnet_input_len, sonnet_output_len, sonnet_prefix_len),
        random_prefix_len=random_prefix_len,
        prefix_repetition=(prefix_repetition_prefix_len, prefix_repetition_suffix_len,
                           prefix_repetition_num_prefixes, prefix_repetition_output_len),
        random_input_len=random_input_len, random_output_len=random_output_len,
        random_range_ratio=random_range_ratio, seed=seed, num_prompts=num_prompts,
        max_concurrency=max_concurrency, request_rate=request_rate, ignore_eos=ignore_eos,
        warmup_requests=warmup_requests, percentile_metrics=percentile_metrics,
        metric_percentiles=metric_percentiles, goodput=goodput or [],
        result_file=result_file, save_result=save_result, result_dir=result_dir,
        result_filename=result_filename, label=label, insecure=insecure, ca_cert=ca_cert,
    ))
