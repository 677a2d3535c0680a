#!/usr/bin/env python3
"""The guest-safety long run: TinyXML-2 parsing a large document, hundreds of times per mode.

The CI suite (tests/guest_safety) makes a few runs of a 2 MiB document per mode; a
runtime fault that shows in 1 run in 100 needs this. Builds tests/guest_safety/xml_driver.cpp
with TinyXML-2 9.0.0 (downloaded once from PyPI's pytinyxml2 sdist) in each mode (plain;
g++ with `heaptype --cflags` in the frame-pointer, instrument and none call-stack modes;
Clang 22 of the ziglang wheel in the type-aware mode; the plain build under `heaptype run`),
runs the modes round-robin --runs times each, and compares every run with the plain
build's first run: exit status, stdout, stderr and the files written, byte for byte.

Prints, per mode: runs, the exit statuses seen, the sha256 of the plain output (all of it:
status, streams, files) and how many runs matched it, wall time. Runs that differ keep
their output under WORKDIR/failures/. Ctrl-C prints the summary of the runs made so far.
Exit status 1 when any run differed.

Usage:  python bench/guest_safety.py [--runs 600] [--size-mib 20] [--modes plain,frame-pointer,...]
                                     [--seed 22] [--jobs 1] [--workdir DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "guest_safety")]
import guest_runs  # noqa: E402
from real_programs import tinyxml2_source  # noqa: E402


@dataclass
class Tally:
    """What one mode's runs did."""

    runs: int = 0
    matched: int = 0
    statuses: collections.Counter = field(default_factory=collections.Counter)
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)  # directories holding differing runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=600, help="runs per mode (600)")
    parser.add_argument("--size-mib", type=int, default=20, help="size of the generated document (20 MiB)")
    parser.add_argument("--seed", type=int, default=22, help="the document's seed (22)")
    parser.add_argument("--modes", default=",".join(guest_runs.XML_MODES),
                        help=f"comma-separated, from {', '.join(guest_runs.XML_MODES)} (all)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time (1)")
    parser.add_argument("--workdir", type=Path, help="builds, runs and failures (a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here (rewritten as the runs go)")
    args = parser.parse_args(argv)
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = set(args.modes) - set(guest_runs.XML_MODES)
    if unknown:
        parser.error(f"unknown mode(s) {', '.join(sorted(unknown))}")
    return args


def build_all(modes: list[str], tinyxml2: Path, workdir: Path) -> dict[str, Path]:
    """Each mode's program; the preload mode runs the plain build."""
    built: dict[str, Path] = {}
    for mode in ["plain", *modes]:
        name = guest_runs.build_name(mode)
        if name not in built:
            start = time.monotonic()
            built[name] = guest_runs.build_xml_driver(mode, tinyxml2, workdir / "builds")
            print(f"built {name} in {time.monotonic() - start:.1f} s", flush=True)
    return {mode: built[guest_runs.build_name(mode)] for mode in ["plain", *modes]}


def keep_failure(workdir: Path, mode: str, index: int, outcome: guest_runs.Outcome, rundir: Path,
                 reference: guest_runs.Outcome) -> Path:
    """Moves a differing run's directory to WORKDIR/failures/ with its streams and what differs."""
    kept = workdir / "failures" / f"{mode}-{index}"
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(rundir), kept)
    (kept / "stdout").write_bytes(outcome.stdout)
    (kept / "stderr").write_bytes(outcome.stderr)
    (kept / "differences.txt").write_text("\n\n".join(outcome.differences(reference)) + "\n")
    return kept


def one_run(args, workdir: Path, programs: dict[str, Path], reference: guest_runs.Outcome, mode: str,
            index: int) -> tuple[str, guest_runs.Outcome, float, Path | None]:
    rundir = workdir / "runs" / f"{mode}-{index}"
    profile = workdir / "profiles" / f"{mode}-{index}.htp"
    start = time.monotonic()
    outcome = guest_runs.run_xml_driver(mode, programs[mode], args.seed, args.size_mib * 1024, rundir, profile)
    seconds = time.monotonic() - start
    kept = None
    if outcome.digest() != reference.digest():
        kept = keep_failure(workdir, mode, index, outcome, rundir, reference)
        if profile.exists():
            shutil.move(str(profile), kept / "profile.htp")
    shutil.rmtree(rundir, ignore_errors=True)
    profile.unlink(missing_ok=True)
    return mode, outcome, seconds, kept


def progress_line(done: int, total: int, tallies: dict[str, Tally], started: float) -> str:
    parts = [f"{mode} {t.matched}/{t.runs}" for mode, t in tallies.items()]
    return f"[{done}/{total}, {time.monotonic() - started:.0f} s] " + ", ".join(parts)


def write_json(args, reference: guest_runs.Outcome, tallies: dict[str, Tally]) -> None:
    """The summary as JSON, when asked for: rewritten at each progress line, so that a long
    run that is killed still leaves its figures."""
    if not args.json:
        return
    summary = {"size_mib": args.size_mib, "seed": args.seed, "plain_sha256": reference.digest(),
               "modes": {mode: {"runs": t.runs, "matched": t.matched, "exit_statuses": dict(t.statuses),
                                "wall_seconds": round(t.seconds, 1), "failures": t.failures}
                         for mode, t in tallies.items()}}
    partial = args.json.with_name(args.json.name + ".partial")
    partial.write_text(json.dumps(summary, indent=2) + "\n")
    partial.replace(args.json)


def run_all(args, workdir: Path, programs: dict[str, Path], reference: guest_runs.Outcome) -> dict[str, Tally]:
    """Every mode --runs times, round-robin (so that the machine's load falls on all alike)."""
    (workdir / "profiles").mkdir(parents=True, exist_ok=True)
    tallies = {mode: Tally() for mode in args.modes}
    tasks = [(mode, index) for index in range(args.runs) for mode in args.modes]
    started = time.monotonic()
    every = max(1, len(tasks) // 100)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(one_run, args, workdir, programs, reference, mode, index) for mode, index in tasks]
        try:
            for done, future in enumerate(futures, 1):
                mode, outcome, seconds, kept = future.result()
                tally = tallies[mode]
                tally.runs += 1
                tally.matched += kept is None
                tally.statuses[guest_runs.describe_status(outcome.returncode)] += 1
                tally.seconds += seconds
                if kept is not None:
                    tally.failures.append(str(kept))
                    print(f"{mode} run {tally.runs}: DIFFERS ({guest_runs.describe_status(outcome.returncode)}), "
                          f"kept in {kept}", flush=True)
                if done % every == 0 or done == len(tasks):
                    print(progress_line(done, len(tasks), tallies, started), flush=True)
                    write_json(args, reference, tallies)
        except KeyboardInterrupt:
            print("interrupted: the summary of the runs made so far", flush=True)
            for future in futures:
                future.cancel()
    return tallies


def summary_lines(args, reference: guest_runs.Outcome, tallies: dict[str, Tally]) -> list[str]:
    checksum = next((line for line in reference.stdout.decode().splitlines() if line.startswith("printed:")), "")
    lines = [f"document: {args.size_mib} MiB, seed {args.seed}; plain output sha256 {reference.digest()}",
             f"plain program says: {checksum}",
             f"{'mode':<14} {'runs':>5} {'matched':>8}  {'wall s':>8}  exit statuses"]
    for mode, t in tallies.items():
        statuses = ", ".join(f"{status} x{count}" for status, count in sorted(t.statuses.items()))
        lines.append(f"{mode:<14} {t.runs:>5} {t.matched:>8}  {t.seconds:>8.1f}  {statuses}")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="heaptype-guest-safety-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"working in {workdir}", flush=True)
    (workdir / "sources").mkdir(exist_ok=True)
    programs = build_all(args.modes, tinyxml2_source(workdir / "sources"), workdir)
    reference = guest_runs.run_xml_driver("plain", programs["plain"], args.seed, args.size_mib * 1024,
                                          workdir / "runs" / "reference", workdir / "unused.htp")
    if reference.returncode != 0:
        print(f"the plain reference run failed:\n{reference.stdout.decode()}{reference.stderr.decode()}")
        return 2
    shutil.rmtree(workdir / "runs" / "reference")
    tallies = run_all(args, workdir, programs, reference)
    lines = summary_lines(args, reference, tallies)
    print("\n".join(lines))
    write_json(args, reference, tallies)
    return 0 if all(t.matched == t.runs for t in tallies.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
