"""Fixtures of the whole suite: no test may leave files behind in the temp dir."""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

# The prefix of every temp entry vrs makes: cli/supervisor.py ("vrs-frontend-"),
# engine/process/launcher.py ("vrs-hs-"), server/lifecycle/ ("vrs-frontend-") and
# vrs-rs (tempfile::Builder::new().prefix("vrs-")).
VRS_TEMP_PREFIX = "vrs-"

# Engines started by tests (in-process or `vrs serve` children, which inherit this) run
# eager: compiling the decoder costs seconds per start. tests/engine/test_compile.py
# turns it on where it tests it.
os.environ.setdefault("VRS_COMPILE", "off")


# The suite's own temp dir. Every process the suite starts inherits TMPDIR (Python's
# tempfile and Rust's std::env::temp_dir both read it), so the leak check below sees what
# the suite itself made, never another process's vrs-* entries in the machine's /tmp.
SUITE_TEMP_DIR = tempfile.mkdtemp(prefix="pytest-vrs-suite-")
os.environ["TMPDIR"] = SUITE_TEMP_DIR
tempfile.tempdir = None  # tempfile caches its choice: look again
atexit.register(functools.partial(shutil.rmtree, SUITE_TEMP_DIR, ignore_errors=True))


def vrs_temp_entries() -> set[str]:
    """Names of the entries of the temp dir that vrs made."""
    return {name for name in os.listdir(tempfile.gettempdir())
            if name.startswith(VRS_TEMP_PREFIX)}


@pytest.fixture(scope="session", autouse=True)
def no_vrs_temp_entries_left_behind() -> Iterator[None]:
    """Fails the session at teardown if a ``vrs-*`` entry appeared in the temp dir and
    is still there (a process that could not clean up, a test that did not)."""
    before = vrs_temp_entries()
    yield
    left = sorted(vrs_temp_entries() - before)
    assert not left, (f"left behind in {tempfile.gettempdir()}: {', '.join(left)} "
                      "(a test, or a process it started, did not clean up)")


# The test tiers (pyproject.toml's markers; docs/internals.md, "Testing: tiers").
TIERS = ("unit", "server", "e2e", "engine")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test without exactly one tier marker: `--fast` selects by them."""
    for item in items:
        tiers = {mark.name for mark in item.iter_markers() if mark.name in TIERS}
        if len(tiers) != 1:
            raise pytest.UsageError(
                f"{item.nodeid}: tiers {sorted(tiers) or 'none'}; give its module exactly one "
                f"of {', '.join(TIERS)} (pytestmark = pytest.mark.<tier>)"
            )
