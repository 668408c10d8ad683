"""The non-OpenAI endpoints in both request modes: /tokenize and /detokenize (vLLM's
shapes), /version, /load and /metrics (Prometheus text, checked after real traffic)."""

from __future__ import annotations

import re
import threading
from typing import Any

import httpx
import pytest

from tests.e2e.features import user
from tests.e2e.servers import MAX_MODEL_LEN, MODEL, Server, wait_until

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "system", "content": "Be brief."}, *user("你好 👋")]


def post(server: Server, path: str, body: Any) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=30)


def test_tokenize_prompt_and_chat(server: Server, tokenizer: Any) -> None:
    text = "Hello 世界 🌍"
    answer = post(server, "/tokenize", {"model": MODEL, "prompt": text}).json()
    expected = tokenizer.encode(text)
    assert answer == {"count": len(expected), "max_model_len": MAX_MODEL_LEN,
                      "tokens": expected, "token_strs": None}
    strs = post(server, "/tokenize", {"prompt": text, "add_special_tokens": False,
                                      "return_token_strs": True}).json()
    assert strs["tokens"] == tokenizer.encode(text, add_special_tokens=False)
    assert strs["token_strs"] == tokenizer.convert_ids_to_tokens(strs["tokens"])
    chat = post(server, "/tokenize", {"messages": MESSAGES}).json()
    assert chat["tokens"] == tokenizer.apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert chat["count"] == len(chat["tokens"])
    no_prompt = post(server, "/tokenize", {"messages": MESSAGES,
                                           "add_generation_prompt": False}).json()
    assert no_prompt["count"] < chat["count"]
    thinking = post(server, "/tokenize", {"messages": MESSAGES, "chat_template_kwargs": {
        "enable_thinking": True}}).json()
    assert tokenizer.decode(thinking["tokens"]).endswith("<think>")


def test_detokenize_round_trip(server: Server, tokenizer: Any) -> None:
    ids = tokenizer.encode("round ✓ trip")
    assert post(server, "/detokenize", {"tokens": ids}).json() == {
        "prompt": tokenizer.decode(ids)}
    assert post(server, "/detokenize", {"tokens": []}).json() == {"prompt": ""}


BAD = [
    ("/tokenize", {"prompt": "x", "colour": 1}, 400, "colour"),
    ("/tokenize", {"messages": MESSAGES, "prompt": "x"}, 400, "prompt"),
    ("/tokenize", {"prompt": 5}, 400, "prompt"),
    ("/tokenize", {}, 400, "prompt"),
    ("/tokenize", {"messages": []}, 400, "messages"),
    ("/tokenize", {"prompt": "x", "model": "gpt-9"}, 404, "model"),
    ("/tokenize", {"messages": MESSAGES, "tools": [{"type": "x"}]}, 400, "tools[0]"),
    ("/detokenize", {"tokens": [10**9]}, 400, "tokens"),
    ("/detokenize", {"tokens": [-1]}, 400, "tokens[0]"),
    ("/detokenize", {}, 400, "tokens"),
    ("/detokenize", {"tokens": [1], "model": "gpt-9"}, 404, "model"),
]


@pytest.mark.parametrize("path, body, status, param", BAD,
                         ids=[f"{p}-{param}-{s}" for p, _, s, param in BAD])
def test_tokenizer_routes_name_bad_fields(server: Server, path: str, body: Any, status: int,
                                          param: str) -> None:
    response = post(server, path, body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param, response.text


def test_version_and_load(server: Server) -> None:
    from engine.version import __version__

    assert httpx.get(f"{server.url}/version").json() == {"version": __version__}
    # The mock engine's READY reports no tensor-parallel ranks.
    engines = [{"engine_index": 0, "ranks": []}]
    assert httpx.get(f"{server.url}/load").json() == {"server_load": 0, "engines": engines}
    body = {"model": MODEL, "prompt": "tell a story", "max_tokens": 1900, "stream": True,
            "ignore_eos": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=60) as r:
        lines = r.iter_lines()  # kept: a dropped iterator closes the response
        next(lines)
        assert httpx.get(f"{server.url}/load").json() == {"server_load": 1, "engines": engines}
    assert wait_until(lambda: httpx.get(f"{server.url}/load").json()["server_load"] == 0, 10)


def metrics(server: Server) -> dict[str, float]:
    text = httpx.get(f"{server.url}/metrics").text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_metrics_count_the_traffic(server: Server) -> None:
    response = httpx.get(f"{server.url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    for kind, name in [("counter", "vrs:http_requests_total"),
                       ("histogram", "vrs:time_to_first_token_seconds"),
                       ("histogram", "vrs:inter_token_latency_seconds"),
                       ("histogram", "vrs:e2e_request_latency_seconds"),
                       ("histogram", "vrs:tokenize_latency_seconds"),
                       ("histogram", "vrs:detokenize_latency_seconds"),
                       ("gauge", "vrs:num_requests_running"),
                       ("gauge", "vrs:num_requests_waiting"),
                       ("gauge", "vrs:kv_cache_usage_perc"),
                       ("gauge", "vrs:prefix_cache_hit_rate"),
                       ("counter", "vrs:prompt_tokens_total"),
                       ("counter", "vrs:generation_tokens_total")]:
        assert f"# TYPE {name} {kind}\n" in response.text, name
    before = metrics(server)
    ok = 'vrs:http_requests_total{endpoint="/v1/completions",status="200"}'
    bad = 'vrs:http_requests_total{endpoint="/v1/completions",status="400"}'
    response = server.client().completions.create(model=MODEL, prompt="count me",
                                                  max_tokens=7)
    post(server, "/v1/completions", {"prompt": "x", "max_tokens": 0})
    httpx.get(f"{server.url}/no/such/route")
    after = metrics(server)
    assert after[ok] == before.get(ok, 0) + 1 and after[bad] == before.get(bad, 0) + 1
    assert after['vrs:http_requests_total{endpoint="other",status="404"}'] >= 1
    assert after["vrs:generation_tokens_total"] - before["vrs:generation_tokens_total"] == 7
    assert (after["vrs:prompt_tokens_total"] - before["vrs:prompt_tokens_total"]
            == response.usage.prompt_tokens)
    for name in ("time_to_first_token", "e2e_request_latency", "tokenize_latency"):
        key = f"vrs:{name}_seconds_count"
        assert after[key] == before[key] + 1, key
    # One observation per engine output after the first: 6 for 7 tokens, fewer when the
    # engine's output thread coalesced tokens into one message (a loaded machine).
    itl = (after["vrs:inter_token_latency_seconds_count"]
           - before["vrs:inter_token_latency_seconds_count"])
    assert 1 <= itl <= 6, itl
    # One detokenization per engine output: 7, fewer when coalesced (as for the ITL).
    detokenized = (after["vrs:detokenize_latency_seconds_count"]
                   - before["vrs:detokenize_latency_seconds_count"])
    assert 1 <= detokenized <= 7, detokenized
    buckets = [v for k, v in after.items()
               if re.fullmatch(r'vrs:e2e_request_latency_seconds_bucket\{le=".*"\}', k)]
    assert buckets == sorted(buckets), "buckets are cumulative"
    assert buckets[-1] == after["vrs:e2e_request_latency_seconds_count"]
    assert after['vrs:num_requests_running{engine="0"}'] == 0


def test_engine_gauges_follow_the_load(server: Server) -> None:
    body = {"model": MODEL, "prompt": "long", "max_tokens": 1500, "stream": True,
            "ignore_eos": True}
    done = threading.Event()

    def run() -> None:
        with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=60) as r:
            for _ in r.iter_lines():
                if done.is_set():
                    return

    reader = threading.Thread(target=run)
    reader.start()
    try:
        running = 'vrs:num_requests_running{engine="0"}'
        assert wait_until(lambda: metrics(server).get(running) == 1, 10)
        assert metrics(server)["vrs:requests_in_flight"] == 1
    finally:
        done.set()
        reader.join(30)
    assert wait_until(lambda: metrics(server).get(running) == 0, 10), "the abort reached it"
    assert metrics(server)["vrs:requests_in_flight"] == 0
