"""The shared Python frontend of this directory's HTTP tests (started on first use,
stopped at the end), over server_kit.py's ``PythonServer``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.server_kit import PythonServer


@pytest.fixture(scope="session")
def demo_model() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="session")
def python_server(
    demo_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PythonServer]:
    """The shared server: ``--max-batch-prompts 4``, and a scripted reply for prompts that
    say "echo me"."""
    server = PythonServer(
        demo_model,
        tmp_path_factory.mktemp("python-server") / "server.log",
        max_batch_prompts=4,
        engine={"mock_replies": [{"when": "echo me", "reply": "sure"}]},
    )
    yield server
    assert server.stop() == 0, server.log()
