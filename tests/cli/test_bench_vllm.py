"""`vrs bench serve` speaks `vllm bench serve`: every flag of vLLM's documented examples
(tests/cli/fixtures/vllm_bench_serve_examples.txt, with its source) either parses to the
same vrs setting or is refused naming what vrs offers; --save-result against a real
`vrs serve --mock` on loopback writes vLLM's result file, and the peak lines show.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main

from cli.bench_display import plain_result
from cli.bench_vllm import BACKENDS
from cli.commands.bench import app
from tests.cli.test_bench import ROOT, demo_model, free_port, run_vrs, rust_binary  # noqa: F401
from tests.processes import terminate, wait_healthy

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parent / "fixtures" / "vllm_bench_serve_examples.txt"
# vLLM flag -> the vrs setting it must land on, and vLLM's reading of its value.
SAME_SETTING: dict[str, tuple[str, Any]] = {
    "--backend": ("backend", lambda v: BACKENDS[v]),
    "--model": ("model", str),
    "--endpoint": ("endpoint", str),
    "--dataset-name": ("dataset", str),
    "--dataset-path": ("dataset_path", Path),
    "--skip-chat-template": ("skip_chat_template", lambda v: True),
    "--custom-output-len": ("custom_output_len", int),
    "--num-prompts": ("num_prompts", int),
    "--port": ("port", int),
    "--seed": ("seed", int),
    "--max-concurrency": ("max_concurrency", int),
    "--request-rate": ("request_rate", float),
    "--random-input-len": ("random_input_len", int),
    "--random-output-len": ("random_output_len", int),
    "--random-prefix-len": ("random_prefix_len", int),
    "--sonnet-input-len": ("sonnet_input_len", int),
    "--sonnet-output-len": ("sonnet_output_len", int),
    "--sonnet-prefix-len": ("sonnet_prefix_len", int),
    "--save-result": ("save_result", lambda v: True),
    "--result-dir": ("result_dir", Path),
    "--result-filename": ("result_filename", str),
    "--save-detailed": ("save_detailed", lambda v: True),
    "--ignore-eos": ("ignore_eos", lambda v: True),
    "--host": ("host", str),
    "--random-range-ratio": ("random_range_ratio", float),
    "--prefix-repetition-prefix-len": ("prefix_repetition_prefix_len", int),
    "--prefix-repetition-suffix-len": ("prefix_repetition_suffix_len", int),
    "--prefix-repetition-num-prefixes": ("prefix_repetition_num_prefixes", int),
    "--prefix-repetition-output-len": ("prefix_repetition_output_len", int),
}


def examples() -> list[list[str]]:
    lines = [line for line in EXAMPLES.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    commands = [shlex.split(line) for line in lines]
    assert all(c[:3] == ["vllm", "bench", "serve"] for c in commands)
    return [c[3:] for c in commands]


def flag_groups(argv: list[str]) -> list[tuple[str, str | None]]:
    """['--a', '1', '--b', '--c=2'] -> [('--a', '1'), ('--b', None), ('--c', '2')]."""
    groups: list[tuple[str, str | None]] = []
    for index, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        flag, eq, value = arg.partition("=")
        if not eq:
            following = argv[index + 1] if index + 1 < len(argv) else "--"
            value = None if following.startswith("--") else following
        groups.append((flag, value))
    return groups


def serve_command() -> Any:
    """The click command of `vrs bench serve`, as the vrs app builds it."""
    return typer.main.get_command(app).commands["serve"]  # type: ignore[attr-defined]


def parse(args: list[str]) -> dict[str, Any]:
    """The real typer/click parsing of `vrs bench serve ARGS` (nothing runs)."""
    ctx = serve_command().make_context("serve", args)
    return {k: getattr(v, "value", v) for k, v in ctx.params.items()}


def vrs_options() -> set[str]:
    return {name for p in serve_command().params for name in getattr(p, "opts", [])}


def test_every_flag_of_vllms_examples_works_or_is_refused_naming_the_vrs_way() -> None:
    options = vrs_options()
    taken, refused = set(), set()
    for argv in examples():
        for flag, value in flag_groups(argv):
            args = [flag] if value is None else [flag, value]
            try:
                params = parse(list(args))
            except typer.BadParameter as exc:
                message = exc.format_message()
                named = set(re.findall(r"--[a-z][a-z-]*", message)) & options
                assert named or "no equivalent" in message, f"{args}: {message}"
                assert flag in message or value in message, message
                refused.add(flag if flag not in SAME_SETTING else f"{flag} {value}")
                continue
            assert flag in SAME_SETTING, f"{args} parsed but no setting is checked"
            name, read = SAME_SETTING[flag]
            assert params[name] == read(value), (args, params[name])
            taken.add(flag)
    # The examples exercise both sides.
    assert {"--backend", "--model", "--save-result", "--result-dir", "--result-filename",
            "--dataset-name", "--max-concurrency", "--dataset-path", "--save-detailed",
            "--skip-chat-template", "--prefix-repetition-prefix-len"} <= taken
    assert {"--temperature", "--dataset-name hf", "--dataset-name custom_audio",
            "--backend openai-audio", "--num-prompts -1", "--dataset-name timed_trace",
            "--dataset-name random-mm", "--self-timed", "--timed-trace-chunk-hash-size",
            "--custom-ensure-client-side-data"} <= refused


def test_aliases_reach_the_same_settings() -> None:
    short = parse(["--dataset-name", "random", "--input-len", "7", "--output-len", "3",
                   "--num-warmups", "2", "--backend", "openai"])
    long = parse(["--dataset", "random", "--random-input-len", "7",
                  "--random-output-len", "3", "--warmup-requests", "2"])
    assert short == long
    assert parse(["--backend", "vllm"])["backend"] == "openai-completions"
    assert parse(["--backend", "openai-chat"])["backend"] == "openai-chat"


def test_sonnet_and_random_prefix_flags_are_vllms() -> None:
    # vLLM's defaults (sonnet: its flags from before 0.33, which dropped the dataset)
    defaults = parse([])
    assert (defaults["sonnet_input_len"], defaults["sonnet_output_len"],
            defaults["sonnet_prefix_len"], defaults["random_prefix_len"]) == (550, 150, 200, 0)
    params = parse(["--backend", "vllm", "--dataset-name", "sonnet", "--dataset-path",
                    "sonnet.txt", "--sonnet-input-len", "1000", "--sonnet-output-len", "200",
                    "--sonnet-prefix-len", "50", "--num-prompts", "20"])
    assert (params["dataset"], params["sonnet_input_len"], params["sonnet_output_len"],
            params["sonnet_prefix_len"]) == ("sonnet", 1000, 200, 50)
    params = parse(["--dataset-name", "random", "--random-prefix-len", "64",
                    "--random-input-len", "128"])
    assert (params["random_prefix_len"], params["random_input_len"]) == (64, 128)
    # vLLM's other random-* datasets' flags stay refused, naming what vrs has
    with pytest.raises(typer.BadParameter, match="--random-prefix-len"):
        parse(["--random-batch-size", "4"])


def test_result_flags_need_save_result() -> None:
    out = run_vrs("bench", "serve", "--result-dir", "somewhere", "--port", str(free_port()))
    assert out.returncode == 2 and "--save-result" in out.stderr, out.stderr
    out = run_vrs("bench", "serve", "--save-result", "--result-file", "x.json")
    assert out.returncode == 2 and "not both" in out.stderr, out.stderr


def test_peak_lines_in_vllms_place() -> None:
    lines = plain_result({"completed": 1, "failed": 0, "output_throughput": 10.0,
                          "max_output_tokens_per_s": 12.0, "max_concurrent_requests": 3,
                          "total_token_throughput": 20.0}).splitlines()
    labels = [line.split(":")[0] for line in lines if ":" in line]
    at = labels.index("Output token throughput (tok/s)")
    assert labels[at + 1:at + 4] == ["Peak output token throughput (tok/s)",
                                     "Peak concurrent requests",
                                     "Total token throughput (tok/s)"]
    assert "Peak concurrent requests:                3.00" in lines


@pytest.fixture(scope="module")
def vrs_serve_mock(demo_model: Path,  # noqa: F811
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`vrs serve MODEL --mock` (the typer CLI, vrs-rs behind it) on a loopback port."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("serve") / "serve.log", "wb")  # noqa: SIM115
    env = {**os.environ, "VRS_RUST_FRONTEND_PATH": str(rust_binary()),
           "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from cli.main import main; main()", "serve", str(demo_model),
         "--mock", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, Path(log.name))
        yield url, demo_model
    finally:
        terminate(proc)
        log.close()


def test_save_result_writes_vllms_file(vrs_serve_mock: tuple[str, Path],
                                       tmp_path: Path) -> None:
    url, model = vrs_serve_mock
    results = tmp_path / "results"
    out = run_vrs("bench", "serve", "--base-url", url, "--backend", "vllm",
                  "--dataset-name", "random", "--input-len", "16", "--output-len", "4",
                  "--ignore-eos", "--num-prompts", "8", "--max-concurrency", "2",
                  "--num-warmups", "1", "--save-result", "--result-dir", str(results))
    assert out.returncode == 0, out.stdout + out.stderr
    files = list(results.iterdir())
    assert len(files) == 1, files
    name = re.escape(f"openai-completions-infqps-concurrency2-{model.name}-")
    assert re.fullmatch(name + r"\d{8}-\d{6}\.json", files[0].name), files[0].name
    result = json.loads(files[0].read_text())
    assert result["completed"] == 8 and result["backend"] == "openai-completions"
    assert files[0].name.endswith(result["date"] + ".json")
    assert 1 <= result["max_concurrent_requests"] <= 2
    assert 1 <= result["max_output_tokens_per_s"] <= result["total_output_tokens"] == 32
    stdout = out.stdout.splitlines()
    assert any(line.startswith("Peak output token throughput (tok/s):") for line in stdout)
    assert any(re.match(r"Peak concurrent requests: +[12]\.00$", line) for line in stdout)
    # --result-filename replaces vLLM's name, inside --result-dir.
    out = run_vrs("bench", "serve", "--base-url", url, "--num-prompts", "2",
                  "--input-len", "8", "--output-len", "2", "--save-result",
                  "--result-dir", str(results), "--result-filename", "mine.json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads((results / "mine.json").read_text())["completed"] == 2
