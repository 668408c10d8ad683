"""The bad-request table (tests/request_cases/bad_requests.json) against the Python
frontend in-process: every case gets its status, error type, param and message words, and
the server answers a good request after each. vrs-rs's router runs the same table
(rust/server/src/routes/tests/bad_requests.rs), and tests/e2e/test_errors.py runs it end to
end on both frontends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bad_requests import ROOT, TABLE, Case, assert_case
from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def table_server(demo_model: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonServer]:
    """A server with the table's settings, given explicitly (the shared ``python_server``
    has ``--max-batch-prompts 4``)."""
    settings = TABLE.settings
    config = json.loads((demo_model / "config.json").read_text())
    assert (settings.model, settings.vocab_size) == (MODEL, config["vocab_size"])
    template = json.loads((demo_model / "tokenizer_config.json").read_text())["chat_template"]
    assert (ROOT / settings.chat_template).read_text(encoding="utf-8") == template
    server = PythonServer(
        demo_model,
        tmp_path_factory.mktemp("bad-requests") / "server.log",
        max_batch_prompts=settings.max_batch_prompts,
        engine={"max_model_len": settings.max_model_len},
    )
    yield server
    assert server.stop() == 0, server.log()


@pytest.mark.parametrize("case", TABLE.cases, ids=[case.id for case in TABLE.cases])
def test_bad_request_then_the_server_still_answers(table_server: PythonServer,
                                                   case: Case) -> None:
    assert_case(table_server.url, case)
    ok = table_server.post("/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 2})
    assert ok.status_code == 200, ok.text
    assert ok.json()["usage"]["completion_tokens"] == 2
