#!/usr/bin/env python3
"""alloc_bench built with Clang 22 (the ziglang wheel) in each type-capture mode.

Builds ../shared/bench/alloc_bench.cpp with `python -m ziglang c++ -std=c++20 -O2 -g`
four ways, all against zig's libc++ and all with frame pointers:

  plain        no HeapType at all
  macro        heaptype --cflags --capture macro      (the `new` macro, typed allocator shim)
  type-aware   heaptype --cflags --capture type-aware (Clang's type-aware operator new)
  (each HeapType build with --callstack none: the cost of typing, not of call paths; and
   with --callstack frame-pointer, the default, with --paths)

then times them interleaved round by round (the order rotates each round), reports the
median wall time of each and its ratio to the plain build's median taken in the same
run, and notes the load average before and after: on a busy machine only the ratios
mean anything, and they are a busy-machine figure.

Standard library only (plus ziglang and heaptype installed).
Usage:  python bench/capture_bench.py [--rounds 7] [--paths] [--json OUT] [-- ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(REPO, "..", "shared", "bench", "alloc_bench.cpp")
ZIG = [sys.executable, "-m", "ziglang", "c++"]
BASE = ["-std=c++20", "-O2", "-g", "-fno-omit-frame-pointer"]


def heaptype_flags(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "heaptype", *args, "--cxx", shlex.join(ZIG)], check=True,
                         capture_output=True, text=True).stdout
    return shlex.split(out)


def build(workdir: str, name: str, capture: str | None, callstack: str) -> str:
    exe = os.path.join(workdir, name)
    if capture is None:
        command = [*ZIG, *BASE, SOURCE, "-o", exe]
    else:
        command = [*ZIG, *BASE, *heaptype_flags("--cflags", "--capture", capture, "--callstack", callstack),
                   SOURCE, *heaptype_flags("--ldflags"), "-o", exe]
    subprocess.run(command, check=True)
    return exe


def run_once(exe: str, args: list[str], workdir: str, profiled: bool) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    if profiled:
        env["HEAPTYPE_OUTPUT"] = os.path.join(workdir, os.path.basename(exe) + ".htp")
    start = time.perf_counter()
    done = subprocess.run([exe, *args], env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{exe} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--paths", action="store_true",
                        help="also the HeapType builds with call paths (--callstack frame-pointer)")
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("args", nargs="*", help="alloc_bench's arguments (default: its defaults)")
    options = parser.parse_args()

    compiler = subprocess.run([*ZIG, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    with tempfile.TemporaryDirectory(prefix="capture-bench-") as workdir:
        variants = [("plain", None, "none")]
        callstacks = ["none", "frame-pointer"] if options.paths else ["none"]
        for callstack in callstacks:
            for capture in ("macro", "type-aware"):
                variants.append((f"{capture} ({'types only' if callstack == 'none' else callstack})", capture,
                                 callstack))
        print(f"building {len(variants)} variants with {compiler} ...", file=sys.stderr)
        exes = {name: build(workdir, f"v{i}", capture, callstack)
                for i, (name, capture, callstack) in enumerate(variants)}
        # One untimed run each: the page cache, zig's first-run costs.
        for name, exe in exes.items():
            run_once(exe, options.args, workdir, name != "plain")
        load_before = os.getloadavg()
        times: dict[str, list[float]] = {name: [] for name in exes}
        names = list(exes)
        for r in range(options.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                times[name].append(run_once(exes[name], options.args, workdir, name != "plain")[0])
        load_after = os.getloadavg()

    plain = statistics.median(times["plain"])
    result = {
        "compiler": compiler, "workload": "alloc_bench " + (" ".join(options.args) or "(defaults)"),
        "rounds": options.rounds, "load_average_before": load_before, "load_average_after": load_after,
        "cpus": os.cpu_count(),
        "variants": {name: {"median_s": statistics.median(t), "ratio": statistics.median(t) / plain,
                            "times_s": t} for name, t in times.items()},
    }
    print(f"{result['workload']}, {compiler}, medians of {options.rounds} interleaved rounds")
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, on {os.cpu_count()} CPUs"
          + (" (a busy machine: ratios only)" if max(load_before[0], load_after[0]) > 1 else ""))
    for name, v in result["variants"].items():
        print(f"  {name:34s} {v['median_s']:7.3f} s  {v['ratio']:5.2f}x plain")
    if options.json:
        with open(options.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
