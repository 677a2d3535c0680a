"""The profile reader and the analysis core under libFuzzer, AddressSanitizer and
UndefinedBehaviorSanitizer (tests/fuzz/profile_fuzzer.cpp, built with clang++ from
src/format and src/core, without Python).

The seed corpus is synthetic profiles (tests/python/synthetic.py), a real profile of
tests/cpp/threads.cpp, and the hostile files of test_core_truth.py. HEAPTYPE_FUZZ_RUNS
sets the fuzzing run's length (CI: 200,000 executions); any crash, sanitizer report,
leak, or allocation past the limits fails the test with libFuzzer's report.
"""

from __future__ import annotations

import os
import random
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import run_profiled
from synthetic import generate, write
from test_core_truth import FREE_REMOTE, MOVE, SITE, events
from tooling import require_file, require_tool, run_once

from heaptype import _core

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["tests/fuzz/profile_fuzzer.cpp", "src/format/*.cpp", "src/core/*.cpp", "src/core/exports/*.cpp",
           "src/core/symbolize/*.cpp"]
SANITIZE = "-fsanitize=address,undefined"
# Memory limits: an input of 4 KiB that needs more is a memory bomb.
LIMITS = ["-max_len=4096", "-rss_limit_mb=1024", "-malloc_limit_mb=512", "-timeout=20"]


def build_fuzzer(workdir: Path) -> Path:
    """Compiles every source (two at a time: CI machines have two cores), then links."""
    clang = require_tool("clang++")
    require_file("/usr/include/elfutils/libdw.h", "libdw-dev")
    sources = sorted(p for pattern in SOURCES for p in ROOT.glob(pattern))
    flags = ["-std=c++17", "-g", "-O1", f"-I{ROOT / 'src'}", "-fno-sanitize-recover=all"]

    def compile_one(source: Path) -> Path:
        obj = workdir / (str(source.relative_to(ROOT)).replace("/", "_") + ".o")
        command = [clang, *flags, SANITIZE + ",fuzzer-no-link", "-c", str(source), "-o", str(obj)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-4000:]}"
        return obj

    exe = workdir / "profile_fuzzer"

    def make() -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            objects = list(pool.map(compile_one, sources))
        command = [clang, SANITIZE + ",fuzzer", *map(str, objects), "-ldw", "-lelf", "-lzstd", "-o", str(exe)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-4000:]}"

    run_once(workdir / "profile_fuzzer.built", make)
    return exe


@pytest.fixture(scope="session")
def fuzzer(tmp_path_factory) -> Path:
    return build_fuzzer(tmp_path_factory.mktemp("fuzz-build"))


def hostile_seeds() -> list[bytes]:
    """Small damaged files: huge thread numbers, unknown sites, bad chunks."""
    out = []
    for thread in (1, 0xFFFFFFFF, 2**31 + 5):
        b = _core.ProfileBuilder(addresses=thread == 1)
        b.raw_chunk(4, thread, events(SITE, 16, 1, 0x40, 0x10, 0, 1, 1, 2, FREE_REMOTE, thread, 0,
                                      MOVE, thread, 0, 0))
        b.raw_chunk(3, thread, b"\x05name-\xe9\xff")
        b.raw_chunk(2, 0, b"400000-401000 r-xp 00000000 fe:00 12 /tmp/\xffmod\x00ule.so\n")
        # Counts of one site numbered 20 million: held densely, 640 MB from 14 bytes.
        b.raw_chunk(7, thread, events(20_000_000, 1, 1, 0, 1, 0))
        b.raw_chunk(8, 0, events(5, 16, 1, 16, 5, 1, 0))
        # Version 4's: survivors and retired counts whose distances run past 2^32, then a
        # ZSTD_FOLLOWS chunk followed by chunks that are no zstd stream.
        b.raw_chunk(10, 0, events(2 * thread, 40_000_000, 1, 0, 1, 1))
        b.raw_chunk(9, 0, events(16, 2 * thread, 2**33, 1, 1, 0))
        b.raw_chunk(11, 0, b"")
        b.raw_chunk(8, 0, events(5, 16, 1, 16, 5, 1, 0))
        out.append(b.finish())
    # Survivors whose second entry's distances, 2^63 - 1, overflow a signed sum with the
    # first entry's thread 5 and site 1.
    b = _core.ProfileBuilder(addresses=False)
    b.raw_chunk(10, 0, events(10, 2, 1, 0, 1, 1, 2**64 - 2, 2**64 - 2, 1, 0, 1, 1))
    out.append(b.finish())
    return out


def zstd_follows(profile: bytes) -> bytes:
    """A plain profile as the aggregated mode writes one that grew large: its header and
    first chunk plain, a ZSTD_FOLLOWS chunk, then the rest as a zstd stream."""
    import struct

    header = struct.unpack_from("<I", profile, 12)[0]
    first_end = header + 16 + struct.unpack_from("<I", profile, header + 12)[0]
    marker = struct.pack("<IB3xII", 0x4B435448, 11, 0, 0)
    zstd = require_tool("zstd")
    rest = subprocess.run([zstd, "-q", "-c"], input=profile[first_end:], capture_output=True, check=True).stdout
    return profile[:first_end] + marker + rest


@pytest.fixture(scope="session")
def seed_corpus(tmp_path_factory, cpp_programs) -> Path:
    corpus = tmp_path_factory.mktemp("fuzz-corpus")
    for seed in range(24):
        rng = random.Random(seed)
        sc = generate(rng, threads=1 + seed % 4, operations=20 + seed * 5)
        (corpus / f"synthetic{seed}.htp").write_bytes(write(sc, rng, tick=1 + seed % 3, flush_chance=0.2))
    for index, data in enumerate(hostile_seeds()):
        (corpus / f"hostile{index}.htp").write_bytes(data)
    real = corpus / "threads.htp"
    done = run_profiled(cpp_programs.program("threads"), real, "3", "40")
    assert done.returncode == 0 and real.stat().st_size > 64, done.stderr
    aggregated = corpus / "aggregated.htp"
    done = run_profiled(cpp_programs.program("temporaries"), aggregated, env={"HEAPTYPE_MODE": "aggregate"})
    assert done.returncode == 0, done.stderr
    (corpus / "aggregated-zstd-follows.htp").write_bytes(zstd_follows(aggregated.read_bytes()))
    return corpus


def run_fuzzer(fuzzer: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(fuzzer), *args], capture_output=True, text=True, timeout=3600)
    report = done.stderr[-6000:]
    assert done.returncode == 0, f"the fuzzer found a problem (exit {done.returncode}):\n{report}"
    assert "ERROR:" not in done.stderr and "runtime error:" not in done.stderr, report
    return done


def test_every_seed_and_every_cut_of_it_is_clean_under_asan_and_ubsan(fuzzer, seed_corpus, tmp_path):
    """Each input once: the real, synthetic and hostile profiles, whole and cut short."""
    inputs = []
    for seed in sorted(seed_corpus.iterdir()):
        data = seed.read_bytes()
        for cut in sorted({len(data), len(data) // 2, 70, 64, 63, 9}):
            path = tmp_path / f"{seed.stem}-{cut}"
            path.write_bytes(data[:cut])
            inputs.append(str(path))
    done = run_fuzzer(fuzzer, *LIMITS, *inputs)
    assert done.stderr.count("Executed ") == len(inputs)


def test_fuzzing_the_reader_finds_nothing(fuzzer, seed_corpus, tmp_path):
    runs = int(os.environ.get("HEAPTYPE_FUZZ_RUNS", "20000"))
    work = tmp_path / "corpus"
    work.mkdir()
    done = run_fuzzer(fuzzer, f"-runs={runs}", "-seed=1", *LIMITS, str(work), str(seed_corpus))
    assert f"Done {runs} runs" in done.stderr
