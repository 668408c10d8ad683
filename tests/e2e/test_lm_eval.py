"""lm-evaluation-harness, unchanged, against every frontend on the real engine.

`lm_eval --model local-completions` scores a multiple-choice task (log-likelihoods: batched
token-id prompts with ``echo``, ``logprobs: 1`` and ``max_tokens: 1``) and runs a
``generate_until`` task, with concurrent requests. The tasks and their data are written
here; nothing is downloaded. Each log-likelihood the harness records must equal the one
computed directly with transformers on the same model (fp32) within 1e-3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e

QUESTIONS = [
    ("What colour is the sky on a clear day?", ["blue", "green", "red"], 0),
    ("How many legs does a spider have?", ["six", "eight", "ten", "four"], 1),
    ("Which is a prime number?", ["nine", "fifteen", "seven"], 2),
    ("What is frozen water called?", ["steam", "ice"], 1),
    ("Where does the sun rise?", ["in the east", "in the west", "北方"], 0),
    ("Which animal says moo?", ["a cow", "a cat", "a dog", "🐦 a bird"], 0),
]
MC_TASK = """\
task: vrs_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
"""
GEN_TASK = """\
task: vrs_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Q: {{{{question}}}}\\nA:"
doc_to_target: "{{{{choices[answer]}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
"""


def write_tasks(directory: Path) -> Path:
    tasks = directory / "tasks"
    tasks.mkdir()
    data = directory / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n"
                            for q, c, a in QUESTIONS), encoding="utf-8")
    (tasks / "vrs_mc.yaml").write_text(MC_TASK.format(data=data), encoding="utf-8")
    (tasks / "vrs_gen.yaml").write_text(GEN_TASK.format(data=data), encoding="utf-8")
    return tasks


def run_harness(server: Server, demo_model: Path, directory: Path) -> Path:
    out = directory / "results"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(directory / "datasets-cache"),
           "TOKENIZERS_PARALLELISM": "false"}
    model_args = ",".join([f"model={MODEL}", f"base_url={server.url}/v1/completions",
                           "tokenizer_backend=huggingface", f"tokenizer={demo_model}",
                           "num_concurrent=3", "max_retries=1",
                           "tokenized_requests=True"])
    command = [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions",
               "--model_args", model_args, "--include_path", str(write_tasks(directory)),
               "--tasks", "vrs_mc,vrs_gen", "--batch_size", "4", "--log_samples",
               "--output_path", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"lm_eval failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return out


def samples(out: Path, task: str) -> list[dict[str, Any]]:
    files = sorted(out.rglob(f"samples_{task}_*.jsonl"))
    assert len(files) == 1, f"expected one samples file for {task}, found {files}"
    return [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines()]


def loglikelihood(reference: Any, tokenizer: Any, context: str, continuation: str) -> float:
    """What the harness asks for, computed directly: its own context/continuation split."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = tokenizer(context + continuation, add_special_tokens=False).input_ids
    context_ids = tokenizer(context, add_special_tokens=False).input_ids
    target = whole[len(context_ids):]
    with torch.inference_mode():
        logits = reference(torch.tensor([whole])).logits[0].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    start = len(context_ids)
    return sum(logprobs[start + i - 1, token].item() for i, token in enumerate(target))


def test_lm_eval_multiple_choice_and_generation(real_server: Server, demo_model: Path,
                                                tokenizer: Any, reference: Any,
                                                tmp_path: Path) -> None:
    out = run_harness(real_server, demo_model, tmp_path)
    results = json.loads(next(out.rglob("results_*.json")).read_text(encoding="utf-8"))
    assert set(results["results"]) == {"vrs_mc", "vrs_gen"}

    scored = samples(out, "vrs_mc")
    assert len(scored) == len(QUESTIONS)
    compared = 0
    for sample in scored:
        arguments = [sample["arguments"][f"gen_args_{i}"] for i in range(len(sample["resps"]))]
        for argument, response in zip(arguments, sample["resps"], strict=True):
            context, continuation = argument["arg_0"], argument["arg_1"]
            got = float(response[0][0])
            expected = loglikelihood(reference, tokenizer, context, continuation)
            assert abs(got - expected) < 1e-3, (context, continuation, got, expected)
            compared += 1
    assert compared == sum(len(c) for _, c, _ in QUESTIONS)

    generated = samples(out, "vrs_gen")
    assert len(generated) == len(QUESTIONS)
    for sample in generated:
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        ids = tokenizer(prompt, add_special_tokens=False).input_ids
        with torch.inference_mode():
            out_ids = reference.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)
        expected = tokenizer.decode(out_ids[0, len(ids):], skip_special_tokens=True)
        assert sample["resps"][0][0] == expected.split("\n")[0], (prompt, sample["resps"])
