"""Edge cost: what TLS and OTLP traces cost a frontend, against the same server plain.

For each frontend (``--frontends``: rust, python) starts one ``vrs serve --mock`` per
configuration (``--configs``):

* ``plain``: HTTP, no traces;
* ``tls``: HTTPS (``--ssl-keyfile``/``--ssl-certfile``; a throwaway CA and a P-256 server
  certificate for 127.0.0.1 made at start), the client checking it (``--ca-cert``);
* ``traces``: ``--otlp-traces-endpoint`` pointing at a local OTLP/HTTP receiver run by this
  script (one per server; it answers every export 200 and counts the spans);
* ``both``: TLS and traces.

Then drives them with ``vrs bench serve`` (the vrs-rs load generator), chat streamed, the
same random prompts (input 512 / output 128 tokens; the mock engine never samples EOS, so
every request makes exactly that many tokens, checked from the usage), concurrency 64. The
configurations take turns (round r starts with the r-th: A B C D, B C D A, ...) for
``--rounds`` rounds (at least 3 for a number worth quoting). Reports per frontend and
configuration the median over rounds of req/s, output tok/s, TTFT p50/p99, TPOT p50 and the
frontend's CPU per request (its processes but the engine), each over plain's, and the spans
each traces receiver got (a request is one span; the exporters batch in the background and
may drop spans under load rather than slow a request), as a markdown table and JSON
(``benchmarks/results/edge_cost.{json,md}``).

    python benchmarks/edge_cost.py                               # both frontends, 3 rounds
    python benchmarks/edge_cost.py --frontends rust --rounds 5
    python benchmarks/edge_cost.py --configs plain --rounds 1 --prompts 128   # smoke run

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build) and, for
``tls``/``both``, the ``cryptography`` package; nothing is downloaded (the built-in demo
model's tokenizer, random weights never loaded).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import ipaddress
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_overhead import machine  # noqa: E402
from servers import REPO_ROOT, RESULTS, Server, bench_serve, vrs  # noqa: E402

CONFIGS = ("plain", "tls", "traces", "both")
FRONTENDS = ("rust", "python")
METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
           "median_tpot_ms", "frontend_cpu_ms_per_request")
ROUTE = "/v1/chat/completions"
# The flags each configuration needs, and the command whose --help must list them.
NEEDS = {"tls": [("serve", "--ssl-certfile"), ("bench serve", "--ca-cert")],
         "traces": [("serve", "--otlp-traces-endpoint")]}
NEEDS["both"] = NEEDS["tls"] + NEEDS["traces"]


# ------------------------------------------------------------------ OTLP receiver


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, bytes | None]]:
    """(field number, bytes of a length-delimited value, else None) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        value = None
        if wire == 0:
            _, i = _varint(buf, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"protobuf wire type {wire} is not one OTLP uses")
        yield key >> 3, value


def count_spans(body: bytes) -> int:
    """The spans of an ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) →
    spans (2)."""
    return sum(1 for number, resource in _fields(body) if number == 1 and resource
               for n, scope in _fields(resource) if n == 2 and scope
               for m, span in _fields(scope) if m == 2 and span is not None)


class OtlpReceiver:
    """A local OTLP/HTTP (protobuf) trace collector on a free loopback port: every POST
    (any path) is answered 200 with an empty ExportTraceServiceResponse; ``spans`` counts
    what arrived, ``bad`` the bodies it could not read."""

    def __init__(self) -> None:
        self.spans = self.exports = self.bad = 0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's hook name
                receiver.record(self._body(), self.headers.get("content-encoding", ""))
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def _body(self) -> bytes:
                if "chunked" not in self.headers.get("transfer-encoding", ""):
                    return self.rfile.read(int(self.headers.get("content-length") or 0))
                parts = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(parts)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1/traces"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def record(self, body: bytes, encoding: str) -> None:
        try:
            spans = count_spans(gzip.decompress(body) if "gzip" in encoding else body)
        except (ValueError, IndexError, OSError):
            with self._lock:
                self.bad += 1
            return
        with self._lock:
            self.spans += spans
            self.exports += 1

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# ------------------------------------------------------------------ certificates


def make_certs(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for 127.0.0.1 and localhost signed by it:
    the (CA, certificate, key) PEM files."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        sys.exit("the tls and both configurations need the `cryptography` package "
                 "(pip install cryptography), or leave them out of --configs")
    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def builder(subject: str, issuer: str, public: Any) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name(issuer))
                .public_key(public).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=2)))

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (builder("vrs edge_cost CA", "vrs edge_cost CA", ca_key.public_key())
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, key_cert_sign=True, crl_sign=True,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (builder("localhost", "vrs edge_cost CA", key.public_key())
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = (directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


# ------------------------------------------------------------------ runs


class Target:
    """One configuration's server (and its receiver); ``sent`` counts its requests."""

    def __init__(self, frontend: str, config: str, work: Path,
                 certs: tuple[Path, Path, Path] | None) -> None:
        self.config = config
        self.receiver = OtlpReceiver() if config in ("traces", "both") else None
        self.ca = certs[0] if certs and config in ("tls", "both") else None
        args = ["serve", "--mock", "--frontend", frontend, "--log-level", "warning"]
        if self.ca is not None and certs is not None:
            args += ["--ssl-certfile", str(certs[1]), "--ssl-keyfile", str(certs[2])]
        if self.receiver is not None:
            args += ["--otlp-traces-endpoint", self.receiver.url]
        self.server = Server(args, work / f"{frontend}-{config}.log", f"{frontend} {config}",
                             ca_cert=self.ca)
        self.sent = 0

    def close(self) -> None:
        self.server.stop()
        if self.receiver is not None:
            self.receiver.close()


def bench(target: Target, frontend: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One `vrs bench serve` run of ``target`` (checked as ``servers.bench_serve`` checks)."""
    extra = ["--ca-cert", str(target.ca)] if target.ca is not None else []
    result = bench_serve(target.server, "openai-chat", ROUTE, f"{frontend}-{target.config}",
                         args, out, extra)
    target.sent += result["frontend_requests"]
    return result


def spans_of(targets: list[Target], wait_s: float = 15.0) -> dict[str, dict[str, int]]:
    """Each traces receiver's count once the exporters have flushed (up to ``wait_s``)."""
    traced = [t for t in targets if t.receiver is not None]
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(t.receiver.spans < t.sent for t in traced
                                              if t.receiver is not None):
        time.sleep(0.5)
    return {t.config: {"spans": t.receiver.spans, "requests": t.sent,
                       "exports": t.receiver.exports, "unreadable": t.receiver.bad}
            for t in traced if t.receiver is not None}


def run_frontend(frontend: str, configs: list[str], args: argparse.Namespace, work: Path,
                 certs: tuple[Path, Path, Path] | None) -> tuple[list[dict[str, Any]], Any]:
    targets: list[Target] = []
    runs = []
    try:
        for config in configs:
            targets.append(Target(frontend, config, work, certs))
        for rnd in range(args.rounds):
            turn = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
            for target in turn:
                out = work / f"{frontend}-{target.config}-{rnd}.json"
                result = bench(target, frontend, args, out)
                runs.append({"frontend": frontend, "config": target.config, "round": rnd,
                             **{k: result[k] for k in (*METRICS, "failed", "completed",
                                                       "duration", "total_output_tokens")}})
                print(f"{frontend:<6} round {rnd + 1}/{args.rounds} {target.config:<6} "
                      f"{result['request_throughput']:8.1f} req/s  failed {result['failed']}",
                      file=sys.stderr, flush=True)
        spans = spans_of(targets)
    finally:
        for target in targets:
            target.close()
    return runs, spans


def summarize(runs: list[dict[str, Any]], spans: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for frontend in FRONTENDS:
        mine = [r for r in runs if r["frontend"] == frontend]
        for config in CONFIGS:
            cell = [r for r in mine if r["config"] == config]
            if cell:
                rows.append({"frontend": frontend, "config": config,
                             **{m: statistics.median(r[m] for r in cell) for m in METRICS},
                             "failed": sum(r["failed"] for r in cell),
                             "traces": spans.get(frontend, {}).get(config)})
        plain = next((r for r in rows if r["frontend"] == frontend
                      and r["config"] == "plain"), None)
        for row in rows:
            if row["frontend"] == frontend:
                row["throughput_vs_plain"] = (row["request_throughput"]
                                              / plain["request_throughput"] if plain else None)
                row["cpu_vs_plain"] = (row["frontend_cpu_ms_per_request"]
                                       / plain["frontend_cpu_ms_per_request"] if plain else None)
    return rows


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"mock engine, chat streamed: input {args.input_len} / output {args.output_len} "
             f"tokens, concurrency {args.concurrency}, {args.prompts} requests a run, median "
             f"of {args.rounds} rounds", "",
             "| frontend | config | req/s | / plain | frontend CPU ms/request | / plain "
             "| output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | spans / requests "
             "| failed |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        vs = "" if r["throughput_vs_plain"] is None else f"{r['throughput_vs_plain']:.3f}"
        cpu_vs = "" if r["cpu_vs_plain"] is None else f"{r['cpu_vs_plain']:.3f}"
        traces = r["traces"]
        spans = "" if traces is None else f"{traces['spans']} / {traces['requests']}"
        lines.append(f"| {r['frontend']} | {r['config']} | {r['request_throughput']:.1f} | {vs} "
                     f"| {r['frontend_cpu_ms_per_request']:.3f} | {cpu_vs} "
                     f"| {r['output_throughput']:.0f} | {r['median_ttft_ms']:.2f} "
                     f"| {r['p99_ttft_ms']:.2f} | {r['median_tpot_ms']:.3f} | {spans} "
                     f"| {r['failed']} |")
    return "\n".join(lines)


def check_flags(configs: list[str]) -> None:
    """Every flag the chosen configurations need is in this checkout's `vrs`."""
    helps: dict[str, str] = {}
    missing = []
    for config in configs:
        for command, flag in NEEDS.get(config, []):
            if command not in helps:
                argv = vrs(*command.split(), "--help")
                helps[command] = subprocess.run(
                    argv, cwd=REPO_ROOT, capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "400"}).stdout
            if flag not in helps[command]:
                missing.append(f"{config} needs `vrs {command} {flag}`")
    if missing:
        sys.exit("this checkout's vrs lacks a flag: " + "; ".join(sorted(set(missing)))
                 + " (leave those configurations out of --configs)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frontends", default="rust,python",
                        help="comma-separated, from rust, python")
    parser.add_argument("--configs", default=",".join(CONFIGS),
                        help=f"comma-separated, from {', '.join(CONFIGS)}")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds, the configurations taking turns (3 or more to quote)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=512, help="measured requests a run")
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON results file (default benchmarks/results/edge_cost.json)")
    args = parser.parse_args()
    frontends = [f.strip() for f in args.frontends.split(",") if f.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    if not frontends or set(frontends) - set(FRONTENDS):
        parser.error(f"--frontends: choose from {', '.join(FRONTENDS)}")
    if not configs or set(configs) - set(CONFIGS) or len(set(configs)) != len(configs):
        parser.error(f"--configs: distinct names from {', '.join(CONFIGS)}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.rounds < 3:
        print(f"{args.rounds} round(s): a smoke run, not a number to quote (3 or more)",
              file=sys.stderr)
    check_flags(configs)
    output = args.output or RESULTS / "edge_cost.json"
    work = Path(tempfile.mkdtemp(prefix="vrs-edge-cost-"))
    certs = make_certs(work) if {"tls", "both"} & set(configs) else None
    runs: list[dict[str, Any]] = []
    spans: dict[str, Any] = {}
    for frontend in frontends:
        frontend_runs, spans[frontend] = run_frontend(frontend, configs, args, work, certs)
        runs += frontend_runs
    rows = summarize(runs, spans)
    table = markdown(rows, args)
    command = " ".join(["python", "benchmarks/edge_cost.py", *sys.argv[1:]])
    report = {"machine": machine(), "command": command,
              "settings": vars(args) | {"output": str(output)}, "summary": rows, "runs": runs}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    output.with_suffix(".md").write_text(table + "\n")
    print(table)
    status = 0
    for frontend, received in spans.items():
        for config, got in received.items():
            if got["spans"] == 0:
                print(f"\n{frontend} {config}: the receiver got no spans: traces were not "
                      "exported, so this row measures nothing", file=sys.stderr)
                status = 1
            elif got["spans"] < got["requests"]:
                print(f"\n{frontend} {config}: {got['spans']} spans for {got['requests']} "
                      "requests (the exporter dropped some under load)", file=sys.stderr)
    failed = sum(r["failed"] for r in runs)
    if failed:
        print(f"\n{failed} requests failed", file=sys.stderr)
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
