"""HeapType against heaptrack on real programs: the same plain binary run under
``heaptrack`` and under ``heaptype run`` (the runtime preloaded; heaptrack hangs on a
binary built with HeapType). Allocations, temporary allocations, peak and leaked bytes
must be equal.

The programs: TinyXML-2 9.0.0 (tests/real_programs.py) parsing, walking, editing and
printing a generated 4 MiB document (269,438 allocations, 76,241 temporaries); Debian's
CMake 3.25 running a script (``cmake -P``: about 217,000 and 15,043, depending on the
paths' lengths); the shared workload ../shared/bench/alloc_bench.cpp (2,300,127 and
993,723); and tests/cpp/temporaries.cpp, whose cases (frees in a row, frees in order,
realloc) have known counts. Both runs get the same environment (PWD included: CMake
reads it).

heaptrack's figures are read twice: from heaptrack_print's summary (its own analysis)
and, exactly, from its trace file (``+``/``-`` lines and the sizes of ``a`` lines), whose
replay must reproduce heaptrack_print's summary. Two differences are heaptrack's and
are asserted as such, exactly:

- heaptrack_print counts as temporary any free of its first allocation info (index 0)
  that follows a free: it marks "no allocation open" with 0, which is also that info's
  index (accumulatedtracedata.cpp, ``lastAllocationPtr``). A preloaded C++ program's first
  allocation is libstdc++'s 72,704 B emergency pool, freed by ``__gnu_cxx::__freeres()``
  at exit; when a free comes just before that, heaptrack_print shows one temporary more
  (alloc_bench: 993,724 against 993,723). HeapType's count equals heaptrack_print's
  less those frees, counted in the trace.
- heaptrack stops recording in an atexit handler that it registers when it starts (before
  any of the program's), so frees in shared libraries' destructors (``_dl_fini``) are
  missing from its trace and their blocks count as leaked. Debian's CMake 3.25 frees 694
  blocks there: heaptrack reports 111.80K leaked (111,803 B), HeapType 4,185 B (3 blocks,
  what is still live when its runtime finishes). For CMake the test asserts HeapType's
  leaked bytes are below heaptrack's and its live blocks are heaptrack's leaked blocks
  less the frees heaptrack missed.

GCC's cc1plus is not among the programs: its hash tables hash pointers, so its number of
allocations changes from run to run with the address space's layout (three heaptrack
runs on one file: 365,770, 365,783 and 365,772 allocations).

heaptrack_print runs without leak suppressions (they hide some leaked bytes from its
total); Debian's heaptrack is 1.4.0.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import heaptype
from real_programs import build_tinyxml2_walk, tinyxml2_tree  # noqa: F401 (fixture)
from tooling import missing, require_file, require_tool

REPO = Path(__file__).resolve().parents[2]
ALLOC_BENCH = REPO.parent / "shared" / "bench" / "alloc_bench.cpp"
TEMPORARIES = REPO / "tests" / "cpp" / "temporaries.cpp"
PLAIN_FLAGS = ["-O2", "-g", "-fno-omit-frame-pointer"]
CMAKE_SCRIPT = """\
set(items "")
foreach(i RANGE 3000)
  string(MD5 h "item-${i}")
  string(SUBSTRING "${h}" 0 8 short)
  list(APPEND items "${short}")
endforeach()
list(SORT items)
list(JOIN items ";" joined)
string(REGEX MATCHALL "[0-9a-f]*7[0-9a-f]*" sevens "${joined}")
list(LENGTH sevens n)
message(STATUS "items with a 7: ${n}")
"""


@dataclass
class HeaptrackRun:
    allocations: int          # heaptrack_print's summary
    temporaries: int
    peak_text: str            # as heaptrack_print formats bytes, e.g. "59.86M"
    leaked_text: str
    replay: "TraceReplay"     # the trace file, exactly


@dataclass
class TraceReplay:
    """heaptrack's trace file replayed: exact bytes, and its temporaries counted the way
    heaptrack_print counts them (``print_temporaries``) and without the index-0 accident."""
    allocations: int = 0
    frees: int = 0
    peak: int = 0
    leaked: int = 0
    print_temporaries: int = 0
    temporaries: int = 0


def trace_text(trace: Path) -> str:
    """A heaptrack data file's text: zstd or gzip compressed by its suffix, else plain."""
    if trace.suffix == ".zst":
        zstd = require_tool("zstd")
        return subprocess.run([zstd, "-dc", str(trace)], capture_output=True, text=True, check=True).stdout
    if trace.suffix == ".gz":
        return gzip.decompress(trace.read_bytes()).decode()
    return trace.read_text()


def replay_trace(trace: Path) -> TraceReplay:
    text = trace_text(trace)
    sizes: list[int] = []
    out = TraceReplay()
    last_index = 0           # heaptrack_print's lastAllocationPtr: 0 means none, or index 0
    open_index = None        # the same without that ambiguity
    for line in text.splitlines():
        kind = line[:2]
        if kind == "a ":
            sizes.append(int(line.split()[1], 16))
        elif kind == "+ ":
            index = int(line[2:], 16)
            out.allocations += 1
            out.leaked += sizes[index]
            out.peak = max(out.peak, out.leaked)
            last_index = open_index = index
        elif kind == "- ":
            index = int(line[2:], 16)
            out.frees += 1
            out.leaked -= sizes[index]
            out.print_temporaries += last_index == index
            out.temporaries += open_index == index
            last_index, open_index = 0, None
    return out


def heaptrack_bytes(value: int) -> str:
    """Bytes as heaptrack_print writes them (formatBytes: powers of 1000, two decimals,
    the unit's first letter)."""
    if abs(value) <= 1000:
        return f"{value}B"
    amount, units = float(value), "BKMGT"
    unit = 0
    while unit < len(units) - 1 and abs(amount) > 1000.0:
        amount /= 1000.0
        unit += 1
    return f"{amount:.2f}{units[unit]}"


def environment(cwd: Path) -> dict[str, str]:
    """The programs' environment, the same for both: no HeapType settings, and PWD set
    to where they run (heaptrack is a shell script: the shell sets PWD, and CMake reads it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    env["PWD"] = str(cwd)
    return env


def run_heaptrack(command: list[str], out: Path, cwd: Path) -> HeaptrackRun:
    heaptrack = require_tool("heaptrack")
    require_tool("heaptrack_print")
    out.mkdir(parents=True)
    done = subprocess.run([heaptrack, "-o", str(out / "trace"), *command], capture_output=True, text=True,
                          cwd=cwd, env=environment(cwd), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return print_summary(next(out.glob("trace*")))


def print_summary(trace: Path) -> HeaptrackRun:
    """heaptrack_print's summary of a data file, and the file replayed."""
    printer = require_tool("heaptrack_print")
    # Without suppressions: its leaked figure is then every byte not freed, as HeapType's.
    summary = subprocess.run([printer, "--print-peaks", "0", "--print-allocators", "0", "--print-temporary", "0",
                              "--print-leaks", "0", "--disable-builtin-suppressions",
                              "--disable-embedded-suppressions", str(trace)],
                             capture_output=True, text=True, check=True).stdout

    def field(label: str, pattern: str) -> str:
        match = re.search(rf"^{label}: ({pattern})", summary, re.M)
        assert match, (label, summary)
        return match.group(1)

    return HeaptrackRun(int(field("calls to allocation functions", r"\d+")),
                        int(field("temporary memory allocations", r"\d+")),
                        field("peak heap memory consumption", r"[\d.]+[BKMGT]"),
                        field("total memory leaked", r"-?[\d.]+[BKMGT]"),
                        replay_trace(trace))


def run_heaptype(command: list[str], profile: Path, cwd: Path):
    done = subprocess.run([sys.executable, "-m", "heaptype", "run", "-o", str(profile), "--", *command],
                          capture_output=True, text=True, env=environment(cwd), cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stderr
    loaded = heaptype.load(profile)
    assert loaded.mode == "preloaded" and loaded.complete, loaded.warnings
    return loaded.totals


def both(name: str, command: list[str], tmp_path_factory):
    """(heaptrack's run, HeapType's totals) of one command, with the same working folder."""
    work = tmp_path_factory.mktemp(name)
    return run_heaptrack(command, work / "heaptrack", work), run_heaptype(command, work / "run.htp", work)


def build_plain(source: Path, output: Path) -> Path:
    cxx = require_tool("g++")
    subprocess.run([cxx, "-std=c++17", *PLAIN_FLAGS, str(source), "-o", str(output)], check=True,
                   capture_output=True)
    return output


@pytest.fixture(scope="module")
def tinyxml2_runs(tinyxml2_tree, tmp_path_factory):
    program = build_tinyxml2_walk(tinyxml2_tree, tmp_path_factory.mktemp("tinyxml2") / "walk", PLAIN_FLAGS)
    return both("tinyxml2", [str(program), "4"], tmp_path_factory)


@pytest.fixture(scope="module")
def cmake_runs(tmp_path_factory):
    cmake = require_file("/usr/bin/cmake", "cmake (Debian's)")
    script = tmp_path_factory.mktemp("cmake_script") / "items.cmake"
    script.write_text(CMAKE_SCRIPT)
    return both("cmake", [str(cmake), "-P", str(script)], tmp_path_factory)


@pytest.fixture(scope="module")
def alloc_bench_runs(tmp_path_factory):
    if not ALLOC_BENCH.is_file():
        missing(f"{ALLOC_BENCH} is missing (the shared workload beside the checkout)")
    program = build_plain(ALLOC_BENCH, tmp_path_factory.mktemp("alloc_bench") / "alloc_bench")
    return both("alloc_bench", [str(program)], tmp_path_factory)


@pytest.fixture(scope="module")
def temporaries_runs(tmp_path_factory):
    program = build_plain(TEMPORARIES, tmp_path_factory.mktemp("temporaries") / "temporaries")
    return both("temporaries", [str(program)], tmp_path_factory)


def assert_replay_is_heaptrack_print(ht: HeaptrackRun) -> None:
    """The trace replay reads heaptrack's data as heaptrack_print does."""
    replay = ht.replay
    assert (replay.allocations, replay.print_temporaries) == (ht.allocations, ht.temporaries)
    assert (heaptrack_bytes(replay.peak), heaptrack_bytes(replay.leaked)) == (ht.peak_text, ht.leaked_text)


def assert_same_figures(ht: HeaptrackRun, totals, *, leaked: bool = True) -> None:
    assert_replay_is_heaptrack_print(ht)
    assert totals.allocations == ht.allocations
    assert totals.temporary_allocations == ht.replay.temporaries
    assert totals.peak_bytes == ht.replay.peak
    if leaked:
        assert totals.live_bytes == ht.replay.leaked


def test_tinyxml2(tinyxml2_runs):
    ht, totals = tinyxml2_runs
    assert_same_figures(ht, totals)
    assert totals.allocations > 200_000 and totals.temporary_allocations > 50_000


def test_cmake_script(cmake_runs):
    ht, totals = cmake_runs
    assert_same_figures(ht, totals, leaked=False)
    assert totals.allocations > 100_000 and totals.temporary_allocations > 10_000
    # heaptrack stopped before the shared libraries' destructors freed their blocks.
    missed_frees = totals.frees - ht.replay.frees
    assert missed_frees > 0 and totals.live_bytes < ht.replay.leaked
    assert totals.live_blocks == ht.replay.allocations - ht.replay.frees - missed_frees


def test_alloc_bench(alloc_bench_runs):
    ht, totals = alloc_bench_runs
    assert_same_figures(ht, totals)
    assert totals.allocations == 2_300_127


def test_frees_in_a_row(temporaries_runs):
    """tests/cpp/temporaries.cpp: its 86 allocations and 56 temporaries, plus the C++
    runtime's emergency pool and stdio's buffer (allocated, not temporary)."""
    ht, totals = temporaries_runs
    assert_same_figures(ht, totals)
    assert (totals.allocations, totals.temporary_allocations) == (88, 56)


def test_heaptrack_print_counts_its_first_info_by_accident(alloc_bench_runs, temporaries_runs):
    """What heaptrack_print adds is exactly the frees of allocation info 0 after a free."""
    for ht, totals in (alloc_bench_runs, temporaries_runs):
        assert ht.temporaries - totals.temporary_allocations == ht.replay.print_temporaries - ht.replay.temporaries
    ht, totals = alloc_bench_runs
    assert ht.temporaries == totals.temporary_allocations + 1
