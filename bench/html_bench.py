#!/usr/bin/env python3
"""The HTML report of a heavy profile: how long `heaptype html` takes, how large the
page is, and how long headless Chromium takes to open and draw it.

Profiles the shared workload (../shared/bench/alloc_bench.cpp) with the issue's
arguments, 20000000 2000000 5 1000000 (23M allocations), unless --profile names an
existing profile; then writes its page and opens it --rounds times in Debian's
chromium (playwright, executable path set). "open" is the page's own clock: from
navigation start to the end of its first drawing (body[data-ready-ms]), plus the
wall time of the load as playwright sees it. The load average is recorded before
and after: figures taken on a busy machine are slower. No pass/fail thresholds
(the issue's bars: at most 5 MB, open within 2 s).

Usage:  python bench/html_bench.py [--profile P] [--rounds 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "bench" / "alloc_bench.cpp"
HEAVY_ARGS = ["20000000", "2000000", "5", "1000000"]


def heaptype(*args: str) -> list[str]:
    path = shutil.which("heaptype")
    return [path, *args] if path else [sys.executable, "-m", "heaptype", *args]


def heavy_profile(workdir: Path) -> Path:
    from heaptype.capture import flags

    binary, profile = workdir / "alloc_bench", workdir / "alloc_bench.htp"
    subprocess.run(["g++", "-std=c++17", "-O2", "-g", *flags.compile_flags(), str(SOURCE), *flags.link_flags(),
                    "-o", str(binary)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    subprocess.run([str(binary), *HEAVY_ARGS], check=True, env=dict(env, HEAPTYPE_OUTPUT=str(profile)),
                   stderr=subprocess.DEVNULL)
    return profile


def open_times(page: Path, rounds: int) -> tuple[list[float], list[float]]:
    """(the page's drawing time, playwright's load wall time) per round, in seconds."""
    from playwright.sync_api import sync_playwright

    drawn, wall = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        for _ in range(rounds):
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            start = time.perf_counter()
            tab.goto(page.resolve().as_uri())
            tab.wait_for_selector("body[data-ready='1']", timeout=60000)
            wall.append(time.perf_counter() - start)
            drawn.append(float(tab.get_attribute("body", "data-ready-ms")) / 1000)
            tab.close()
        browser.close()
    return drawn, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", help="an existing profile (default: profile the workload with the issue's args)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="heaptype-html-bench-"))
    load_before = os.getloadavg()
    profile = Path(args.profile) if args.profile else heavy_profile(workdir)
    page = workdir / "report.html"
    start = time.perf_counter()
    subprocess.run(heaptype("html", str(profile), "-o", str(page)), check=True, stderr=subprocess.DEVNULL)
    write_seconds = time.perf_counter() - start
    drawn, wall = open_times(page, args.rounds)
    result = {
        "profile": str(profile), "profile_bytes": profile.stat().st_size,
        "write_seconds": round(write_seconds, 2), "page_bytes": page.stat().st_size,
        "open_drawn_seconds_median": round(statistics.median(drawn), 3),
        "open_wall_seconds_median": round(statistics.median(wall), 3),
        "open_drawn_seconds": [round(d, 3) for d in drawn], "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    if not args.profile:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
