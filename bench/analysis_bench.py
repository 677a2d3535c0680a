#!/usr/bin/env python3
"""Analysis speed and memory: `heaptype report` beside `heaptrack_print` on the same run.

    python bench/analysis_bench.py                  # alloc_bench at 10x: ~23M allocations, 5 rounds
    python bench/analysis_bench.py --scale 10 100   # also at 100x (~230M allocations; minutes)

For each scale, the shared workload (../shared/bench/alloc_bench.cpp, its arguments
multiplied by the scale) is built twice with g++ -O2 -g: with HeapType's flags, and
plain for heaptrack (heaptrack hangs on an instrumented binary, DESIGN.md). Each is run
once to record a profile. Then, in interleaved rounds, each analyser reads its profile:

    heaptype report PROFILE.htp --format json
    heaptrack_print PROFILE.zst

`heaptype timeline PROFILE.htp --format json` and `heaptype diff PROFILE.htp PROFILE.htp
--format json` (the profile against itself: two full passes) are timed the same way.
Every analysis is measured by GNU time (`/usr/bin/time`, Debian's package `time`): wall
time and the peak RSS of the analyser. The figures are medians over the rounds, reported
as ratios, with the machine's load average before and after: a figure taken on a busy
machine is no figure. The allocation counts both tools report are cross-checked.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = REPO.parent / "shared" / "bench" / "alloc_bench.cpp"
DEFAULT_ARGS = (2_000_000, 200_000, 5, 100_000)  # the workload's defaults; vector rounds stay 5
TIME = "/usr/bin/time"


def log(message: str) -> None:
    print(f"[analysis-bench] {message}", file=sys.stderr, flush=True)


def require(program: str, package: str) -> str:
    path = shutil.which(program) or (program if os.path.exists(program) else None)
    if not path:
        raise SystemExit(f"analysis_bench: {program} not found: apt-get install {package}")
    return path


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def scaled_args(scale: int) -> list[str]:
    n, nodes, rounds, strings = DEFAULT_ARGS
    return [str(n * scale), str(nodes * scale), str(rounds), str(strings * scale)]


def heaptype_command() -> list[str]:
    found = Path(sys.executable).with_name("heaptype")
    return [str(found)] if found.exists() else [sys.executable, "-m", "heaptype"]


def build(source: Path, work: Path, cxx: str) -> tuple[Path, Path]:
    from heaptype.capture import flags

    plain, profiled = work / "alloc_bench_plain", work / "alloc_bench_heaptype"
    log(f"building {source.name} plain and with HeapType ({cxx} -O2 -g)")
    subprocess.run([cxx, "-O2", "-g", str(source), "-o", str(plain)], check=True)
    subprocess.run([cxx, "-O2", "-g", *flags.compile_flags(), str(source), *flags.link_flags(), "-o",
                    str(profiled)], check=True)
    return plain, profiled


def record(plain: Path, profiled: Path, args: list[str], work: Path, scale: int) -> tuple[Path, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    htp = work / f"alloc_bench_{scale}x.htp"
    log(f"recording {scale}x ({' '.join(args)}) with HeapType")
    subprocess.run([str(profiled), *args], env={**env, "HEAPTYPE_OUTPUT": str(htp)}, check=True,
                   stderr=subprocess.DEVNULL)
    log(f"recording {scale}x with heaptrack")
    base = work / f"alloc_bench_{scale}x.heaptrack"
    subprocess.run(["heaptrack", "-o", str(base), str(plain), *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trace = next(work.glob(f"alloc_bench_{scale}x.heaptrack*"))
    return htp, trace


def measured(command: list[str], out: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one analysis, by GNU time."""
    stats = out.with_suffix(".time")
    with open(out, "wb") as sink:
        done = subprocess.run([TIME, "-f", "%e %M", "-o", str(stats), *command], stdout=sink,
                              stderr=subprocess.PIPE)
    if done.returncode != 0:
        raise SystemExit(f"analysis_bench: {' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    wall, rss = stats.read_text().split()[-2:]
    return float(wall), int(rss)


def cross_check(report: Path, heaptrack_out: Path) -> str:
    ours = json.loads(report.read_text())["totals"]["allocations"]
    match = re.search(r"calls to allocation functions: (\d+)", heaptrack_out.read_text(errors="replace"))
    theirs = int(match.group(1)) if match else None
    verdict = "agree" if ours == theirs else "DIFFER"
    return f"allocations: heaptype {ours:,}, heaptrack {theirs:,} ({verdict})" if theirs else \
        f"allocations: heaptype {ours:,}, heaptrack: not found in its output"


def bench_scale(scale: int, plain: Path, profiled: Path, work: Path, rounds: int) -> dict:
    htp, trace = record(plain, profiled, scaled_args(scale), work, scale)
    heaptype = heaptype_command()
    commands = {"heaptype report": [*heaptype, "report", str(htp), "--format", "json"],
                "heaptype timeline": [*heaptype, "timeline", str(htp), "--format", "json"],
                # two full passes: the profile against itself
                "heaptype diff": [*heaptype, "diff", str(htp), str(htp), "--format", "json"],
                "heaptrack_print": ["heaptrack_print", str(trace)]}
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    load_before = load_average()
    for r in range(rounds):
        order = list(commands)[r % len(commands):] + list(commands)[:r % len(commands)]  # rotated
        for name in order:
            out = work / f"{name.replace(' ', '_')}_{scale}x.out"
            results[name].append(measured(commands[name], out))
        log(f"{scale}x round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {results[n][-1][0]:.2f} s" for n in commands))
    load_after = load_average()
    check = cross_check(work / f"heaptype_report_{scale}x.out", work / f"heaptrack_print_{scale}x.out")
    medians = {name: (statistics.median(w for w, _ in runs), statistics.median(m for _, m in runs))
               for name, runs in results.items()}
    return {"scale": scale, "args": scaled_args(scale), "profile_bytes": htp.stat().st_size,
            "heaptrack_bytes": trace.stat().st_size, "medians": medians, "rounds": results,
            "load_before": load_before, "load_after": load_after, "cross_check": check}


def print_report(results: list[dict]) -> None:
    print("analysis of alloc_bench profiles: medians over interleaved rounds (GNU time)")
    for r in results:
        theirs_w, theirs_m = r["medians"]["heaptrack_print"]
        print(f"\n{r['scale']}x ({' '.join(r['args'])}), load average {r['load_before']} before, "
              f"{r['load_after']} after; profiles: HeapType {r['profile_bytes'] / 1e6:.1f} MB, "
              f"heaptrack {r['heaptrack_bytes'] / 1e6:.1f} MB (zstd)")
        print(f"  {'':18} {'wall':>8} {'peak RSS':>10}  {'x heaptrack_print (wall, RSS)':>30}")
        for name, (wall, rss) in r["medians"].items():
            print(f"  {name:18} {wall:7.2f}s {rss / 1024:8.1f} MiB  {wall / theirs_w:14.2f}x {rss / theirs_m:8.2f}x")
        print(f"  {r['cross_check']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, nargs="+", default=[10], help="multiples of the default size")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--cxx", default="g++")
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    opts = parser.parse_args(argv)
    require(TIME, "time")
    require("heaptrack", "heaptrack")
    require("heaptrack_print", "heaptrack")
    work = Path(tempfile.mkdtemp(prefix="heaptype-analysis-bench-"))
    try:
        plain, profiled = build(opts.source, work, opts.cxx)
        results = [bench_scale(scale, plain, profiled, work, opts.rounds) for scale in opts.scale]
    finally:
        if opts.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print_report(results)
    if opts.json:
        opts.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
