#!/usr/bin/env python3
"""HeapType's footprint where call paths are many and where runs are long.

Two workloads, each run in interleaved rounds (medians reported):

* a real GoogleTest binary with many call paths, built twice from the same sources:
  plain, and with HeapType (e.g. CMake's HEAPTYPE_INSTRUMENT_ALL). The plain build runs
  alone, under heaptrack and under `heaptype run` (the same binary as heaptrack's); the
  HeapType build runs with its runtime linked. Reported: wall
  time, peak RSS of the program, profile size and bytes per allocation, and the
  allocations and temporary allocations each tool counts (heaptype report's totals,
  heaptrack_print's summary).
* bench/long_loop.cpp, built plain and with `heaptype --cflags/--ldflags`, allocating at
  full speed for --loop-seconds: peak RSS against plain's and the profile's size.

Both HeapType builds also run aggregated (HEAPTYPE_MODE=aggregate: counts per call site).

usage:
  python bench/footprint_bench.py --gtest PLAIN_BIN HEAPTYPE_BIN --name "yaml-cpp c3f8112"
  python bench/footprint_bench.py --loop-seconds 60
(both at once is fine). The load average is printed with every round: a figure taken on
a busy machine is no figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import (RUNNER_SOURCE, BenchError, capture, clean_env, fmt_mib, fmt_size, heaptrack_launcher, log,  # noqa: E402
                       med, require, run_measured, si_bytes, table)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
LOOP_SOURCE = os.path.join(BENCH_DIR, "long_loop.cpp")


def heaptype_cli() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "heaptype")
    return beside if os.access(beside, os.X_OK) else require("heaptype")


def load_average() -> float:
    return os.getloadavg()[0]


def heaptype_totals(cli: str, profile: str) -> dict:
    done = subprocess.run([cli, "report", profile, "--format", "json"], capture_output=True, text=True)
    if done.returncode != 0:
        raise BenchError(f"heaptype report {profile} failed:\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    totals = report["totals"]
    return {"allocations": totals["allocations"], "temporary": totals["temporary_allocations"],
            "peak_bytes": totals["peak_bytes"], "live_bytes": totals["live_bytes"],
            "overhead": report.get("overhead")}


def heaptrack_totals(trace: str) -> dict:
    code, text = capture([require("heaptrack_print"), trace])
    if code != 0:
        raise BenchError(f"heaptrack_print {trace} failed:\n{text[-2000:]}")
    field = {k: None for k in ("allocations", "temporary", "peak_bytes")}
    for line in text.splitlines():
        if line.startswith("calls to allocation functions:"):
            field["allocations"] = int(line.split(":")[1].split()[0])
        elif line.startswith("temporary memory allocations:"):
            field["temporary"] = int(line.split(":")[1].split()[0])
        elif line.startswith("peak heap memory consumption:"):
            field["peak_bytes"] = si_bytes(line.split(":")[1].strip())
    return field


class Bench:
    def __init__(self, work: str, timeout: float):
        self.work, self.timeout = work, timeout
        source = os.path.join(work, "runner.cpp")
        with open(source, "w") as f:
            f.write(RUNNER_SOURCE)
        self.runner = os.path.join(work, "runner")
        code, out = capture(["g++", "-O2", source, "-o", self.runner])
        if code != 0:
            raise BenchError(f"could not build the measuring runner:\n{out[-2000:]}")
        self.cli = heaptype_cli()

    def run(self, name: str, cmd: list[str], env: dict) -> dict:
        out = os.path.join(self.work, name)
        measured = run_measured(self.runner, cmd, env, out + ".out", out + ".err", self.timeout)
        measured["load"] = load_average()
        return measured

    def profiled(self, name: str, cmd: list[str], mode: str = "full") -> tuple[dict, str]:
        profile = os.path.join(self.work, name + ".htp")
        if os.path.exists(profile):
            os.remove(profile)
        return self.run(name, cmd, clean_env(HEAPTYPE_OUTPUT=profile, HEAPTYPE_MODE=mode)), profile

    def heaptracked(self, name: str, cmd: list[str]) -> tuple[dict, str]:
        base = os.path.join(self.work, name + ".heaptrack")
        for old in (base + ".zst", base + ".gz"):
            if os.path.exists(old):
                os.remove(old)
        measured = self.run(name, [heaptrack_launcher(), "-o", base, *cmd], clean_env())
        trace = next(p for p in (base + ".zst", base + ".gz") if os.path.exists(p))
        return measured, trace


def gtest_rounds(bench: Bench, plain: str, instrumented: str, rounds: int) -> list[list]:
    runs = {"plain": [], "heaptype": [], "heaptype aggregate": [], "heaptype run": [], "heaptrack": []}
    counts = {}
    for r in range(rounds):
        log(f"gtest round {r + 1}/{rounds} (load {load_average():.2f})")
        runs["plain"].append(bench.run("gtest_plain", [plain], clean_env()))
        measured, profile = bench.profiled("gtest_heaptype", [instrumented])
        measured["file_bytes"] = os.path.getsize(profile)
        runs["heaptype"].append(measured)
        measured, aggregated = bench.profiled("gtest_aggregate", [instrumented], "aggregate")
        measured["file_bytes"] = os.path.getsize(aggregated)
        runs["heaptype aggregate"].append(measured)
        # The plain build under `heaptype run` (the runtime preloaded): the very binary heaptrack
        # runs, so that the counts compare one to one.
        preloaded = os.path.join(bench.work, "gtest_preloaded.htp")
        measured = bench.run("gtest_preloaded", [bench.cli, "run", "-o", preloaded, plain], clean_env())
        measured["file_bytes"] = os.path.getsize(preloaded)
        runs["heaptype run"].append(measured)
        measured, trace = bench.heaptracked("gtest_heaptrack", [plain])
        measured["file_bytes"] = os.path.getsize(trace)
        runs["heaptrack"].append(measured)
    counts["heaptype"] = heaptype_totals(bench.cli, profile)
    counts["heaptype aggregate"] = heaptype_totals(bench.cli, aggregated)
    counts["heaptype run"] = heaptype_totals(bench.cli, preloaded)
    counts["heaptrack"] = heaptrack_totals(trace)
    return summarise("gtest", runs, counts)


def loop_rounds(bench: Bench, seconds: float, rounds: int) -> list[list]:
    plain = os.path.join(bench.work, "long_loop_plain")
    profiled = os.path.join(bench.work, "long_loop_heaptype")
    flags = {opt: shlex.split(subprocess.run([bench.cli, opt], capture_output=True, text=True, check=True).stdout)
             for opt in ("--cflags", "--ldflags")}
    for cmd in (["g++", "-O2", "-g", LOOP_SOURCE, "-o", plain],
                ["g++", "-O2", "-g", *flags["--cflags"], LOOP_SOURCE, *flags["--ldflags"], "-o", profiled]):
        code, out = capture(cmd)
        if code != 0:
            raise BenchError(f"build failed: {shlex.join(cmd)}\n{out[-2000:]}")
    runs = {"plain": [], "heaptype": [], "heaptype aggregate": []}
    for r in range(rounds):
        log(f"loop round {r + 1}/{rounds}, {seconds:g} s each (load {load_average():.2f})")
        measured = bench.run("loop_plain", [plain, str(seconds)], clean_env())
        measured["work"] = loop_allocations(os.path.join(bench.work, "loop_plain.out"))
        runs["plain"].append(measured)
        measured, profile = bench.profiled("loop_heaptype", [profiled, str(seconds)])
        measured["file_bytes"] = os.path.getsize(profile)
        measured["work"] = loop_allocations(os.path.join(bench.work, "loop_heaptype.out"))
        runs["heaptype"].append(measured)
        measured, aggregated = bench.profiled("loop_aggregate", [profiled, str(seconds)], "aggregate")
        measured["file_bytes"] = os.path.getsize(aggregated)
        measured["work"] = loop_allocations(os.path.join(bench.work, "loop_aggregate.out"))
        runs["heaptype aggregate"].append(measured)
    return summarise(f"loop {seconds:g} s", runs, {"heaptype": heaptype_totals(bench.cli, profile),
                                                   "heaptype aggregate": heaptype_totals(bench.cli, aggregated)})


def loop_allocations(out_path: str) -> int:
    with open(out_path) as f:
        text = f.read()
    match = re.search(r"allocations=(\d+)", text)
    if not match:
        raise BenchError(f"long_loop printed no allocation count: {text[-500:]}")
    return int(match.group(1))


def seconds_per_unit(m: dict) -> float:
    """Wall time, or for a run of fixed duration its time per allocation."""
    return m["wall_s"] / m["work"] if m.get("work") else m["wall_s"]


def summarise(workload: str, runs: dict, counts: dict) -> list[list]:
    plain_wall = med([seconds_per_unit(m) for m in runs["plain"]])
    plain_rss = med([m["maxrss_kb"] for m in runs["plain"]])
    rows = []
    for tool, measured in runs.items():
        wall = med([seconds_per_unit(m) for m in measured])
        rss = med([m["maxrss_kb"] for m in measured])
        loads = [m["load"] for m in measured]
        file_bytes = measured[-1].get("file_bytes")
        c = counts.get(tool, {})
        per_alloc = f"{file_bytes / c['allocations']:.3g}" if file_bytes and c.get("allocations") else "-"
        # The wait4 peak of heaptrack is its interpreter's, of `heaptype run` the command's
        # Python: the program's own is not measured for those two.
        indirect = tool in ("heaptrack", "heaptype run")
        rss_text = "-" if indirect else fmt_mib(rss)
        rss_ratio = "-" if indirect else f"{rss / plain_rss:.2f}"
        rows.append([workload, tool, f"{wall / plain_wall:.2f}", rss_text, rss_ratio, fmt_size(file_bytes),
                     per_alloc, f"{c['allocations']:,}" if c.get("allocations") is not None else "-",
                     f"{c['temporary']:,}" if c.get("temporary") is not None else "-",
                     f"{min(loads):.1f}-{max(loads):.1f}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gtest", nargs=2, metavar=("PLAIN_BIN", "HEAPTYPE_BIN"),
                        help="a GoogleTest binary built plain and built with HeapType")
    parser.add_argument("--name", default="", help="what the gtest binary is (project and commit), for the table")
    parser.add_argument("--loop-seconds", type=float, default=0, help="run bench/long_loop.cpp this long (0: not)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    opts = parser.parse_args(argv)
    if not opts.gtest and not opts.loop_seconds:
        parser.error("nothing to measure: give --gtest PLAIN HEAPTYPE and/or --loop-seconds N")
    try:
        with tempfile.TemporaryDirectory(prefix="footprint-bench-") as work:
            bench = Bench(work, opts.timeout)
            rows = []
            if opts.gtest:
                rows += gtest_rounds(bench, *opts.gtest, opts.rounds)
            if opts.loop_seconds:
                rows += loop_rounds(bench, opts.loop_seconds, opts.rounds)
    except BenchError as e:
        print(f"footprint_bench: {e}", file=sys.stderr)
        return 1
    if opts.name:
        print(f"gtest binary: {opts.name}")
    print(f"medians of {opts.rounds} interleaved rounds; x plain = wall time / plain's (the loop: time per "
          "allocation / plain's); B/alloc = profile bytes per allocation the tool counted")
    print(table(["workload", "tool", "x plain", "peak RSS", "RSS x plain", "profile", "B/alloc", "allocations",
                 "temporary", "load avg"], rows, right=(2, 3, 4, 5, 6, 7, 8)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
