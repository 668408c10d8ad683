"""GrammarCompiler: structured-output specs to xgrammar compiled grammars, off the step loop.

* The tokenizer info (xgrammar's view of the vocabulary) is built once per engine, from the
  tokenizer directory the frontend tokenizes with, by the first compile job (an engine
  that never sees a constrained request never pays for it).
* Compiles run on a small thread pool (xgrammar releases the GIL while it compiles), so a
  slow schema never stalls other requests' steps. A job not done within ``timeout_s``
  fails with a GrammarError; the pool thread finishes the compile in the background and
  its result is still cached. The clock starts at submission, or once the tokenizer info
  is built if that came later (the one-time build is not the request's fault).
* xgrammar (and through it torch and transformers) is imported by the caller's thread on
  the first submit, never by two threads at once (transformers' lazy imports are not
  thread-safe); the real engine imports it at start-up (``load_xgrammar``).
* A bounded LRU cache of compiled grammars is keyed by the spec's wire bytes; concurrent
  requests with the same spec share one compile.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from engine import protocol as p
from engine.grammar.bitmask import Grammar, control_ban
from engine.grammar.errors import GrammarError
from engine.grammar.schema import check_schema

logger = logging.getLogger("vrs.engine")

DEFAULT_CACHE_SIZE = 256
COMPILE_THREADS = 2
# xgrammar prefixes its messages with "[hh:mm:ss] /path/file.cc:123: ".
_XGRAMMAR_PREFIX = re.compile(r"^\[[0-9:]+\] \S+:\d+: ")


def load_xgrammar() -> Any:
    """Import xgrammar and what it needs (once; call it from one thread)."""
    import transformers  # noqa: F401  (before xgrammar, which imports from it)
    import xgrammar

    return xgrammar


class GrammarJob:
    """One request's wait for its compiled grammar."""

    __slots__ = ("future", "submitted", "timeout_s", "compiler")

    def __init__(self, future: Future[Any], compiler: GrammarCompiler) -> None:
        self.future = future
        self.compiler = compiler
        self.timeout_s = compiler.timeout_s
        self.submitted = time.monotonic()

    def result(self) -> Any | None:
        """The compiled grammar, None while it compiles; raises GrammarError."""
        if self.future.done():
            return self.future.result()  # GrammarError propagates
        ready_at = self.compiler.info_ready_at
        if ready_at is None:
            return None  # the tokenizer info is being built
        if time.monotonic() >= max(self.submitted, ready_at) + self.timeout_s:
            raise GrammarError(
                f"the structured-output grammar did not compile within "
                f"{self.timeout_s:g} s (--structured-outputs-compile-timeout); "
                "simplify the schema or raise the timeout"
            )
        return None


class GrammarCompiler:
    def __init__(
        self,
        tokenizer_dir: Path,
        vocab_size: int,
        stop_token_ids: list[int],
        timeout_s: float,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.tokenizer_dir = tokenizer_dir
        self.vocab_size = vocab_size
        self.stop_token_ids = list(stop_token_ids)
        self.timeout_s = timeout_s
        self.cache_size = cache_size
        self._pool = ThreadPoolExecutor(
            COMPILE_THREADS, thread_name_prefix="vrs-grammar", initializer=_lower_priority
        )
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, Any] = OrderedDict()  # guarded by _lock
        self._inflight: dict[bytes, Future[Any]] = {}  # guarded by _lock
        self._xgr_compiler: Any = None  # built by the first job, under _build_lock
        self._build_lock = threading.Lock()
        self.tokenizer_info: Any = None
        self.control_ban: Any = None  # JSON's banned tokens (see engine/grammar/bitmask.py)
        self.info_ready_at: float | None = None  # monotonic time the tokenizer info was built

    # ------------------------------------------------------------------ API

    def submit(self, spec: p.StructuredOutputs) -> GrammarJob:
        """Start (or join, or find cached) the compile of ``spec``."""
        load_xgrammar()
        key = msgspec.msgpack.encode(spec)
        with self._lock:
            compiled = self._cache.get(key)
            if compiled is not None:
                self._cache.move_to_end(key)
                done: Future[Any] = Future()
                done.set_result(compiled)
                return GrammarJob(done, self)
            future = self._inflight.get(key)
            if future is None:
                future = self._pool.submit(self._compile, spec)
                self._inflight[key] = future
                future.add_done_callback(functools.partial(self._store, key))
        return GrammarJob(future, self)

    def cached(self, spec: p.StructuredOutputs) -> bool:
        with self._lock:
            return msgspec.msgpack.encode(spec) in self._cache

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ internals

    def _store(self, key: bytes, future: Future[Any]) -> None:
        with self._lock:
            self._inflight.pop(key, None)
            if future.cancelled() or future.exception() is not None:
                return
            self._cache[key] = future.result()
            self._cache.move_to_end(key)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _compiler(self) -> Any:
        with self._build_lock:
            if self._xgr_compiler is None:
                self._xgr_compiler = self._build()
            return self._xgr_compiler

    def _build(self) -> Any:
        from transformers import AutoTokenizer

        xgr = load_xgrammar()
        start = time.perf_counter()
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(self.tokenizer_dir))
        except Exception as exc:
            raise GrammarError(
                f"structured outputs need the model's tokenizer, and "
                f"{self.tokenizer_dir} has none that loads: {exc}"
            ) from None
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=self.vocab_size, stop_token_ids=self.stop_token_ids
        )
        self.tokenizer_info = info
        self.control_ban = control_ban(info.decoded_vocab, self.vocab_size)
        self.info_ready_at = time.monotonic()
        logger.info(
            "structured outputs: tokenizer info built in %.2fs (%s vocabulary)",
            time.perf_counter() - start,
            info.vocab_type.name.lower(),
        )
        # The cache here is ours (bounded by entries, keyed by the spec); xgrammar's is off.
        return xgr.GrammarCompiler(info, max_threads=COMPILE_THREADS, cache_enabled=False)

    def _compile(self, spec: p.StructuredOutputs) -> Any:
        compiler = self._compiler()
        start = time.perf_counter()
        try:
            compiled = Grammar(
                _compile_spec(compiler, spec), self.control_ban if _is_json(spec) else None
            )
        except GrammarError:
            raise
        except Exception as exc:
            raise GrammarError(f"the {_kind(spec)} does not compile: {_clean(exc)}") from None
        logger.debug("compiled a %s grammar in %.3fs", _kind(spec), time.perf_counter() - start)
        return compiled


def _lower_priority() -> None:
    """Run this compile thread (and the threads xgrammar starts from it) at the lowest
    CPU priority: the step loop's torch threads must not lose their cores to a compile."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # not Linux: the compile shares the CPU evenly
        pass


def _compile_spec(compiler: Any, spec: p.StructuredOutputs) -> Any:
    if spec.json is not None:
        try:
            schema = json.loads(spec.json)
        except ValueError as exc:
            raise GrammarError(f"the JSON schema is not JSON: {exc}") from None
        check_schema(schema)
        # Compact JSON (", " and ": " only): free whitespace lets weak models loop on it.
        return compiler.compile_json_schema(spec.json, any_whitespace=False, strict_mode=True)
    if spec.regex is not None:
        return compiler.compile_regex(spec.regex)
    if spec.choice is not None:
        if not spec.choice:
            raise GrammarError("the choice list is empty")
        alternatives = " | ".join(json.dumps(c, ensure_ascii=False) for c in spec.choice)
        return compiler.compile_grammar(f"root ::= {alternatives}")
    if spec.grammar is not None:
        return compiler.compile_grammar(spec.grammar)
    if spec.json_object:
        # Any JSON object: a non-strict object schema allows every property.
        return compiler.compile_json_schema(
            '{"type": "object"}', any_whitespace=False, strict_mode=False
        )
    if spec.structural_tag is not None:
        return compiler.compile_structural_tag(spec.structural_tag)
    raise GrammarError("the structured-output spec sets no constraint")


def _is_json(spec: p.StructuredOutputs) -> bool:
    """JSON grammars (schema, JSON mode, structural tags: tool calls' JSON arguments)."""
    return spec.json is not None or spec.json_object or spec.structural_tag is not None


def _kind(spec: p.StructuredOutputs) -> str:
    if spec.json is not None:
        return "JSON schema"
    if spec.regex is not None:
        return "regex"
    if spec.choice is not None:
        return "choice list"
    if spec.grammar is not None:
        return "grammar"
    if spec.structural_tag is not None:
        return "structural tag"
    return "JSON object grammar"


def _clean(exc: Exception) -> str:
    return _XGRAMMAR_PREFIX.sub("", str(exc).strip()).strip()
