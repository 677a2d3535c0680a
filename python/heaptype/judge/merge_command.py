"""``heaptype merge`` (a fleet's profiles joined: see analyze/fleet.py), and ``heaptype baseline
merge`` and ``heaptype results merge``: the files that the shards
of one budget run wrote (``pytest --heap-budget --heap-shard I/N`` on each runner),
joined into the files one full run writes: the baseline (``--heap-save-baseline``)
and the JSON results (``--heap-json``), for one CI summary.

Exit status: 0 merged, 2 bad input (an unreadable file, or a test that two inputs
hold with different figures). The verdicts are the shards' to report: a merge of
results with failed tests lists them and still exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from ..present.console import CommandError, warn

MERGE_EPILOG = """\
example (four CI runners, then one job that collects their files):
  pytest --heap-budget --heap-shard 2/4 --heap-baseline=shard-2.json --heap-save-baseline
  heaptype baseline merge shard-*.json -o heap-baseline.json
  pytest --heap-budget --heap-shard 2/4 --heap-baseline=heap-baseline.json --heap-json=results-2.json
  heaptype results merge results-*.json -o results.json --report "$GITHUB_STEP_SUMMARY"
"""


def add_merge_parsers(subparsers) -> None:
    """Adds `heaptype baseline merge` and `heaptype results merge` to the command's subparsers."""
    baseline = subparsers.add_parser("baseline", help="budget baselines: merge the baselines of a run's shards")
    baseline.set_defaults(handler=_help_of(baseline))
    merge = baseline.add_subparsers(metavar="action").add_parser(
        "merge", help="join shard baselines into one (as one full run saves it)", epilog=MERGE_EPILOG,
        description="Join the baselines that the shards of one run saved (pytest --heap-shard I/N\n"
                    "--heap-save-baseline) into the baseline one full run saves, byte for byte.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _inputs_and_output(merge, "baseline")
    merge.set_defaults(handler=cmd_baseline_merge)

    results = subparsers.add_parser("results", help="budget results (--heap-json): merge the results of a run's "
                                                    "shards")
    results.set_defaults(handler=_help_of(results))
    merge = results.add_subparsers(metavar="action").add_parser(
        "merge", help="join shard results into one (as one full run writes them)", epilog=MERGE_EPILOG,
        description="Join the --heap-json files of the shards of one run into the file one full run writes;\n"
                    "the warnings about budget patterns that matched in no test are worked out over all shards.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _inputs_and_output(merge, "results")
    merge.add_argument("--report", metavar="FILE.md",
                       help="also write the Markdown report of the merged run, as --heap-report does "
                            "(e.g. $GITHUB_STEP_SUMMARY)")
    merge.set_defaults(handler=cmd_results_merge)


FLEET_EPILOG = """\
example (one program on three hosts, each wrote its own profile):
  heaptype merge host1.htp host2.htp host3.htp            # per-type table, summed
  heaptype merge host*.htp --json -o fleet.json           # types and call paths
  heaptype export --format pprof host*.htp -o fleet.pb.gz # for pprof, Pyroscope, Parca
"""


def add_fleet_parser(subparsers) -> None:
    """Adds `heaptype merge P1.htp P2.htp ...`: the join of several processes of one program."""
    fleet = subparsers.add_parser(
        "merge", help="join the profiles of several processes of one program: figures summed by type and "
                      "call path", epilog=FLEET_EPILOG,
        description="Join profiles of one program's processes (each symbolized with its own module map)\n"
                    "by type name and call path. Allocations, bytes and live-at-exit figures are sums;\n"
                    "peaks are per process: the sum of the processes' peaks and the largest one.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    fleet.add_argument("profiles", nargs="+", metavar="FILE.htp", help="profiles of one program")
    fleet.add_argument("--json", action="store_true", help="JSON: types and call paths (default: a type table)")
    fleet.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    fleet.add_argument("--no-infer", dest="infer", action="store_false",
                       help="do not infer types of untyped allocations from allocator frames (as for report)")
    fleet.add_argument("--top", type=int, default=0, help="text: show only the first N types")
    fleet.add_argument("--map", action="append", default=[], metavar="[MODULE=]FILE",
                       help="linker map file for symbols (as for report)")
    fleet.set_defaults(handler=cmd_fleet_merge)


def cmd_fleet_merge(args) -> int:
    from ..analyze import fleet
    from ..analyze.profile import ProfileError
    from ..cli import parse_map_options
    from ..present.console import load_profile

    if args.output and args.output.endswith(".htp"):
        # Read back as a profile, the table failed with "not a HeapType profile".
        raise CommandError(f"merge: {args.output}: merge writes a table (or JSON with --json), not a profile: "
                           "name the output .txt or .json; for one profile of every process, "
                           "`heaptype export --format pprof` reads them all")
    map_files = parse_map_options(args.map) or None
    try:
        profiles = fleet.load_fleet(args.profiles, lambda path: load_profile(path, map_files))
        text = (json.dumps(fleet.as_json(profiles, infer=args.infer), indent=1) if args.json
                else "\n".join(fleet.type_table(profiles, top=args.top, infer=args.infer)))
    except ProfileError as e:
        raise CommandError(f"merge: {e}") from None
    if args.output and args.output != "-":
        _write(Path(args.output), text)
        print(f"heaptype: {_count(len(profiles), 'profile')} joined -> {args.output}")
    else:
        print(text)
    return 0


def _help_of(parser: argparse.ArgumentParser):
    """The handler of a command given without its action: its help, exit status 2."""
    def show(args) -> int:
        parser.print_help()
        return 2
    return show


def _inputs_and_output(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("inputs", nargs="+", metavar="FILE", help=f"the shards' {what} files (JSON)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help=f"the merged {what} file to write")


def cmd_baseline_merge(args) -> int:
    from .. import budget as hb  # here, not at the top: every command's parser adds this one
    try:
        merged = hb.merge_baselines(args.inputs, args.output)
    except hb.BudgetError as e:
        raise CommandError(f"baseline merge: {e}") from None
    for note in merged.notes:
        warn(note)
    merged.save()
    print(f"heaptype: {_count(len(merged.tests), 'test')} from {_count(len(args.inputs), 'baseline')} "
          f"-> {args.output}")
    return 0


def cmd_results_merge(args) -> int:
    from .. import budget as hb
    from . import budget_outputs as outputs
    try:
        text = outputs.merge_results([Path(path) for path in args.inputs])
    except hb.BudgetError as e:
        raise CommandError(f"results merge: {e}") from None
    _write(Path(args.output), text)
    if args.report:
        _write(Path(args.report), "\n".join(outputs.results_markdown(text)), append=_is_step_summary(args.report))
    data = json.loads(text)
    for message in data["warnings"]:
        warn(message)
    failed = [entry["test"] for entry in data["tests"] if not entry["passed"]]
    listed = ", ".join(failed[:10]) + (f" and {len(failed) - 10} more" if len(failed) > 10 else "")
    verdict = f"{len(failed)} failed: {listed}" if failed else "all within budget"
    print(f"heaptype: {_count(len(data['tests']), 'test')} from {_count(len(args.inputs), 'results file')}, "
          f"{verdict} -> {args.output}")
    return 0


def _is_step_summary(path: str) -> bool:
    """GitHub's job summary file collects what every step appends: never overwrite it."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    return bool(summary) and Path(summary).resolve() == Path(path).resolve()


def _write(path: Path, text: str, append: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a" if append else "w", encoding="utf-8") as out:
        out.write(text if text.endswith("\n") else text + "\n")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
