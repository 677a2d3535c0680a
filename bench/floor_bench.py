#!/usr/bin/env python3
"""The floor: what the least bookkeeping an exact heap profiler does costs by itself.

Issue "Speed" asks HeapType's hooks for a ratio to the plain program, issue "Footprint"
for a peak RSS within 1.1x of a small loop's. This benchmark measures the parts no
exact design can leave out, alone, beside HeapType, in the same interleaved rounds:

* time (alloc_bench, dom_parser): the plain build; the plain build with frame
  pointers; a 16-byte header in front of every block and nothing else
  (bench/header_pad.cpp); a walk of the frame-pointer chain of every allocation to the
  top of its stack and nothing else; both; the header with a table of block starts
  (each block's start marked in a byte table, checked and cleared at its delete: how
  HeapType knows a block is its own without a guess); the three together; the header,
  the table and a record of each event (the call site's site number from a per-thread
  memo, kept in the header, one varint record per allocation and per free into a
  thread's buffer, a clock checked: the least an exact profile of types over time
  writes); the four together; HeapType types only; HeapType default.
  Medians of wall time (and of CPU time: HeapType's writer thread compresses on the
  other core), with the rounds' quartiles, as ratios to plain.
* peak RSS (--loop: bench/long_loop.cpp): plain; the 16-byte header; the header and a
  sleeping second thread (a profile writer's stack and libc pages); those and one
  unwind by the call frame information at each new call site (what checking
  frame-pointer call paths against the CFI costs at least: the unwinder's code and
  the .eh_frame pages it reads); HeapType aggregated without call paths, aggregated,
  and full. VmHWM a little before the run's end, medians of the rounds.

usage:
  python bench/floor_bench.py                      # both workloads, 41 rounds
  python bench/floor_bench.py --workload dom_parser --rounds 21 --loop
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from footprint_bench import LOOP_SOURCE, heaptype_cli  # noqa: E402
from real_programs import load_average as loadavg  # noqa: E402
from run_bench import WORKLOADS, BenchError, capture, clean_env, log, table  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
PAD_SOURCE = os.path.join(BENCH_DIR, "header_pad.cpp")
RUNTIME_DIR = os.path.join(os.path.dirname(BENCH_DIR), "src", "runtime")
FRAME_POINTERS = ["-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"]

# name -> (what it is, extra compiler flags, links header_pad.cpp with these -D's, HeapType flags)
TIME_VARIANTS = {
    "plain": ("the program as it is", [], None, None),
    "frame pointers": ("built with frame pointers", FRAME_POINTERS, None, None),
    "header": ("16 B in front of every block", [], ["-DPAD=16"], None),
    "walk": ("every allocation walks its frame-pointer chain", FRAME_POINTERS, ["-DPAD=0", "-DWALK=1"], None),
    "header + walk": ("both", FRAME_POINTERS, ["-DPAD=16", "-DWALK=1"], None),
    "header + starts": ("and each block's start marked in a byte table", [], ["-DPAD=16", "-DSTARTS=1"], None),
    "header + starts + walk": ("all three", FRAME_POINTERS, ["-DPAD=16", "-DSTARTS=1", "-DWALK=1"], None),
    "header + starts + record": ("and a site and a record per event", [],
                                 ["-DPAD=16", "-DSTARTS=1", "-DRECORD=1"], None),
    "header + starts + record + walk": ("all four", FRAME_POINTERS,
                                        ["-DPAD=16", "-DSTARTS=1", "-DRECORD=1", "-DWALK=1"], None),
    "HeapType types only": ("heaptype --callstack none", [], None, ["--callstack", "none"]),
    "HeapType default": ("heaptype (frame-pointer call paths)", [], None, []),
}
LOOP_VARIANTS = {
    "plain": ([], None, None, {}),
    "header": ([], ["-DPAD=16"], None, {}),
    "header + thread": ([], ["-DPAD=16", "-DTHREAD=1"], None, {}),
    "header + thread + unwinder": ([], ["-DPAD=16", "-DTHREAD=1", "-DUNWIND=1"], None, {}),
    "HeapType aggregated, types only": ([], None, ["--callstack", "none"], {"HEAPTYPE_MODE": "aggregate"}),
    "HeapType aggregated": ([], None, [], {"HEAPTYPE_MODE": "aggregate"}),
    "HeapType full": ([], None, [], {}),
}


def heaptype_flags(cli: str, extra: list[str]) -> tuple[list[str], list[str]]:
    def ask(opt):
        done = subprocess.run([cli, opt, *extra], capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"{cli} {opt} {shlex.join(extra)} failed: {done.stderr.strip()}")
        return shlex.split(done.stdout)
    return ask("--cflags"), ask("--ldflags")


def build(cli: str, source: str, out: str, cflags: list[str], pad: list[str] | None,
          heaptype: list[str] | None) -> str:
    cmd = ["g++", "-O2", "-g", *cflags]
    if heaptype is not None:
        ht_cflags, ht_ldflags = heaptype_flags(cli, heaptype)
        cmd += [*ht_cflags, source, *ht_ldflags]
    else:
        cmd.append(source)
        if pad is not None:
            cmd += [PAD_SOURCE, *pad]
            if "-DSTARTS=1" in pad:  # the runtime's own table of block starts
                cmd += [f"-I{RUNTIME_DIR}", os.path.join(RUNTIME_DIR, "block_starts.cpp")]
    cmd += ["-o", out]
    code, text = capture(cmd)
    if code != 0:
        raise BenchError(f"build failed: {shlex.join(cmd)}\n{text[-2000:]}")
    return shlex.join(cmd)


def build_variants(cli: str, source: str, prefix: str, variants: dict) -> dict:
    """Each variant's binary, built from `source`: name -> (cflags, header_pad -D's, HeapType flags)."""
    binaries = {}
    for name, (cflags, pad, heaptype) in variants.items():
        out = prefix + "_" + name.replace(" ", "_").replace("+", "and").replace(",", "")
        log(f"build: {build(cli, source, out, cflags, pad, heaptype)}")
        binaries[name] = out
    return binaries


def timed_run(binary: str, args: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds (all threads) of one run."""
    start = time.perf_counter()
    child = subprocess.Popen([binary, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise BenchError(f"{binary} failed (wait status {status})")
    return wall, usage.ru_utime + usage.ru_stime


def rotated(names: list[str], r: int) -> list[str]:
    k = r % len(names)
    return names[k:] + names[:k]


def time_floor(cli: str, workload: str, rounds: int, work: str) -> None:
    binaries = build_variants(cli, WORKLOADS[workload][0], os.path.join(work, workload),
                              {name: spec[1:] for name, spec in TIME_VARIANTS.items()})
    names = list(binaries)
    wall = {n: [] for n in names}
    cpu = {n: [] for n in names}
    env = clean_env(HEAPTYPE_OUTPUT=os.path.join(work, f"{workload}.htp"))
    before = loadavg()
    for r in range(rounds):
        if r % 10 == 0:
            log(f"{workload}: round {r + 1}/{rounds} (load {loadavg()})")
        for name in rotated(names, r):
            w, c = timed_run(binaries[name], [], env)  # the workload's full default run
            wall[name].append(w)
            cpu[name].append(c)
    after = loadavg()
    base_wall = statistics.median(wall["plain"])
    base_cpu = statistics.median(cpu["plain"])
    rows = []
    for name in names:
        ratios = sorted(w / base_wall for w in wall[name])
        q1, q3 = ratios[len(ratios) // 4], ratios[3 * len(ratios) // 4]
        rows.append([name, TIME_VARIANTS[name][0], f"{statistics.median(wall[name]):.3f} s",
                     f"{statistics.median(wall[name]) / base_wall:.3f}", f"{q1:.3f}-{q3:.3f}",
                     f"{statistics.median(cpu[name]) / base_cpu:.3f}"])
    print(f"\n{workload}: {rounds} interleaved rounds, medians; load average {before} before, {after} after")
    print(table(["variant", "what it does", "wall", "x plain", "quartiles", "CPU x plain"], rows,
                right=(2, 3, 4, 5)))


def peak_rss_kib(binary: str, seconds: float, env: dict) -> int:
    """VmHWM of a loop run, read a little before it ends."""
    child = subprocess.Popen([binary, str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    time.sleep(max(seconds - 0.5, 0.5))
    peak = 0
    with open(f"/proc/{child.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    if child.wait() != 0:
        raise BenchError(f"{binary} failed")
    return peak


def rss_floor(cli: str, seconds: float, rounds: int, work: str) -> None:
    binaries = build_variants(cli, LOOP_SOURCE, os.path.join(work, "loop"),
                              {name: spec[:3] for name, spec in LOOP_VARIANTS.items()})
    names = list(binaries)
    peaks = {n: [] for n in names}
    before = loadavg()
    for r in range(rounds):
        log(f"loop: round {r + 1}/{rounds} (load {loadavg()})")
        for name in rotated(names, r):
            env = clean_env(HEAPTYPE_OUTPUT=os.path.join(work, "loop.htp"), **LOOP_VARIANTS[name][3])
            peaks[name].append(peak_rss_kib(binaries[name], seconds, env))
    base = statistics.median(peaks["plain"])
    rows = [[name, f"{statistics.median(peaks[name]):,.0f} KiB", f"{statistics.median(peaks[name]) / base:.3f}",
             f"{statistics.median(peaks[name]) - base:+,.0f} KiB"] for name in names]
    print(f"\nlong_loop {seconds:g} s: peak RSS, medians of {rounds} rounds; load average {before} before, "
          f"{loadavg()} after; 1.1x plain leaves {base * 0.1:,.0f} KiB")
    print(table(["variant", "peak RSS", "x plain", "over plain"], rows, right=(1, 2, 3)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", action="append", choices=["alloc_bench", "dom_parser"],
                    help="time these (default: both)")
    ap.add_argument("--rounds", type=int, default=41, help="interleaved rounds of the timed runs (default 41)")
    ap.add_argument("--loop", action="store_true", help="also the peak RSS of bench/long_loop.cpp")
    ap.add_argument("--loop-seconds", type=float, default=3.0, help="each loop run's length (default 3)")
    ap.add_argument("--loop-rounds", type=int, default=3, help="rounds of the loop (default 3)")
    ap.add_argument("--no-time", action="store_true", help="only the loop's RSS")
    opts = ap.parse_args(argv)
    cli = heaptype_cli()
    try:
        with tempfile.TemporaryDirectory(prefix="heaptype-floor-") as work:
            if not opts.no_time:
                for workload in opts.workload or ["alloc_bench", "dom_parser"]:
                    time_floor(cli, workload, opts.rounds, work)
            if opts.loop or opts.no_time:
                rss_floor(cli, opts.loop_seconds, opts.loop_rounds, work)
    except BenchError as e:
        print(f"floor_bench: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
