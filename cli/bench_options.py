"""The options `vrs bench serve` and `vrs bench sweep` share: what is sent and how it is
measured (declarations only; cli/bench_args.py turns them into the args-json)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cli.bench_vllm import BACKENDS


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
    conversation = "conversation"


def vrs_backend(backend: Backend) -> Backend:
    """vLLM's names (vllm, openai) become the vrs backend that sends the same requests."""
    return Backend(BACKENDS[backend.value])


EndpointOption = Annotated[str | None, typer.Option(
    help="Request path. Default: /v1/completions; /v1/chat/completions, /v1/responses, "
         "/v1/messages or /v1/embeddings for openai-chat, openai-responses, "
         "anthropic-messages or openai-embeddings.")]

BackendOption = Annotated[Backend, typer.Option(
    callback=vrs_backend, metavar="API",
    help="Which API the requests use: openai-completions (vLLM's vllm and openai name "
         "it too), openai-chat, openai-responses (the Responses API), anthropic-messages "
         "(Anthropic's Messages API; no --ignore-eos for these two) or openai-embeddings "
         "(each prompt embedded: E2EL and input tokens only).")]

ModelOption = Annotated[str | None, typer.Option(
    help="Model name sent in requests. Default: the first model of GET /v1/models.")]

TokenizerOption = Annotated[Path | None, typer.Option(
    exists=True, file_okay=False, help="Tokenizer directory (with tokenizer.json). "
    "Default: the served model's directory, when the server reports a local one.")]

DatasetOption = Annotated[Dataset, typer.Option(
    "--dataset-name", "--dataset", metavar="NAME",
    help="Where prompts come from: random (generated), sharegpt (a ShareGPT JSON "
         "file), custom (a JSONL file of {\"prompt\", \"output_tokens\"?}), sonnet "
         "(lines of a text file: shared first lines, then random ones) or "
         "prefix_repetition (shared random prefixes, then random suffixes), as vLLM "
         "makes them; conversation (a JSON list of multi-turn chats, sent turn by turn "
         "with the server's own answers in the history; needs --backend openai-chat).")]

DatasetPathOption = Annotated[Path | None, typer.Option(
    metavar="FILE", help="The sharegpt, custom, sonnet or conversation dataset's file.")]

ConversationOutputLenOption = Annotated[int | None, typer.Option(
    min=1, help="Conversation: max_tokens of every turn. Default: the length of the "
                "file's answer to that turn.")]

ConversationThinkTimeOption = Annotated[float, typer.Option(
    min=0.0, metavar="SECONDS",
    help="Conversation: seconds a conversation waits between an answer and its next "
         "turn (a user reading and typing).")]

SharegptOutputLenOption = Annotated[int | None, typer.Option(
    min=1, help="ShareGPT: max_tokens of each request. Default: the length of the "
                "conversation's answer.")]

CustomOutputLenOption = Annotated[int, typer.Option(
    min=-1, help="Custom: max_tokens of each request; -1: each line's "
                 "output_tokens.")]

PrefixRepetitionPrefixLenOption = Annotated[int, typer.Option(
    min=0, help="Prefix repetition: tokens of each shared prefix.")]

PrefixRepetitionSuffixLenOption = Annotated[int, typer.Option(
    min=0, help="Prefix repetition: tokens of each prompt's own suffix.")]

PrefixRepetitionNumPrefixesOption = Annotated[int, typer.Option(
    min=1, help="Prefix repetition: distinct prefixes (each gets num-prompts / this "
                "suffixes).")]

PrefixRepetitionOutputLenOption = Annotated[int, typer.Option(
    min=1, help="Prefix repetition: max_tokens of each request.")]

SonnetInputLenOption = Annotated[int, typer.Option(
    min=1, help="Sonnet: most tokens of each prompt (in the chat template), the "
                "instruction and shared lines included.")]

SonnetOutputLenOption = Annotated[int, typer.Option(
    min=1, help="Sonnet: max_tokens of each request.")]

SonnetPrefixLenOption = Annotated[int, typer.Option(
    min=0, help="Sonnet: tokens of the shared prefix (the instruction and the file's "
                "first lines).")]

SkipChatTemplateOption = Annotated[bool, typer.Option(
    "--skip-chat-template", help="Custom, and sonnet over completions: send each prompt "
                                 "as it is, not wrapped in the model's chat template.")]

RandomInputLenOption = Annotated[int, typer.Option(
    "--random-input-len", "--input-len", min=0,
    help="Random dataset: prompt length in tokens (exact for the tokenizer).")]

RandomOutputLenOption = Annotated[int, typer.Option(
    "--random-output-len", "--output-len", min=1,
    help="Random dataset: max_tokens of each request.")]

RandomRangeRatioOption = Annotated[float, typer.Option(
    min=0.0, max=1.0,
    help="Random dataset: lengths vary uniformly within len*(1-r) .. len*(1+r).")]

RandomPrefixLenOption = Annotated[int, typer.Option(
    min=0, help="Random dataset: tokens every prompt starts with (the same ones), "
                "before its own --random-input-len.")]

SeedOption = Annotated[int, typer.Option(help="Seed of the prompts and arrival times.")]

NumPromptsOption = Annotated[int, typer.Option(
    min=1, help="Requests to send (conversation dataset: conversations, each sending "
                "all its turns).")]

IgnoreEosOption = Annotated[bool, typer.Option(
    "--ignore-eos", help="Ask the server to ignore EOS, so every request generates "
                         "exactly its max_tokens.")]

WarmupRequestsOption = Annotated[int, typer.Option(
    "--warmup-requests", "--num-warmups", min=0,
    help="Requests sent (and not measured) before the run.")]

PercentileMetricsOption = Annotated[str | None, typer.Option(
    help="Comma-separated metrics to report: ttft, tpot, itl, e2el (vLLM's default "
         "leaves out e2el). Default: all four; e2el for openai-embeddings, which "
         "measures nothing else.")]

MetricPercentilesOption = Annotated[str, typer.Option(
    help="Comma-separated percentiles to report, e.g. 50,90,99.")]

GoodputOption = Annotated[list[str] | None, typer.Option(
    help="Service level objectives in ms, e.g. ttft:500 or 'ttft:500 tpot:50' "
         "(repeatable); adds request_goodput.")]

InsecureOption = Annotated[bool, typer.Option(
    "--insecure", help="https: accept any server certificate (a self-signed test "
                       "server); nothing is checked.")]

CaCertOption = Annotated[Path | None, typer.Option(
    exists=True, dir_okay=False, metavar="PATH",
    help="https: PEM file of the CA certificates the server's certificate must chain "
         "to. Default: the system's trust store.")]


def workload_options(
    endpoint: EndpointOption = None,
    backend: BackendOption = Backend.openai_completions,
    model: ModelOption = None,
    tokenizer: TokenizerOption = None,
    dataset: DatasetOption = Dataset.random,
    dataset_path: DatasetPathOption = None,
    sharegpt_output_len: SharegptOutputLenOption = None,
    custom_output_len: CustomOutputLenOption = 256,
    prefix_repetition_prefix_len: PrefixRepetitionPrefixLenOption = 256,
    prefix_repetition_suffix_len: PrefixRepetitionSuffixLenOption = 256,
    prefix_repetition_num_prefixes: PrefixRepetitionNumPrefixesOption = 10,
    prefix_repetition_output_len: PrefixRepetitionOutputLenOption = 128,
    sonnet_input_len: SonnetInputLenOption = 550,
    sonnet_output_len: SonnetOutputLenOption = 150,
    sonnet_prefix_len: SonnetPrefixLenOption = 200,
    skip_chat_template: SkipChatTemplateOption = False,
    conversation_output_len: ConversationOutputLenOption = None,
    conversation_think_time: ConversationThinkTimeOption = 0.0,
    random_input_len: RandomInputLenOption = 1024,
    random_output_len: RandomOutputLenOption = 128,
    random_range_ratio: RandomRangeRatioOption = 0.0,
    random_prefix_len: RandomPrefixLenOption = 0,
    seed: SeedOption = 0,
    num_prompts: NumPromptsOption = 1000,
    ignore_eos: IgnoreEosOption = False,
    warmup_requests: WarmupRequestsOption = 0,
    percentile_metrics: PercentileMetricsOption = None,
    metric_percentiles: MetricPercentilesOption = "99",
    goodput: GoodputOption = None,
    insecure: InsecureOption = False,
    ca_cert: CaCertOption = None,
) -> None:
    """The options of `bench serve` and `bench sweep` (what is sent, and how it is
    measured): a declaration, read by ``cli.server_options.with_options``; calling it does
    nothing."""
