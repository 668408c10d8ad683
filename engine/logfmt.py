"""The one log line layout of vrs, in both languages:
``2026-12-01 20:15:07.123 INFO  [component] message`` (UTC, milliseconds, the level
padded to five: TRACE DEBUG INFO WARN ERROR). rust/cli/src/logfmt.rs writes the same for
vrs-rs; the engine (engine/__main__.py) and the Python server (server/lifecycle/) use
``setup_logging`` here.
"""

from __future__ import annotations

import logging
import re
import sys
import time

DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
# Python's level names spelled as the Rust side's.
LEVELS = {"WARNING": "WARN", "CRITICAL": "ERROR"}
# What every vrs log line starts with (tests match both languages' stderr with it).
LINE = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} "
                  r"(TRACE|DEBUG|INFO |WARN |ERROR) \[[^\]]+\] ")


class Layout(logging.Formatter):
    """The layout; the component is fixed (``engine 0``) or, when None, the logger name."""

    converter = staticmethod(time.gmtime)

    def __init__(self, component: str | None = None) -> None:
        where = "%(name)s" if component is None else component.replace("%", "%%")
        super().__init__(f"%(asctime)s.%(msecs)03d %(levelname)-5s [{where}] %(message)s",
                         DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        if record.levelname in LEVELS:
            record = logging.makeLogRecord({**record.__dict__,
                                            "levelname": LEVELS[record.levelname]})
        return super().format(record)


def setup_logging(level: str | int, component: str | None = None) -> None:
    """Log to stderr at ``level`` in the layout (once per process, as basicConfig)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Layout(component))
    logging.basicConfig(level=level, handlers=[handler])
