#!/usr/bin/env python3
"""Symbolization of a real profile: the core symbolizer cold and warm, side by side with
the old Python symbolizer and with binutils' addr2line on the same addresses.

    python bench/symbolize_bench.py TEST_BINARY [--profile P] [--rounds 3] [--old-rounds 1] [--no-old]

TEST_BINARY is a large `-g` program built with HeapType, e.g. yaml-cpp's GoogleTest
suite (a 64 MB binary with its bundled googletest). This script fetches and builds
nothing; one way to get the binary (any checkout of yaml-cpp):

    git clone https://github.com/jbeder/yaml-cpp && cd yaml-cpp
    echo 'find_package(HeapType CONFIG REQUIRED)' > /tmp/heaptype-inject.cmake
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DYAML_CPP_BUILD_TESTS=ON \\
          -DCMAKE_PROJECT_INCLUDE=/tmp/heaptype-inject.cmake -DHEAPTYPE_INSTRUMENT_ALL=ON \\
          -DHeapType_DIR=$(heaptype --cmake-dir)
    cmake --build build --target yaml-cpp-tests -j2      # build/test/yaml-cpp-tests

The script runs the binary once with HEAPTYPE_OUTPUT set (or reads --profile), takes
every address a report needs (the function entries of the calling-context trees and
all call sites), and times, in fresh processes, interleaved round by round:

  core cold    heaptype._core.Symbolizer with an empty cache directory: construct,
               prefetch_functions + prefetch_call_sites, save the cache, destroy
  core warm    the same with the cache the cold run left
  Python warm  heaptype.analyze.functions.Symbolizer (the Python API: the same, plus the
               conversion to CodeLocation objects), warm
  addr2line    `addr2line -i -f -C -e BINARY` on the same addresses of the binary
               (link-time; call sites one byte back), one process
  old Python   the hand-written Python DWARF reader this replaced (functions.py from
               git history), cold, in the first --old-rounds rounds only (default 1: it
               took 406 s for these 82,938 addresses on a loaded machine); --no-old skips it

Figures are medians over the rounds (wall time, and the child's own CPU time, which a busy
machine disturbs less), with the machine's load average before and after.
Issue 10's targets: cold <= 3 s, warm <= 0.3 s on a >= 50 MB binary, progress shown.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD_MARKER = "def _decode_line_program"  # only the old hand-written reader has it


# --- child processes: one timed symbolization each ------------------------------------

def child(mode: str, work_file: str, cache: str) -> None:
    with open(work_file) as stream:
        work = json.load(stream)
    functions, call_sites = work["functions"], work["call_sites"]
    started, cpu_started = time.perf_counter(), cpu_seconds()
    result: dict = {}
    if mode == "core":
        from heaptype import _core

        symbolizer = _core.Symbolizer(work["modules"], work["executable"], cache_dir=cache or None)
        symbolizer.prefetch_functions(functions)
        symbolizer.prefetch_call_sites(call_sites)
        symbolizer.save_cache()
        stats = symbolizer.stats
        result = {"decoded": stats.decoded, "from_cache": stats.from_cache, "units": stats.units,
                  "dwarf_opened": stats.dwarf_opened}
        del symbolizer
    elif mode == "python":
        from heaptype.analyze.functions import Symbolizer

        symbolizer = Symbolizer(work["modules"], cache=cache or None)
        symbolizer.functions(functions)
        symbolizer.call_sites(call_sites)
        result = {"decoded": symbolizer.stats.decoded}
        del symbolizer
    elif mode == "old":
        sys.path.insert(0, work["old_dir"])
        from oldsymbolizer.functions import Symbolizer

        symbolizer = Symbolizer(work["modules"], cache=None)
        symbolizer.functions(functions)
        symbolizer.call_sites(call_sites)
        result = {"decoded": symbolizer.stats.decoded, "units": symbolizer.stats.units}
    result["seconds"] = time.perf_counter() - started
    result["cpu"] = round(cpu_seconds() - cpu_started, 3)  # less sensitive to a busy machine
    print(json.dumps(result))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- the parent ------------------------------------------------------------------------

def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def profile_of(binary: str, scratch: str) -> str:
    output = os.path.join(scratch, "profile.htp")
    log(f"running {binary} under HeapType...")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    environment["HEAPTYPE_OUTPUT"] = output
    subprocess.run([binary], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=1800, check=False)
    if not os.path.exists(output):
        sys.exit(f"{binary} wrote no profile: build it with HeapType ($(heaptype --cflags) / --ldflags)")
    return output


def addresses_of(profile: str) -> dict:
    from heaptype import _core

    raw = _core.ProfileFile(profile)
    aggregate = raw.aggregate_by_type({})
    functions, call_sites = set(), {c[2] for c in aggregate["contexts"] if c[2]}
    for tree in aggregate["nodes"].values():
        for _, function, call_site in tree[1:]:
            if function:
                functions.add(function)
            if call_site:
                call_sites.add(call_site)
    return {"modules": raw.modules, "executable": raw.executable, "functions": sorted(functions),
            "call_sites": sorted(call_sites)}


def old_symbolizer(scratch: str) -> str | None:
    """The old Python symbolizer (functions.py + symbols.py) from git history, as a package."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout

    try:  # the paths of those days (python/heaptype/ was flat then)
        removed = git("log", "--format=%H", f"-S{OLD_MARKER}", "--", "python/heaptype/functions.py").split()
    except (OSError, subprocess.CalledProcessError):
        return None
    if not removed:
        return None
    revision = f"{removed[0]}^"
    package = os.path.join(scratch, "old", "oldsymbolizer")
    os.makedirs(package)
    open(os.path.join(package, "__init__.py"), "w").close()
    for name in ("functions.py", "symbols.py"):
        with open(os.path.join(package, name), "w") as stream:
            stream.write(git("show", f"{revision}:python/heaptype/{name}"))
    return os.path.dirname(package)


def run_child(mode: str, work_file: str, cache: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, work_file, cache],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"{mode} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def time_addr2line(binary: str, link_addresses: list[int]) -> float:
    text = "".join(f"{a:#x}\n" for a in link_addresses)
    started = time.perf_counter()
    subprocess.run(["addr2line", "-i", "-f", "-C", "-e", binary], input=text, capture_output=True, text=True,
                   check=True)
    return time.perf_counter() - started


def executable_addresses(work: dict, binary: str) -> list[int]:
    """The addresses inside the test binary, at link time (call sites one byte back)."""
    from heaptype import _core

    real = os.path.realpath(binary)
    mappings = [m for m in _core.parse_module_map(work["modules"]) if os.path.realpath(m.path) == real]
    bias = _core.load_bias(mappings[0].path, mappings)
    low, high = min(m.start for m in mappings), max(m.end for m in mappings)
    inside = lambda a: low <= a < high  # noqa: E731
    return ([a - bias for a in work["functions"] if inside(a)] +
            [a - bias - 1 for a in work["call_sites"] if inside(a)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary", nargs="?", help="a -g test program built with HeapType")
    parser.add_argument("--profile", help="a profile of it (default: run it once)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-old", action="store_true", help="skip the old Python symbolizer")
    parser.add_argument("--old-rounds", type=int, default=1, help="rounds that time the old Python symbolizer")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return 0
    if not args.binary:
        parser.error("the test binary is required")

    scratch = tempfile.mkdtemp(prefix="heaptype-symbolize-bench-")
    try:
        return measure(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args, scratch: str) -> int:
    binary = os.path.abspath(args.binary)
    profile = args.profile or profile_of(binary, scratch)
    work = addresses_of(profile)
    old_dir = None if args.no_old else old_symbolizer(scratch)
    work["old_dir"] = old_dir or ""
    work_file = os.path.join(scratch, "work.json")
    with open(work_file, "w") as stream:
        json.dump(work, stream)
    in_binary = executable_addresses(work, binary)
    size_mb = os.path.getsize(binary) / 1e6
    load_before = os.getloadavg()
    log(f"{binary}: {size_mb:.1f} MB; {len(work['functions'])} function entries and "
        f"{len(work['call_sites'])} call sites ({len(in_binary)} in the binary); load average "
        f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")

    times: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}  # the children's own CPU seconds
    progress_lines: set[str] = set()
    details: dict[str, dict] = {}
    for round_number in range(args.rounds):
        measured = []
        cache = os.path.join(scratch, f"cache{round_number}")
        for mode, label, cache_dir in (("core", "core cold", cache), ("core", "core warm", cache),
                                       ("python", "Python API warm", cache)):
            result, stderr = run_child(mode, work_file, cache_dir)
            times.setdefault(label, []).append(result["seconds"])
            cpu.setdefault(label, []).append(result["cpu"])
            details[label] = result
            measured.append(label)
            progress_lines.update(line for line in stderr.splitlines() if line.startswith("heaptype:"))
        times.setdefault("addr2line -i -f -C", []).append(time_addr2line(binary, in_binary))
        measured.append("addr2line -i -f -C")
        if old_dir and round_number < args.old_rounds:
            result, _ = run_child("old", work_file, "")
            times.setdefault("old Python (cold)", []).append(result["seconds"])
            cpu.setdefault("old Python (cold)", []).append(result["cpu"])
            details["old Python (cold)"] = result
            measured.append("old Python (cold)")
        log(f"round {round_number + 1}: " + ", ".join(f"{k} {times[k][-1]:.2f} s" for k in measured))
    load_after = os.getloadavg()

    print(f"binary: {binary} ({size_mb:.1f} MB)")
    print(f"addresses: {len(work['functions'])} function entries + {len(work['call_sites'])} call sites; "
          f"addr2line gets the {len(in_binary)} inside the binary")
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}; "
          f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; {os.cpu_count()} CPUs")
    print(f"{'':22} {'median':>8} {'CPU':>8}  {'rounds (wall)':<24} details")
    for label, values in times.items():
        rounds = " ".join(f"{v:.2f}" for v in values)
        processor = f"{statistics.median(cpu[label]):7.2f}s" if label in cpu else f"{'':8}"
        print(f"{label:22} {statistics.median(values):7.2f}s {processor}  {rounds:<24} {details.get(label, '')}")
    print("progress lines (stderr, not a terminal):", *sorted(progress_lines) or ["none"], sep="\n  ")
    if not old_dir and not args.no_old:
        print("old Python symbolizer: not found in git history")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
