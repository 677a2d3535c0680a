#!/usr/bin/env python3
"""`heaptype run` on a program built without HeapType, beside heaptrack on the same binary.

Builds ../shared/bench/alloc_bench.cpp plain (g++ -O2 -g: no frame pointers, no HeapType
flags), then times, interleaved round by round, the plain program, the program with
HeapType's shared runtime preloaded (what `heaptype run` does for such a program:
call paths by frame rules learned from the unwinder, types inferred), and heaptrack.
Each tool also runs on `0 0 0 0`, so that its fixed start-up cost can be taken out:

  net ns per allocation = ((tool - tool on 0 0 0 0) - (plain - plain on 0 0 0 0)) / 2,300,127

The load average is printed before and after: figures taken on a loaded machine flatter
every profiler. Checks that HeapType's profile and heaptrack's trace both hold the
2,300,127 allocation calls. Standard library only.

Usage:  python bench/preload_bench.py [--rounds 5] [--json OUT]
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import heaptrack_launcher  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(REPO, "..", "shared", "bench", "alloc_bench.cpp")
ALLOCATIONS = 2_300_127  # malloc-level calls of the default run (../shared/bench/README.md)
EMPTY = ["0", "0", "0", "0"]


def heaptype_library() -> str:
    lib_dir = subprocess.run([sys.executable, "-m", "heaptype", "--lib-dir"], capture_output=True, text=True,
                             check=True).stdout.strip()
    return os.path.join(lib_dir, "libheaptype.so")


def commands(program: str, work: str) -> dict:
    """Each tool's command and environment; {args} is where the workload's arguments go."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_") and k != "LD_PRELOAD"}
    return {
        "plain": ([program], clean),
        "heaptype preloaded": ([program], {**clean, "LD_PRELOAD": heaptype_library(),
                                           "HEAPTYPE_OUTPUT": os.path.join(work, "preloaded.htp")}),
        "heaptrack": ([heaptrack_launcher(), "-o", os.path.join(work, "trace"), program], clean),
    }


def timed(command: list, env: dict, args: list) -> float:
    start = time.monotonic()
    subprocess.run(command + args, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def measure(tools: dict, rounds: int) -> dict:
    """Median wall seconds per tool, on the default and on the empty run, interleaved."""
    times = {name: {"full": [], "empty": []} for name in tools}
    for _ in range(rounds):
        for name, (command, env) in tools.items():
            times[name]["full"].append(timed(command, env, []))
            times[name]["empty"].append(timed(command, env, EMPTY))
    return {name: {kind: statistics.median(values) for kind, values in runs.items()} for name, runs in times.items()}


def heaptrack_calls(work: str) -> int:
    trace = next(f for f in os.listdir(work) if f.startswith("trace"))
    text = subprocess.run(["heaptrack_print", os.path.join(work, trace)], capture_output=True, text=True,
                          check=True).stdout
    return int(re.search(r"^calls to allocation functions: (\d+)", text, re.M).group(1))


def heaptype_calls(work: str) -> int:
    import heaptype

    return heaptype.load(os.path.join(work, "preloaded.htp")).totals.allocations


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    for tool in ("g++", "heaptrack", "heaptrack_print"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (apt-get install {'g++' if tool == 'g++' else 'heaptrack'})")
    with tempfile.TemporaryDirectory() as work:
        program = os.path.join(work, "alloc_bench_plain")
        subprocess.run(["g++", "-O2", "-g", SOURCE, "-o", program], check=True)
        before = load_average()
        tools = commands(program, work)
        medians = measure(tools, args.rounds)
        after = load_average()
        for name in ("heaptype preloaded", "heaptrack"):  # the last runs were the empty ones
            timed(*tools[name], [])
        counts = {"heaptype preloaded": heaptype_calls(work), "heaptrack": heaptrack_calls(work)}
    plain = medians["plain"]
    print(f"load average before: {before}; after: {after}; {args.rounds} rounds, medians")
    print(f"{'tool':<20} {'wall':>8} {'x plain':>8} {'net ns/alloc':>13} {'allocations':>12}")
    rows = []
    for name, m in medians.items():
        net = ((m["full"] - m["empty"]) - (plain["full"] - plain["empty"])) / ALLOCATIONS * 1e9
        row = {"tool": name, "wall_s": m["full"], "empty_s": m["empty"], "ratio": m["full"] / plain["full"],
               "net_ns_per_allocation": net if name != "plain" else None, "allocations": counts.get(name)}
        rows.append(row)
        print(f"{name:<20} {m['full']:>7.3f}s {row['ratio']:>7.2f}x "
              f"{'-' if name == 'plain' else f'{net:.0f}':>13} {row['allocations'] or '-':>12}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"load_before": before, "load_after": after, "rows": rows}, out, indent=2)
    wrong = {name: n for name, n in counts.items() if n != ALLOCATIONS}
    if wrong:
        print(f"allocation counts differ from {ALLOCATIONS:,}: {wrong}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
