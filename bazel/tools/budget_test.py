"""The body of every heaptype_budget_test: profile a program, then check its heap budget.

    budget_test.py --runfiles DIR --label LABEL --binary PATH --budget PATH [--test NAME] [--gtest-split] -- ARGS...

PATH arguments are relative to the runfiles directory. The program runs in the current
directory (the test's workspace runfiles, as for a cc_test) through the runner that
`pytest --heap-budget` and the CTest helper use (heaptype.run.runner.run_for_budget: the
caller's HEAPTYPE_* settings are dropped). Then `heaptype report` and `heaptype check`
(the package's one budget engine) read the profile. The profile, the report and the verdict are written to
$TEST_UNDECLARED_OUTPUTS_DIR; the verdict is printed, so it is in the test log.

With --gtest-split (heaptype_budget_test's gtest_split, on by default), a GoogleTest
program (unless its arguments hold --gtest_filter) is checked case by case:
each case runs on its own (--gtest_filter=Suite.Case) and is checked as the budget
file's test `NAME[Suite.Case]`, which also gets the budgets of NAME (the test_name, else
the rule's name), as `[ctest] gtest_split` does. With a shard_count, Bazel's shard
TEST_SHARD_INDEX checks the cases GoogleTest itself would give it (the n-th case goes to
shard n % count), so the shards together check exactly the cases of one unsharded run;
another program is checked whole by the first shard.

Exit status: that of `heaptype check` when it is not 0 (1 over budget, 2 bad budget
file or profile), else the program's own when it failed, else 0; over several cases, the
worst of theirs.
"""

from __future__ import annotations

import argparse
import glob
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

from heaptype.judge.check_command import judged_by_counts  # PYTHONPATH: the package's files
from heaptype.run.gtest import GTEST_SHARDING_VARIABLES, ListError, is_gtest_program, list_gtest_cases, shard_cases
from heaptype.run.runner import RunError, run_for_budget


def heaptype_command(*args: str) -> list[str]:
    """The installed package's command line, run by this interpreter with this sys.path
    (PYTHONPATH: the declared package files, no site-packages when run with -S)."""
    return [sys.executable, *(["-S"] if sys.flags.no_site else []), "-m", "heaptype", *args]


def outputs_dir(label: str) -> Path:
    declared = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if declared:
        path = Path(declared)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path(tempfile.mkdtemp(prefix="heaptype-budget-"))
    print(f"{label}: not run by `bazel test`: outputs go to {path}", file=sys.stderr)
    return path


def where_outputs_go(label: str, out: Path) -> str:
    """Where the user finds the outputs after the test: under bazel-testlogs for
    `bazel test` (in outputs.zip unless --nozip_undeclared_test_outputs), else `out`."""
    if "TEST_UNDECLARED_OUTPUTS_DIR" not in os.environ:
        return str(out)
    package, _, name = label.partition("//")[2].partition(":")
    where = "/".join(part for part in (package, name) if part)
    return f"bazel-testlogs/{where}/test.outputs/"


def describe_status(status: int) -> str:
    return f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"


def announce_sharding() -> tuple[int, int]:
    """(shard index, shard count) of this run: (0, 1) unless the test has a shard_count.
    Touching TEST_SHARD_STATUS_FILE tells Bazel the test shards itself. The program's
    cases are dealt out here, so the program must not shard them again: GoogleTest's
    variables (test-setup.sh exports them) are dropped for it."""
    status_file = os.environ.get("TEST_SHARD_STATUS_FILE")
    if status_file:
        Path(status_file).touch()
    for variable in GTEST_SHARDING_VARIABLES:
        os.environ.pop(variable, None)
    total = int(os.environ.get("TEST_TOTAL_SHARDS") or 1)
    index = int(os.environ.get("TEST_SHARD_INDEX") or 0)
    return index, total


def gtest_cases(binary: Path, args: list[str], split: bool) -> list[str] | None:
    """The cases of a GoogleTest program, each checked on its own; None (one run) unless
    `split`, for another program, and for one whose arguments already choose cases."""
    if not split or any(arg.startswith("--gtest_filter") for arg in args) or not is_gtest_program(binary):
        return None
    return list_gtest_cases([str(binary), *args], None, {})


def check_run(label: str, binary: Path, shown: str, args: list[str], name: str, budget: Path,
              test_name: str | None, out: Path) -> int:
    """Run `binary args` under HeapType (profile <name>.htp in `out`), write its report
    and its verdict (<name>.report.txt, <name>.budget.txt) there, print the verdict.
    Exit status: that of `heaptype check` when it is not 0, else the program's."""
    profile = out / f"{name}.htp"
    for stale in out.glob(f"{glob.escape(name)}.htp*"):
        stale.unlink()

    print(f"{label}: running {shlex.join([shown, *args])} under HeapType", flush=True)
    try:
        # as pytest --heap-budget runs it: counts per call site first (docs/aggregate.md),
        # events when the check needs them
        run = run_for_budget([str(binary), *args], output=profile, aggregate=True)
        if run.profile_path is not None and not judged_by_counts(str(run.profile_path), str(budget), test_name):
            print(f"{label}: the counts cannot judge this budget: running {shown} again, recording events",
                  flush=True)
            run = run_for_budget([str(binary), *args], output=profile)
    except RunError as error:
        print(f"{label}: cannot run {shown}: {error}", file=sys.stderr)
        return 2
    status = run.returncode
    if run.profile_path is None:
        print(f"{label}: {shown} {describe_status(status)} and wrote no profile: build it with HeapType "
              "(heaptype_cc_binary, or --config=heaptype from heaptype.bazelrc)", file=sys.stderr)
        return run.exit_status or 2
    if status != 0:
        print(f"{label}: {shown} {describe_status(status)}", file=sys.stderr)

    # Run in the outputs directory with relative names: what the verdict says of the
    # profile ("profile kept: NAME.htp") is then true of the test's outputs as well.
    report = subprocess.run(heaptype_command("report", profile.name),
                            capture_output=True, text=True, cwd=out)
    (out / f"{name}.report.txt").write_text(without_machine_paths(report.stdout + report.stderr, binary, shown))

    check_args = ["check", profile.name, "--budget", str(budget.absolute())]
    if test_name:
        check_args += ["--test", test_name]
    check = subprocess.run(heaptype_command(*check_args), capture_output=True, text=True, cwd=out)
    verdict = check.stdout + check.stderr
    (out / f"{name}.budget.txt").write_text(verdict)
    sys.stdout.write(verdict)
    sys.stdout.flush()
    return check.returncode or run.exit_status


def write_test_xml(label: str, results: dict[str, int], out: Path) -> None:
    """The JUnit XML Bazel asks for in $XML_OUTPUT_FILE: one <testcase> per check (a
    GoogleTest case, or the whole program), the verdict as a failure's text. No times:
    without this file Bazel writes one itself, naming the test's duration in the
    command, an action no cache can serve."""
    destination = os.environ.get("XML_OUTPUT_FILE")
    if not destination:
        return
    suite = ElementTree.Element("testsuite", name=label, tests=str(len(results)),
                                failures=str(sum(1 for status in results.values() if status != 0)))
    for name, status in results.items():
        case = ElementTree.SubElement(suite, "testcase", name=name, classname=label)
        if status != 0:
            verdict = out / f"{name}.budget.txt"
            failure = ElementTree.SubElement(case, "failure", message=f"exit status {status}")
            failure.text = verdict.read_text() if verdict.is_file() else f"{name}: exit status {status}"
    suites = ElementTree.Element("testsuites")
    suites.append(suite)
    ElementTree.ElementTree(suites).write(destination, encoding="UTF-8", xml_declaration=True)


def without_machine_paths(text: str, binary: Path, shown: str) -> str:
    """`text` with the program named by its runfiles path, not by the sandbox's absolute
    path: the test's outputs go to shared caches, and must not say where they were made."""
    return text.replace(str(binary), shown)


def worst(statuses: list[int]) -> int:
    """A bad budget file or profile (2) before over budget (1) before a failed program."""
    failed = [s for s in statuses if s != 0]
    for wanted in (2, 1):
        if wanted in failed:
            return wanted
    return failed[0] if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runfiles", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--budget", required=True)
    parser.add_argument("--test", dest="test_name")
    parser.add_argument("--gtest-split", action="store_true", help="check a GoogleTest program case by case")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args

    runfiles = Path(options.runfiles)
    binary = runfiles / options.binary
    budget = runfiles / options.budget
    label = options.label
    name = label.rsplit(":", 1)[-1]
    index, total = announce_sharding()
    try:
        cases = gtest_cases(binary, args, options.gtest_split)
    except ListError as error:
        print(f"{label}: {error}", file=sys.stderr)
        return 2
    out = outputs_dir(label)

    if cases is None:
        if index != 0:
            print(f"{label}: shard {index + 1} of {total}: {options.binary} is checked whole, by shard 1")
            write_test_xml(label, {}, out)
            return 0
        status = check_run(label, binary, options.binary, args, name, budget, options.test_name, out)
        write_test_xml(label, {name: status}, out)
        print(f"{label}: {name}.htp (the profile), {name}.report.txt and {name}.budget.txt are in "
              f"{where_outputs_go(label, out)}")
        return status

    mine = shard_cases(cases, index, total)
    shard = f"shard {index + 1} of {total}: " if total > 1 else ""
    print(f"{label}: {shard}{len(mine)} of the {len(cases)} GoogleTest cases of {options.binary}, each checked "
          "on its own", flush=True)
    base = options.test_name or name
    statuses = {case: check_run(label, binary, options.binary, [*args, f"--gtest_filter={case}"], f"{name}[{case}]",
                                budget, f"{base}[{case}]", out) for case in mine}
    write_test_xml(label, {f"{name}[{case}]": status for case, status in statuses.items()}, out)
    failed = [case for case, status in statuses.items() if status != 0]
    print(f"{label}: {shard}{len(mine) - len(failed)} of {len(mine)} cases passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    print(f"{label}: NAME[CASE].htp (the profiles), .report.txt and .budget.txt are in "
          f"{where_outputs_go(label, out)}")
    return worst(list(statuses.values()))


if __name__ == "__main__":
    raise SystemExit(main())
