"""The body of every heaptype_budget_test: profile a program, then check its heap budget.

    budget_test.py --runfiles DIR --label LABEL --binary PATH --budget PATH [--test NAME] -- ARGS...

PATH arguments are relative to the runfiles directory. The program runs in the current
directory (the test's workspace runfiles, as for a cc_test) through the runner that
`pytest --heap-budget` and the CTest helper use (heaptype.runner.run_for_budget: the
caller's HEAPTYPE_* settings are dropped). Then `heaptype report` and `heaptype check`
(the package's one budget engine) read the profile. The profile, the report and the verdict are written to
$TEST_UNDECLARED_OUTPUTS_DIR; the verdict is printed, so it is in the test log.

Exit status: that of `heaptype check` when it is not 0 (1 over budget, 2 bad budget
file or profile), else the program's own when it failed, else 0.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runfiles", required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--budget", required=True)
    parser.add_argument("--test", dest="test_name")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args

    from heaptype.runner import RunError, run_for_budget  # PYTHONPATH: the package's files

    runfiles = Path(options.runfiles)
    binary = runfiles / options.binary
    budget = runfiles / options.budget
    label = options.label
    name = label.rsplit(":", 1)[-1]
    out = outputs_dir(label)
    profile = out / f"{name}.htp"
    for stale in out.glob(f"{name}.htp*"):
        stale.unlink()

    print(f"{label}: running {shlex.join([options.binary, *args])} under HeapType", flush=True)
    try:
        run = run_for_budget([str(binary), *args], output=profile)  # as pytest --heap-budget runs it
    except RunError as error:
        print(f"{label}: cannot run {options.binary}: {error}", file=sys.stderr)
        return 2
    status = run.returncode
    if run.profile_path is None:
        print(f"{label}: {options.binary} {describe_status(status)} and wrote no profile: build it with HeapType "
              "(heaptype_cc_binary, or --config=heaptype from heaptype.bazelrc)", file=sys.stderr)
        return run.exit_status or 2
    if status != 0:
        print(f"{label}: {options.binary} {describe_status(status)}", file=sys.stderr)

    # Run in the outputs directory with relative names: what the verdict says of the
    # profile ("profile kept: NAME.htp") is then true of the test's outputs as well.
    report = subprocess.run(heaptype_command("report", profile.name),
                            capture_output=True, text=True, cwd=out)
    (out / f"{name}.report.txt").write_text(report.stdout + report.stderr)

    check_args = ["check", profile.name, "--budget", str(budget.absolute())]
    if options.test_name:
        check_args += ["--test", options.test_name]
    check = subprocess.run(heaptype_command(*check_args), capture_output=True, text=True, cwd=out)
    verdict = check.stdout + check.stderr
    (out / f"{name}.budget.txt").write_text(verdict)
    sys.stdout.write(verdict)
    print(f"{label}: {name}.htp (the profile), {name}.report.txt and {name}.budget.txt are in "
          f"{where_outputs_go(label, out)}")
    sys.stdout.flush()
    if check.returncode != 0:
        return check.returncode
    return run.exit_status


if __name__ == "__main__":
    raise SystemExit(main())
