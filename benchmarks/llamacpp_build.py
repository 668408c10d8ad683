"""llama.cpp for benchmarks/llamacpp.py: `llama-server` built from the llama-cpp-python
sdist on PyPI (which vendors llama.cpp under vendor/llama.cpp), and the benchmark model
converted to GGUF with that tree's own convert_hf_to_gguf.py and gguf-py.

Everything lives in a cache outside the repository ($VRS_LLAMACPP_CACHE, else
~/.cache/vrs-llamacpp): sdist/ (the download), src/ (the extracted tree),
build-<version>-<cpu>/ (one build per llama-cpp-python version and CPU: GGML_NATIVE
compiles for the CPU it builds on) and gguf/ (the converted models).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import TextIO

from llamacpp_report import build_key

VERSION = "0.3.36"  # llama-cpp-python on PyPI; its vendor/llama.cpp is what is built
# The build: Release, -march=native, only the server; nothing fetched while building (no
# curl, no OpenSSL, no web UI, which the default build would download).
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
               "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
               "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF")


def cache_dir() -> Path:
    explicit = os.environ.get("VRS_LLAMACPP_CACHE")
    return Path(explicit) if explicit else Path.home() / ".cache" / "vrs-llamacpp"


def say(message: str) -> None:
    print(f"[llamacpp] {message}", flush=True)


def source_tree(cache: Path, version: str = VERSION) -> Path:
    """vendor/llama.cpp of the llama-cpp-python ``version`` sdist, downloaded (pip
    download, the sdist only) and extracted into ``cache`` unless already there."""
    tree = cache / "src" / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    if (tree / "CMakeLists.txt").exists():
        return tree
    sdist = cache / "sdist" / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.exists():
        say(f"downloading the llama-cpp-python {version} sdist from PyPI (~75 MB; pip "
            "prepares its metadata too, a minute or two)")
        sdist.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
             "llama-cpp-python", "--dest", str(sdist.parent),
             f"llama-cpp-python=={version}"], capture_output=True, text=True)
        if done.returncode != 0 or not sdist.exists():
            raise RuntimeError(f"pip download of llama-cpp-python=={version} failed:\n"
                               f"{done.stderr[-3000:]}")
    say(f"extracting {sdist.name}")
    with tarfile.open(sdist) as archive:
        archive.extractall(cache / "src", filter="data")
    if not (tree / "CMakeLists.txt").exists():
        raise RuntimeError(f"{sdist} has no vendor/llama.cpp: not the sdist expected")
    return tree


def llama_server(cache: Path, version: str = VERSION) -> Path:
    """The llama-server binary of ``version`` for this CPU, built unless cached."""
    key = build_key(version, Path("/proc/cpuinfo").read_text())
    build = cache / f"build-{key}"
    binary = build / "bin" / "llama-server"
    if binary.exists():
        say(f"llama-server: cached build {binary}")
        return binary
    if shutil.which("cmake") is None:
        raise SystemExit("cmake not found: install it (Debian: apt-get install -y cmake), "
                         "then run this again")
    tree = source_tree(cache, version)
    jobs = str(os.cpu_count() or 1)
    log = cache / f"build-{key}.log"
    say(f"building llama-server (llama-cpp-python {version}, key {key}) with {jobs} jobs; "
        f"on 2 cores this takes 10-30 min; log: {log}")
    start = time.monotonic()
    with open(log, "w") as out:
        for cmd in (["cmake", "-S", str(tree), "-B", str(build), *CMAKE_FLAGS],
                    ["cmake", "--build", str(build), "-j", jobs, "--target", "llama-server"]):
            _run_with_progress(cmd, out)
    if not binary.exists():
        raise RuntimeError(f"the build finished without {binary}; see {log}")
    say(f"llama-server built in {time.monotonic() - start:.0f} s")
    return binary


def _run_with_progress(cmd: list[str], out: TextIO) -> None:
    """Runs ``cmd``, its output to the log ``out``, saying each 10 % cmake reports."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    shown = -10
    for line in proc.stdout:
        out.write(line)
        found = re.match(r"\[\s*(\d+)%\]", line)
        if found and int(found.group(1)) >= shown + 10:
            shown = int(found.group(1))
            say(f"  build {shown}%")
    if proc.wait() != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed (exit {proc.returncode}); see the "
                           f"log {out.name}")


# Runs the tree's convert_hf_to_gguf.py as it is, but for the BPE pre-tokenizer's name:
# the converter recognises a tokenizer by the hash of its ids on a fixed text, and the
# benchmark model's tokenizer (the DeepSeek one cut to the model's vocabulary) hashes
# differently from the uncut one. The name given (argv[1]) is the one the converter's
# own table gives the uncut tokenizer (pre_tokenizer_of); the pre-tokenizer (regexes,
# byte-level mapping) is the same, only the vocabulary and merges were cut.
_CONVERT_DRIVER = """
import runpy, sys
from conversion import base
name = sys.argv.pop(1)
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: name
sys.argv[0] = sys.argv[1]
runpy.run_path(sys.argv.pop(1), run_name="__main__")
"""

# The converter's own hash table asked about a tokenizer directory (argv[1]).
_PRE_OF = """
import sys
from transformers import AutoTokenizer
from conversion import base
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
print(base.TextModel.get_vocab_base_pre(None, tokenizer))
"""


def _converter_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'gguf-py'}",
            "TOKENIZERS_PARALLELISM": "false"}


def check_converter_requirements() -> None:
    """Stops, saying what to install, unless the packages convert_hf_to_gguf.py imports
    beyond vrs's own (torch, transformers, numpy) are there."""
    missing = [name for name in ("sentencepiece", "yaml")
               if importlib.util.find_spec(name) is None]
    if missing:
        pip = {"sentencepiece": "'sentencepiece>=0.1.98,<0.3'", "yaml": "pyyaml"}
        raise SystemExit("llama.cpp's convert_hf_to_gguf.py needs "
                         f"{', '.join(missing)}: pip install "
                         + " ".join(pip[name] for name in missing))


def pre_tokenizer_of(tree: Path, tokenizer_dir: Path) -> str:
    """The pre-tokenizer name convert_hf_to_gguf.py's table gives the tokenizer in
    ``tokenizer_dir``; an error if the converter does not recognise it."""
    done = subprocess.run([sys.executable, "-c", _PRE_OF, str(tokenizer_dir)], cwd=tree,
                          env=_converter_env(tree), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf.py does not recognise the tokenizer in "
                           f"{tokenizer_dir}:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def convert(tree: Path, model_dir: Path, outtype: str, out: Path, pre: str) -> Path:
    """``model_dir`` as a GGUF of ``outtype`` (f32, f16, q8_0) at ``out``, the
    tokenizer's pre-tokenizer named ``pre``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    say(f"converting to GGUF {outtype} (pre-tokenizer {pre!r}) -> {out}")
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _CONVERT_DRIVER, pre, str(tree / "convert_hf_to_gguf.py"),
         str(model_dir), "--outtype", outtype, "--outfile", str(out)],
        cwd=tree, env=_converter_env(tree), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf.py ({outtype}) failed:\n{done.stderr[-3000:]}")
    say(f"  converted in {time.monotonic() - start:.0f} s ({out.stat().st_size / 2**20:.0f} MiB)")
    return out
