"""Good sampling values reach the engine as the wire's fields: ``/v1/completions/render``
of the render service (``vrs render --frontend python``) shows them; a process of its own
(test_sampling_fields.py has the 400s of bad values, in-process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import tokenizers

from tests.processes import terminate, wait_healthy
from tests.server.server_kit import ROOT, free_port

pytestmark = pytest.mark.e2e


def test_the_render_route_shows_the_wire_fields(demo_model: Path, tmp_path: Path) -> None:
    """The serving path's prompt builder, through ``vrs render --frontend python``."""
    backend = tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))
    port = free_port()
    args = {
        "model": str(demo_model),
        "served_model_name": "demo",
        "host": "127.0.0.1",
        "port": port,
    }
    code = ("import sys; from server.lifecycle.render import serve_render; "
            f"sys.exit(serve_render({args!r}))")
    log = open(tmp_path / "render.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(proc, url, tmp_path / "render.log")
        body = {
            "prompt": [[4, 8], [5, 6]],
            "max_tokens": 0,
            "echo": True,
            "logprobs": 2,
            "prompt_logprobs": 3,
            "logit_bias": {"9": 1, "7": -2},
            "allowed_token_ids": [7, 9],
            "bad_words": ["hi"],
        }
        rendered = httpx.post(f"{url}/v1/completions/render", json=body, timeout=30).json()
        assert [r["prompt_token_ids"] for r in rendered] == [[4, 8], [5, 6]]
        sampling = rendered[1]["sampling_params"]
        assert sampling["max_tokens"] == 1  # the prompt is prefilled, the token dropped
        assert sampling["prompt_logprobs"] == 3 and sampling["logprobs"] == 2
        assert sampling["logit_bias"] == [[7, -2.0], [9, 1.0]]
        assert sampling["allowed_token_ids"] == [7, 9]
        hi = backend.encode("hi", add_special_tokens=False).ids
        spaced = backend.encode(" hi", add_special_tokens=False).ids
        assert sampling["bad_words_token_ids"] == [hi, spaced]
        one = httpx.post(f"{url}/v1/completions/render", json={"prompt": "abc"}, timeout=30).json()
        assert json.dumps(one).startswith('{"request_id"'), "one prompt: one object"
    finally:
        terminate(proc)
        log.close()
