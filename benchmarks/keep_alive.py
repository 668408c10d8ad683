"""Kept-alive connections after 404s: do error answers drop connections?

For each frontend (``--frontends``: rust, python) starts ``vrs serve --mock`` (or uses
``--url``, a server already running) and sends ``--requests`` requests (default 10,000)
alternating a 404 (a POST of a chat body, ``--body-bytes`` of JSON, to an unknown route)
and a 200 (a completions request for one token), over ``--connections`` kept-alive
connections at once (each an httpx client of one pooled connection: the openai SDK's
client). Counts per frontend:

* ``dropped``: requests that failed because the server closed their kept-alive connection
  without answering and without having said ``Connection: close`` (httpx: "Server
  disconnected without sending a response"); each is sent again on a new connection, so
  every request gets its answer;
* ``closed``: answers that said ``Connection: close`` (the next request then opens a new
  connection: not a drop);
* ``wrong``: answers with another status than the one expected (404 or 200).

The must-show is ``dropped`` 0 of 10,000 for both frontends (issue #39: vrs-rs dropped
0-6 % of the requests after a 404 to a POST with a body, its fallback never reading the
body). Writes ``benchmarks/results/keep_alive.{json,md}``.

    python benchmarks/keep_alive.py                                  # both, 10,000 each
    python benchmarks/keep_alive.py --frontends rust --requests 2000
    python benchmarks/keep_alive.py --url http://127.0.0.1:8000 --requests 1000

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build); nothing
is downloaded (the built-in demo model's tokenizer, random weights never loaded).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_overhead import machine  # noqa: E402
from servers import RESULTS, Server  # noqa: E402

DROPS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError)


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = self.dropped = self.closed = self.wrong = 0
        self.errors: list[str] = []

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)


def worker(url: str, count: int, body: dict[str, Any], tally: Tally) -> None:
    """``count`` requests on one kept-alive connection, alternating 404 and 200."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    good = {"prompt": "hi", "max_tokens": 1}
    with httpx.Client(base_url=url, limits=limits, timeout=60) as client:
        for i in range(count):
            path, payload, expected = (("/v1/no-such-route", body, 404) if i % 2 == 0
                                       else ("/v1/completions", good, 200))
            for attempt in range(3):
                try:
                    answer = client.post(path, json=payload)
                    break
                except DROPS as exc:
                    tally.add(dropped=1)
                    with tally.lock:
                        if len(tally.errors) < 5:
                            tally.errors.append(f"{type(exc).__name__}: {exc}")
                    if attempt == 2:
                        raise
            tally.add(sent=1, closed=int(answer.headers.get("connection", "") == "close"),
                      wrong=int(answer.status_code != expected))


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": "x" * max(args.body_bytes - 60, 1)}],
            "max_tokens": 1}
    tally = Tally()
    per, rest = divmod(args.requests, args.connections)
    threads = [threading.Thread(target=worker, args=(url, per + (c < rest), body, tally))
               for c in range(args.connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    return {"requests": tally.sent, "dropped": tally.dropped, "closed": tally.closed,
            "wrong": tally.wrong, "seconds": round(seconds, 1),
            "first_errors": tally.errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frontends", nargs="+", default=["rust", "python"],
                        choices=["rust", "python"])
    parser.add_argument("--url", help="a server already running (then --frontends names it)")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--body-bytes", type=int, default=2048,
                        help="size of the JSON body posted to the unknown route")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vrs-keep-alive-") as tmp:
        for frontend in args.frontends:
            if args.url:
                row = run(args.url, args)
            else:
                server = Server(("serve", "--mock", "--frontend", frontend,
                                 "--log-level", "warning"), Path(tmp) / f"{frontend}.log",
                                f"{frontend} frontend")
                try:
                    row = run(server.url, args)
                finally:
                    server.stop()
            rows.append({"frontend": frontend, **row})
            print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine(), "connections": args.connections,
              "body_bytes": args.body_bytes, "rows": rows}
    (RESULTS / "keep_alive.json").write_text(json.dumps(result, indent=2))
    lines = ["| frontend | requests | dropped | closed | wrong | seconds |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['frontend']} | {r['requests']} | {r['dropped']} | {r['closed']} | "
              f"{r['wrong']} | {r['seconds']} |" for r in rows]
    (RESULTS / "keep_alive.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
