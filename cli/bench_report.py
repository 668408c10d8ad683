"""The files of a `vrs bench` plot: each figure as a PNG, and report.html holding the same
figures as data URLs and a table of the numbers, so the report is one file that opens
offline and loads nothing (no script, no stylesheet, no image from elsewhere)."""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime
from pathlib import Path

from matplotlib.figure import Figure

DPI = 110
STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
img{max-width:100%;border:1px solid #ddd}
table{border-collapse:collapse;font-size:0.9em}
td,th{border:1px solid #ccc;padding:0.25em 0.6em;text-align:right}
th{background:#f3f3f3}td:first-child{text-align:left}"""


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def write_report(output: Path, title: str, figures: list[tuple[str, Figure]],
                 header: list[str], rows: list[list[str]]) -> list[Path]:
    """Writes OUTPUT/NAME.png per figure and OUTPUT/report.html; returns their paths."""
    output.mkdir(parents=True, exist_ok=True)
    written = []
    images = []
    for name, figure in figures:
        data = _png(figure)
        path = output / f"{name}.png"
        path.write_bytes(data)
        written.append(path)
        encoded = base64.b64encode(data).decode("ascii")
        images.append(f'<p><img alt="{html.escape(name)}" '
                      f'src="data:image/png;base64,{encoded}"></p>')
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    when = datetime.now().strftime("%Y-%m-%d %H:%M")
    page = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p>{when}</p>{''.join(images)}"
            f"<table><tr>{head}</tr>{body}</table></body></html>\n")
    report = output / "report.html"
    report.write_text(page, encoding="utf-8")
    written.append(report)
    return written
