"""Running a program with profiling on, for a budget item or the heap_profile
fixture: what to run (``RunSpec``) and what came of it (``HeapRun``)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..budget.session import SessionNames
from ..run.runner import NOT_INSTRUMENTED_FIX, RunError, exit_text, run_for_budget, script_path

if TYPE_CHECKING:
    from .fixtures import FixtureRoles
    from .locks import TestLocks


@dataclass
class RunSpec:
    """What to run for one budget item."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    expect: int | str = 0          # the exit status expected, or "nonzero" (CTest WILL_FAIL)
    where: str = ""
    ctest_test: str | None = None  # the CTest test it runs, for [ctest] items
    locks: TestLocks | None = None  # CTest's RESOURCE_LOCK and RUN_SERIAL (locks.py)
    fixtures: FixtureRoles | None = None  # CTest's FIXTURES_* (fixtures.py)


class RunProblem(Exception):
    """The program could not be run or wrote no usable profile: the message says why
    and what to do, and becomes the test's failure text as it is."""


def resolve_command(command: list[str], base: Path) -> list[str]:
    """Paths in a budget file are relative to the file: a program given with a slash is
    looked up there; a bare name on PATH, then beside the file."""
    program = command[0]
    if "/" in program:
        return [os.path.abspath(base / program)] + command[1:]
    found = shutil.which(program) or (str(base / program) if (base / program).exists() else program)
    return [found] + command[1:]


@dataclass
class HeapRun:
    """One profiled run: the exit status, the output, and the profile it wrote."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    profile_path: Path | None
    duration: float
    timed_out: bool = False
    name: str = ""
    timeout: float | None = None
    expect: Any = 0                # exit status expected: a number, "nonzero", or None (not judged)
    names: SessionNames | None = None  # the session's per-binary tables
    runtime_messages: str = ""     # what the runtime said (it writes nothing into the program's output)
    ctest_test: str | None = None  # the CTest test it ran, for [ctest] items
    _profile: Any = None

    @property
    def profile(self):
        """The loaded profile (heaptype.Profile)."""
        if self._profile is None:
            if self.profile_path is None:
                raise RunProblem(no_profile_text(self, self.ctest_test))
            self._profile = load_profile(self.profile_path, self.names)
        return self._profile

    @property
    def crashed(self) -> bool:
        return self.returncode < 0


def run_program(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float | None,
                out_dir: Path, name: str = "", names: SessionNames | None = None,
                call_paths: bool = True, aggregate: bool = False) -> HeapRun:
    """Run a command with profiling on (heaptype.run.runner.run_for_budget, as the CTest
    helper and the Bazel budget test do); the profile lands in ``out_dir``. ``aggregate``:
    counts per call site, no events (see run_for_budget)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    try:
        done = run_for_budget(command, output=out_dir / "%e.%p.htp", cwd=cwd, env=env, timeout=timeout, capture=True,
                              call_paths=call_paths, aggregate=aggregate)
    except RunError as e:
        raise RunProblem(str(e)) from None
    return HeapRun(done.command, done.returncode, done.stdout or "", done.stderr or "", done.profile_path,
                   done.duration, done.timed_out, name, timeout, names=names,
                   runtime_messages="".join(line + "\n" for line in done.runtime_messages))


# The runtime's note at the end of an aggregated run whose threads often found the
# counts' lock taken (src/runtime/aggregate.cpp, aggregate_note_waiting).
COUNTS_WAITED = "of the counts waited for another thread's"


def counts_waited(run: HeapRun) -> bool:
    """The run was aggregated and its threads waited for each other's counts: the same
    program runs faster recording events (docs/aggregate.md)."""
    return COUNTS_WAITED in run.runtime_messages


def no_profile_text(run: HeapRun, ctest_test: str | None = None) -> str:
    status = f" ({exit_text(run.returncode)})" if run.returncode else ""
    if script := script_path(run.command[0]):
        text = (f"{run.command[0]} wrote no profile{status}: it is a script ({script}), and a budget judges one "
                "process of a program built with HeapType, not what a script starts. Fix: make the program the "
                "script runs the test's command")
    else:
        text = (f"{run.command[0]} wrote no profile{status}: it is not built with HeapType, or it did not start. "
                f"Fix: {NOT_INSTRUMENTED_FIX}")
    if ctest_test:  # a suite's checks often run tools (cmake -P, a script): not the project's programs
        text += f"; or, if this CTest test runs no program of yours, leave it out: [ctest] exclude = [\"{ctest_test}\"]"
    return text


def load_profile(path: Path, names: SessionNames | None = None):
    from ..analyze.profile import ProfileError

    try:
        return (names or SessionNames()).load(path)
    except ProfileError as e:
        raise RunProblem(f"cannot read the profile: {e}") from None


def safe_name(nodeid: str) -> str:
    """A file or directory name for a test id (or a CTest resource name): readable, and
    unique thanks to a short hash."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.split("::")[-1])[:60].strip("._") or "test"
    return f"{stem}-{hashlib.sha1(nodeid.encode()).hexdigest()[:8]}"
