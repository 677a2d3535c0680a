"""pytest plugin: heap budgets per C++ type, and regression thresholds, in CI.

Registered through the ``pytest11`` entry point, so installing heaptype is enough.
Nothing happens unless asked:

- ``pytest --heap-budget`` turns the tests of a budget file (``heap-budget.toml``, or
  ``[tool.heaptype]`` in ``pyproject.toml``; ``--heap-budget-file`` names another) into
  pytest items: each runs a native program with profiling on and checks its budgets.
  ``[ctest]`` in that file turns the tests of a CMake build tree into items too.
- the ``heap_profile`` fixture runs native programs from Python tests, and the
  ``heap_budget(...)`` marker sets budgets for what they allocate.
- ``heap_budget(...)`` on a test without the fixture budgets the native code the test
  calls in this process, when the HeapType runtime is loaded here (``inprocess``).
- ``--heap-baseline FILE`` compares every measured test with stored figures,
  ``--heap-compare-fail peak:5%`` fails the tests that grew past a threshold, and
  ``--heap-save-baseline`` writes the figures of this run.

Measurements travel on the test reports (``report.heaptype``, one JSON text: xdist's
serializer walks every object of a report in Python), so the end-of-run
summary, the report files, the baseline and the warnings about budget patterns are
written once, by the process that sees every report: the xdist controller under
``pytest -n`` (``budget_outputs``). The budget logic itself lives in ``heaptype.budget``,
shared with ``heaptype check`` and Bazel; per-binary work (a test binary's type names)
is done once per process (``heaptype.budget.session``).
"""

from __future__ import annotations

import dataclasses
import fcntl
import gc
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from . import budget as hb
from . import budget_outputs as outputs
from .budget.failure_page import with_failure_page
from .budget.session import SessionNames
from .inprocess import InProcessRuntime, TestWindow
from .runner import NOT_INSTRUMENTED_FIX, RunError, exit_text, run_for_budget

GTEST_MARKER = b"gtest_list_tests"
LIST_TIMEOUT = 120


# --- options and state --------------------------------------------------------------------

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("heaptype", "heap budgets per C++ type (HeapType)")
    group.addoption("--heap-budget", action="store_true", default=False,
                    help="run the tests of the budget file (heap-budget.toml, or [tool.heaptype] in "
                         "pyproject.toml, in the rootdir) with profiling on and check their budgets")
    group.addoption("--heap-budget-file", metavar="FILE", default=None,
                    help="the budget file to use (implies --heap-budget)")
    group.addoption("--heap-profile-dir", metavar="DIR", default=None,
                    help="keep the profiles here (default: heaptype-profiles in pytest's temporary directory)")
    group.addoption("--heap-baseline", metavar="FILE", default=None,
                    help="JSON file of stored figures: compare every measured test with it")
    group.addoption("--heap-save-baseline", action="store_true", default=False,
                    help="rewrite the --heap-baseline file with this run's figures (the totals, the budgeted "
                         "types and the top types of each test)")
    group.addoption("--heap-compare-fail", metavar="FIELD:AMOUNT", action="append", default=[],
                    help="fail a test whose FIELD (peak, bytes, allocations, leaked) grew over the baseline "
                         "by more than AMOUNT: a percentage (peak:5%%) or an amount (bytes:1MiB); repeatable")
    group.addoption("--heap-baseline-top", metavar="N", type=int, default=None,
                    help=f"types per test a saved baseline keeps besides the budgeted ones and the totals "
                         f"(default {hb.BASELINE_TOP})")
    group.addoption("--heap-default-peak", metavar="SIZE", default=None,
                    help="a (total) peak limit for every test that sets none of its own, e.g. 256MiB")
    group.addoption("--heap-leaks", action="store_true", default=False,
                    help="leaked = 0 for every typed row of every test that sets no leaked limit of its own")
    group.addoption("--heap-summary", choices=("auto", "no"), default="auto",
                    help="the end-of-run heap summary table (default: auto, when anything was measured)")
    group.addoption("--heap-summary-rows", metavar="N", type=int, default=20,
                    help="rows of the summary table: the failing rows, then those closest to their limits "
                         "(default 20; the report files hold every row)")
    group.addoption("--heap-report", metavar="FILE.md", default=None,
                    help="write every verdict, failure and baseline change as Markdown (e.g. $GITHUB_STEP_SUMMARY)")
    group.addoption("--heap-json", metavar="FILE", default=None,
                    help="write every measured test's figures, verdict and failure text as JSON")
    group.addoption("--heap-full-names", action="store_true", default=False,
                    help="show template names whole in failure texts (by default long argument lists fold to <…>)")
    group.addoption("--heap-call-paths", choices=("on-failure", "always"), default="on-failure",
                    help="on-failure (default): budget runs record call sites only, a fifth of the cost on "
                         "start-up-heavy programs, and a failing run is made once more with call paths for its "
                         "failure text; always: every run records call paths")
    parser.addini("heap_budget_file", "budget file for --heap-budget (default: heap-budget.toml in the rootdir)")
    parser.addini("heap_baseline", "baseline file for --heap-compare-fail / --heap-save-baseline")
    parser.addini("heap_baseline_top", f"types per test a saved baseline keeps (default {hb.BASELINE_TOP})")


STATE = pytest.StashKey["HeapState"]()
RECORDS = pytest.StashKey[list]()
PROFILER = pytest.StashKey["HeapProfiler"]()


class HeapState:
    """The plugin's settings for one pytest run, checked once at configure time."""

    def __init__(self, config: pytest.Config):
        self.config = config
        option = config.option
        self.budget_file = self._path(option.heap_budget_file, "heap_budget_file")
        self.active = bool(option.heap_budget or option.heap_budget_file)
        self.explicit_file = self.budget_file is not None
        if self.budget_file is None and self.active:
            self.budget_file = hb.find_budget_file(config.rootpath, config.invocation_params.dir)
        self.collected: set[Path] = set()
        self.summary = option.heap_summary != "no"
        self._profile_dir = Path(option.heap_profile_dir).resolve() if option.heap_profile_dir else None
        self.explicit_profile_dir = self._profile_dir
        self.baseline_path = self._path(option.heap_baseline, "heap_baseline")
        self.baseline_from_ini = option.heap_baseline is None and self.baseline_path is not None
        self.save_baseline = option.heap_save_baseline
        self.thresholds = self._thresholds(option.heap_compare_fail)
        self.baseline = self._baseline()
        self.baseline_top = self._baseline_top(option.heap_baseline_top)
        self.command_line_rules = self._command_line_rules(option.heap_default_peak, option.heap_leaks)
        self.full_names = option.heap_full_names
        self.call_paths_always = option.heap_call_paths == "always"
        self.summary_rows = max(option.heap_summary_rows, 1)
        self.report_path = self._path(option.heap_report, None)
        self.json_path = self._path(option.heap_json, None)
        self.records: list[dict] = []
        self.saved_baseline: Path | None = None
        self.names = SessionNames()  # per-binary tables, for every profile this process loads
        self.pattern_hints: dict = {}  # close type names of each unmatched budget pattern, found once
        self.leaks = option.heap_leaks
        self._ctest_build_dirs: set[Path] | None = None
        self._runtime: InProcessRuntime | None | bool = False  # looked for when first needed
        if "heaptype" in os.environ.get("LD_PRELOAD", ""):
            self.runtime()  # preloaded: stop recording pytest itself until a test asks

    def _path(self, option: str | None, ini: str | None) -> Path | None:
        """A path from the command line (relative to where pytest was started) or from
        the ini file (relative to that file)."""
        if option:
            return (self.config.invocation_params.dir / option).resolve()
        value = self.config.getini(ini) if ini else None
        if not value:
            return None
        base = self.config.inipath.parent if self.config.inipath else self.config.rootpath
        return (base / value).resolve()

    def _thresholds(self, expressions: list[str]) -> dict[str, hb.Threshold]:
        thresholds: dict[str, hb.Threshold] = {}
        for expression in expressions:
            try:
                threshold = hb.parse_threshold_option(expression)
            except ValueError as e:
                raise pytest.UsageError(f"--heap-compare-fail: {e}") from None
            if threshold.field in thresholds:
                raise pytest.UsageError(f"--heap-compare-fail: {threshold.field} is given twice "
                                        f"({thresholds[threshold.field].text()} and {threshold.text()})")
            thresholds[threshold.field] = threshold
        if thresholds and not self.baseline_path:
            raise pytest.UsageError("--heap-compare-fail needs a baseline to compare with: --heap-baseline FILE")
        return thresholds

    def _baseline(self) -> hb.Baseline | None:
        if self.save_baseline and not self.baseline_path:
            raise pytest.UsageError("--heap-save-baseline needs the file to write: --heap-baseline FILE")
        if not self.baseline_path or self.save_baseline:
            return None
        if self.baseline_from_ini and not self.thresholds and not self.baseline_path.exists():
            return None  # a configured baseline not written yet: nothing to compare, no error
        try:
            return hb.Baseline.load(self.baseline_path)
        except hb.BudgetError as e:
            raise pytest.UsageError(f"--heap-baseline: {e}") from None

    def runtime(self) -> InProcessRuntime | None:
        """The HeapType runtime loaded in this process (LD_PRELOAD, or a ctypes library
        that links it), found once; it records only while a test asks for it."""
        if self._runtime is False:
            self._runtime = InProcessRuntime.find()
            if self._runtime is not None:
                self._runtime.stop()
        return self._runtime

    def _baseline_top(self, option: int | None) -> int:
        value = option if option is not None else (self.config.getini("heap_baseline_top") or hb.BASELINE_TOP)
        try:
            top = int(value)
        except ValueError:
            raise pytest.UsageError(f"heap_baseline_top: {value!r} is not a whole number") from None
        if top < 0:
            raise pytest.UsageError(f"--heap-baseline-top: {top} cannot be negative")
        return top

    @staticmethod
    def _command_line_rules(default_peak: str | None, leaks: bool) -> list[hb.Rule]:
        """--heap-default-peak and --heap-leaks as the least specific rules of every
        budget: a test's file entry, [defaults] or marker that sets the limit wins."""
        rules = []
        if default_peak is not None:
            try:
                peak = hb.parse_size(default_peak)
            except ValueError as e:
                raise pytest.UsageError(f"--heap-default-peak: {e}") from None
            rules.append(hb.command_line_rule(hb.TOTAL, "peak", peak, f"--heap-default-peak={default_peak}"))
        if leaks:
            rules.append(hb.command_line_rule(None, "leaked", 0, "--heap-leaks"))
        return rules

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    def is_ctest_build_dir(self, path: Path) -> bool:
        """Whether ``path`` is the build tree the budget file's [ctest] names. A budget
        file that does not parse names none here: its own node reports the error."""
        if self._ctest_build_dirs is None:
            self._ctest_build_dirs = set()
            if self.budget_file is not None and self.budget_file.is_file():
                try:
                    settings = hb.load_budget_file(self.budget_file).ctest
                except hb.BudgetError:
                    settings = None
                if settings is not None:
                    self._ctest_build_dirs.add(settings.build_dir.resolve())
        if not self._ctest_build_dirs:
            return False
        return path in self._ctest_build_dirs or (path.is_symlink() and path.resolve() in self._ctest_build_dirs)

    def profile_dir(self) -> Path:
        if self._profile_dir is None:
            factory = getattr(self.config, "_tmp_path_factory", None)
            base = factory.getbasetemp() if factory else Path(tempfile.mkdtemp(prefix="heaptype-"))
            self._profile_dir = base / "heaptype-profiles"
        return self._profile_dir

    def thresholds_for(self, budget: hb.Budget) -> hb.Budget:
        """A budget with the command line's thresholds and limits added."""
        return budget.with_thresholds(self.thresholds).with_rules(self.command_line_rules)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "heap_budget(type=None, *, peak=None, bytes=None, allocations=None, leaked=None, "
        "regression=None): heap limits for the native programs this test runs with the heap_profile "
        "fixture; without a type, for every typed row (see docs/budgets.md)")
    state = HeapState(config)
    config.stash[STATE] = state
    config.pluginmanager.register(HeapSession(state), "heaptype-session")


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.pluginmanager.get_plugin("heaptype-session")
    if session is not None:
        config.pluginmanager.unregister(session)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash.get(STATE, None)
    if state is None or not state.active:
        return []
    lines = [f"heaptype: budgets from {state.budget_file}" if state.budget_file else
             f"heaptype: --heap-budget: no {hb.DEFAULT_FILE} and no [tool.heaptype] in pyproject.toml in "
             f"{config.rootpath}: only heap_budget markers apply"]
    if state.baseline_path:
        verb = "saving to" if state.save_baseline else "comparing with"
        lines.append(f"heaptype: {verb} the baseline {state.baseline_path}")
    return lines


# --- collecting budget files -------------------------------------------------------------

def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The profile directory holds no tests, nor does the CMake build tree that the
    budget file's [ctest] names: under `pytest --heap-budget` run from a project's
    directory, walking a suite's thousand profile directories, or a build tree's
    thousands of files, again in every run (and in every xdist worker) cost more than
    collecting its tests."""
    state = config.stash.get(STATE, None)
    if state is None or not state.active:
        return None
    if state.explicit_profile_dir == collection_path or state.is_ctest_build_dir(collection_path):
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    state = parent.config.stash.get(STATE, None)
    if state is None or not state.active:
        return None
    budget_name = state.budget_file.name if state.budget_file else None
    if file_path.suffix != ".toml" and file_path.name != budget_name:
        return None  # a project's sources: thousands of files, none of them ours
    resolved = file_path.resolve()
    named = file_path.suffix == ".toml" and file_path.name != "pyproject.toml" and parent.session.isinitpath(file_path)
    wanted = named or resolved == state.budget_file or (not state.explicit_file and (
        file_path.name == hb.DEFAULT_FILE or (file_path.name == "pyproject.toml" and hb.has_pyproject_budgets(file_path))))
    return BudgetFileNode.from_parent(parent, path=file_path) if wanted else None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """The budget file joins the run when it was named, or when pytest runs without
    arguments (so `pytest --heap-budget` works whatever `testpaths` says); before -k and
    -m deselect, so that they select budget items too."""
    state = config.stash.get(STATE, None)
    if state is None or not state.active or state.budget_file is None:
        return
    if state.budget_file in state.collected:
        return
    if not state.explicit_file and config.args_source == pytest.Config.ArgsSource.ARGS:
        return
    node = BudgetFileNode.from_parent(session, path=state.budget_file)
    items.extend(session.genitems(node))


def pytest_collection_finish(session: pytest.Session) -> None:
    """A session of budget items only (a CTest suite in CI): what collection made lives
    until the end, so the garbage collector stops walking it (gc.freeze). With a
    thousand items each full collection walked them all again, and pytest runs five at
    the end of every process. A session with Python tests is left as it is."""
    state = session.config.stash.get(STATE, None)
    if state is not None and state.active and session.items and \
            all(isinstance(item, BudgetItem) for item in session.items):
        gc.freeze()


class BudgetFileNode(pytest.File):
    """A budget file: one item per [[tests]] entry with a command, and one per CTest test."""

    def collect(self) -> Iterator[pytest.Item]:
        # A file counts as collected once its node collects: pytest also makes nodes for
        # files it then drops (the rootdir's, on its way to `testpaths`).
        state: HeapState = self.config.stash[STATE]
        if self.path.resolve() in state.collected:
            return
        state.collected.add(self.path.resolve())
        try:
            budgets = hb.load_budget_file(self.path)
        except hb.BudgetError as e:
            raise self.CollectError(str(e)) from None
        for entry in budgets.command_tests():
            budget = state.thresholds_for(budgets.budget_for(entry.name, entry))
            spec = RunSpec(command=resolve_command(entry.command, budgets.directory), cwd=entry.cwd,
                           env=entry.env, timeout=_first(budget.timeout, budget.default_timeout),
                           expect=entry.returncode, where=entry.origin)
            yield BudgetItem.from_parent(self, name=entry.name, spec=spec, budget=budget, line=entry.line)
        if budgets.ctest is not None:
            yield from self._ctest_items(budgets, state)

    def _ctest_items(self, budgets: hb.BudgetFile, state: HeapState) -> Iterator[pytest.Item]:
        settings = budgets.ctest
        try:
            cases = discover_ctest(settings, getattr(self.config, "workerinput", {}).get("testrunuid"))
        except DiscoveryError as e:
            raise self.CollectError(f"{budgets.path}:{settings.line}: [ctest]: {e}") from None
        names = sorted({case.test for case in cases} | {case.name for case in cases})
        commands = {entry.name: entry for entry in budgets.command_tests()}
        for case in cases:
            if case.name in commands:
                raise self.CollectError(
                    f"{budgets.path}:{commands[case.name].line}: test '{case.name}' is both a [[tests]] command and a "
                    f"CTest test of {settings.build_dir}: rename it, or drop its command to budget the CTest test")
        for entry in budgets.tests:
            if entry.is_pattern and not any(hb.name_matches(entry.name, n) for n in names):
                close = hb.close_names(entry.name, names)
                hint = f"; close names: {', '.join(close)}" if close else \
                    f"; its tests: {', '.join(sorted(names)[:10])}" if names else ""
                warnings.warn(hb.HeapBudgetWarning(
                    f"{entry.origin}: budgets for '{entry.name}' match no CTest test of {settings.build_dir}{hint}"))
        for case in cases:
            budget = state.thresholds_for(budgets.budget_for(case.name, aliases=(case.test,)))
            # a matching [[tests]] entry's timeout, else [ctest]'s, else CTest's TIMEOUT, else [defaults]'
            timeout = _first(budget.timeout, settings.timeout, case.timeout, budget.default_timeout)
            spec = RunSpec(command=case.command, cwd=case.cwd, env=case.env, timeout=timeout,
                           expect="nonzero" if case.will_fail else 0, where=f"CTest test {case.test}")
            item = BudgetItem.from_parent(self, name=case.name, spec=spec, budget=budget, line=settings.line)
            if case.skip_reason:
                item.add_marker(pytest.mark.skip(reason=case.skip_reason))
            yield item


def _first(*values):
    return next((v for v in values if v is not None), None)


# --- running a profiled program -------------------------------------------------------------

@dataclass
class RunSpec:
    """What to run for one budget item."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    expect: int | str = 0          # the exit status expected, or "nonzero" (CTest WILL_FAIL)
    where: str = ""


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
    _profile: Any = None

    @property
    def profile(self):
        """The loaded profile (heaptype.Profile)."""
        if self._profile is None:
            if self.profile_path is None:
                raise RunProblem(no_profile_text(self))
            self._profile = load_profile(self.profile_path, self.names)
        return self._profile

    @property
    def crashed(self) -> bool:
        return self.returncode < 0


def run_program(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float | None,
                out_dir: Path, name: str = "", names: SessionNames | None = None,
                call_paths: bool = True) -> HeapRun:
    """Run a command with profiling on (heaptype.runner.run_for_budget, as the CTest
    helper and the Bazel budget test do); the profile lands in ``out_dir``."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    try:
        done = run_for_budget(command, output=out_dir / "%e.%p.htp", cwd=cwd, env=env, timeout=timeout, capture=True,
                              call_paths=call_paths)
    except RunError as e:
        raise RunProblem(str(e)) from None
    return HeapRun(done.command, done.returncode, done.stdout or "", done.stderr or "", done.profile_path,
                   done.duration, done.timed_out, name, timeout, names=names,
                   runtime_messages="".join(line + "\n" for line in done.runtime_messages))


def no_profile_text(run: HeapRun) -> str:
    status = f" ({exit_text(run.returncode)})" if run.returncode else ""
    return (f"{run.command[0]} wrote no profile{status}: it is not built with HeapType, or it did not start. "
            f"Fix: {NOT_INSTRUMENTED_FIX}")


def load_profile(path: Path, names: SessionNames | None = None):
    from .profile import ProfileError

    try:
        return (names or SessionNames()).load(path)
    except ProfileError as e:
        raise RunProblem(f"cannot read the profile: {e}") from None


def safe_name(nodeid: str) -> str:
    """A directory name for a test id: readable, and unique thanks to a short hash."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid.split("::")[-1])[:60].strip("._") or "test"
    return f"{stem}-{hashlib.sha1(nodeid.encode()).hexdigest()[:8]}"


# --- verdicts and records ---------------------------------------------------------------------

def judge(state: HeapState, test: str, budget: hb.Budget, run: HeapRun,
          figures: dict[str, hb.Figures] | None = None) -> tuple[dict, str | None]:
    """Evaluate one run: its record for summaries, and its failure text (None: passed).
    ``figures``: the rows when they are not the whole profile's (a test in this
    process). Warnings about budget patterns wait for the end of the session: a
    pattern that matches in some other test is no mistake."""
    profile = run.profile
    stored = state.baseline.figures(test) if state.baseline is not None else None
    if figures is None:
        # only the rows this check can show, store, compare or fail (a GoogleTest binary
        # has a thousand types in every test): the same verdict as hb.measure's rows
        figures = hb.measure_for_check(profile, budget, wanted=stored or (), complete=profile.complete,
                                       top=max(state.baseline_top, hb.MEASURED_LARGEST))
    evaluation = hb.evaluate(budget, figures, profile_path=str(run.profile_path), complete=profile.complete,
                             hints=state.pattern_hints)
    shown = set(evaluation.shown_labels(budget))
    kept = hb.kept_labels(evaluation.figures, shown, state.baseline_top)
    comparison = None
    if state.baseline is not None:
        comparison = hb.compare(test, evaluation.figures, stored, budget.thresholds, kept)
    problem = process_problem(run, budget.test)
    record = make_record(test, budget, evaluation, comparison, kept, problem=problem[0] if problem else None)
    problems = [problem[1]] if problem else []
    if evaluation.passed and not problems and not (comparison and comparison.regressions):
        return record, None
    text = hb.failure_text(evaluation, call_paths=hb.profile_call_paths(profile),
                           regressions=comparison.regressions if comparison else (),
                           baseline=str(state.baseline_path) if comparison else None, full_names=state.full_names)
    measured = ["  measured:"] + ["    " + line for line in hb.measured_lines(evaluation, budget,
                                                                              full_names=state.full_names)]
    failure = "\n".join(problems + [text] + measured + command_text(run))
    record["passed"] = False
    record["failure"] = failure
    return record, failure


def process_problem(run: HeapRun, test: str) -> tuple[str, str] | None:
    """What went wrong with the process itself, apart from budgets: the summary's word
    and the failure's sentence. Runs of the heap_profile fixture (expect None) leave
    the exit status, crashes and timeouts to the test body."""
    if run.expect is None:
        return None
    if run.timed_out:
        return "TIMEOUT", (f"{test}: timed out after {run.timeout:g} s and was killed; figures cover what its "
                           "cut-short profile holds")
    if run.crashed:
        signal_name = exit_text(run.returncode).rsplit("(", 1)[-1].rstrip(")")
        return f"CRASHED ({signal_name})", (f"{test}: the program crashed ({exit_text(run.returncode)}); figures "
                                            "cover what its cut-short profile holds")
    if run.expect == "nonzero" and run.returncode == 0:
        return "EXIT 0", f"{test}: exit status 0, but the test is expected to fail (WILL_FAIL)"
    if run.expect != "nonzero" and run.returncode != run.expect:
        return f"EXIT {run.returncode}", f"{test}: {exit_text(run.returncode)} (expected {run.expect})"
    return None


def command_text(run: HeapRun) -> list[str]:
    if run.profile_path is not None and run.command[0].startswith("(this process"):
        return [f"  ran in {run.command[0][1:-1]}"]
    return [f"  command: {shlex.join(run.command)}"]


def make_record(test: str, budget: hb.Budget, evaluation: hb.Evaluation, comparison: hb.Comparison | None,
                kept: list[str], problem: str | None = None) -> dict:
    """What a test measured, as plain data: it travels on the report (also from xdist
    workers) to the summary, the report files, the baseline and the JUnit properties.
    It holds the rows a baseline keeps (the totals, the budgeted rows, the largest),
    not every type of the profile."""
    regressed = {c.type for c in comparison.regressions} if comparison else set()
    shown = hb.sort_labels(set(evaluation.shown_labels(budget)) | regressed)
    rows = hb.evaluation_rows(evaluation, shown)
    for row in rows:
        if row[0] in regressed and row[-1] != "OVER":
            row[-1] = "REGRESSED"
        if row[0] == hb.TOTAL and problem:
            row[-1] = problem
    return {
        "test": test,
        "passed": evaluation.passed and not (comparison and comparison.regressions),
        "complete": evaluation.complete,
        "profile": evaluation.profile_path,
        "figures": {label: list(evaluation.figures[label]) for label in sorted(set(kept) | set(shown))},
        "shown": shown,
        "over": sorted({v.type for v in evaluation.violations} | regressed),  # the failure page's types
        "rows": [[test] + row for row in rows],
        "usage": [limit_usage(evaluation, label) for label in shown],
        "changes": [{"type": c.type, "field": c.field, "verdict": c.verdict, "text": c.text()}
                    for c in (comparison.changes if comparison else [])],
        "in_baseline": comparison.in_baseline if comparison else None,
        "matched": sorted(evaluation.matched_patterns),
        "unmatched": [{"key": u.key, "pattern": u.pattern, "origin": u.origin, "close": list(u.close),
                       "typed_rows": u.typed_rows} for u in evaluation.unmatched],
        "failure": None,
    }


def limit_usage(evaluation: hb.Evaluation, label: str) -> float:
    """How close a row came to its tightest limit (1.0: at the limit; over 1: over)."""
    figures = evaluation.figures[label]
    usage = 0.0
    for name, limit in evaluation.limits.get(label, {}).items():
        measured = figures.get(name)
        usage = max(usage, measured / limit.value if limit.value else (float("inf") if measured else 0.0))
    return usage


def add_properties(item: pytest.Item, record: dict) -> None:
    """JUnit XML properties: every figure of every row the summary shows (named after
    the run too, `heaptype[second].peak[Foo]`, when a test ran several programs), and a
    failing run's HTML page (`heaptype.page`)."""
    run = record["test"][len(item.nodeid):] if record["test"].startswith(item.nodeid) else ""
    for label in record["shown"]:
        for name, value in zip(hb.FIELDS, record["figures"][label]):
            item.user_properties.append((f"heaptype{run}.{name}[{label}]", value))
    if record.get("page"):
        item.user_properties.append((f"heaptype{run}.page", record["page"]))


def remember(item: pytest.Item, record: dict) -> None:
    item.stash.setdefault(RECORDS, []).append(record)
    add_properties(item, record)


class HeapBudgetFailure(Exception):
    """A budget item's failure: its message is the whole report, shown without traceback."""


class BudgetItem(pytest.Item):
    """One program run under profiling, checked against its budget."""

    def __init__(self, *, spec: RunSpec, budget: hb.Budget, line: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.spec = spec
        self.budget = budget
        self.line = line

    def runtest(self) -> None:
        state: HeapState = self.config.stash[STATE]
        budget = self.budget.named(self.nodeid)
        try:
            run = self._run(state, call_paths=state.call_paths_always)
            self._output_sections(run)
            record, failure = judge(state, self.nodeid, budget, run)
            if failure and not state.call_paths_always and process_problem(run, budget.test) is None:
                record, failure, run = self._judge_with_call_paths(state, budget, record, failure, run)
            failure = with_failure_page(record, failure, run)
        except RunProblem as e:
            raise HeapBudgetFailure(f"{self.nodeid} ({self.spec.where}): {e}\n  command: "
                                    f"{shlex.join(self.spec.command)}") from None
        remember(self, record)
        if failure:
            raise HeapBudgetFailure(failure)

    def _run(self, state: HeapState, *, call_paths: bool, suffix: str = "") -> HeapRun:
        run = run_program(self.spec.command, cwd=self.spec.cwd, env=self.spec.env, timeout=self.spec.timeout,
                          out_dir=state.profile_dir() / (safe_name(self.nodeid) + suffix), name=self.name,
                          names=state.names, call_paths=call_paths)
        run.expect = self.spec.expect
        return run

    def _judge_with_call_paths(self, state: HeapState, budget: hb.Budget, record: dict,
                               failure: str, run: HeapRun) -> tuple[dict, str, HeapRun]:
        """A run without call paths failed: the same run again, recording them, for a
        failure text that shows where. Its verdict is the test's when it fails too.
        Returns the verdict's record, failure text and run."""
        detail = self._run(state, call_paths=True, suffix="-call-paths")
        detail_record, detail_failure = judge(state, self.nodeid, budget, detail)
        if detail_failure:
            return detail_record, detail_failure, detail
        return record, (failure + "\n  a second run, recording call paths, passed: this test's heap use "
                        "differs from run to run (--heap-call-paths=always judges the run that shows them)"), run

    def _output_sections(self, run: HeapRun) -> None:
        if run.stdout:
            self.add_report_section("call", "stdout", run.stdout)
        if run.stderr:
            self.add_report_section("call", "stderr", run.stderr)
        if run.runtime_messages:
            self.add_report_section("call", "heaptype runtime", run.runtime_messages)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, HeapBudgetFailure):
            return str(excinfo.value)
        if isinstance(excinfo.value, hb.HeapBudgetWarning):
            return f"{excinfo.value} (a HeapBudgetWarning, made an error by -W / filterwarnings)"
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, self.line - 1 if self.line else None, f"heap budget: {self.name}"


# --- CTest discovery ---------------------------------------------------------------------------

class DiscoveryError(Exception):
    pass


@dataclass
class CTestCase:
    """A CTest test (or one GoogleTest case of it) to run as a budget item."""

    name: str
    test: str
    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    will_fail: bool = False
    skip_reason: str | None = None


def discover_ctest(settings: hb.CTestSettings, session_id: str | None = None) -> list[CTestCase]:
    """The tests of a CMake build tree, from `ctest --show-only=json-v1`. ``session_id``:
    the test run's id shared by its xdist workers; the first worker's discovery is kept
    in the build tree for the others (each would run ctest and list every GoogleTest
    binary again, one after the other)."""
    ctest = shutil.which("ctest")
    if ctest is None:
        raise DiscoveryError("ctest is not installed: install CMake (e.g. `pip install cmake`) to discover tests")
    if not (settings.build_dir / "CTestTestfile.cmake").is_file():
        state = "does not exist" if not settings.build_dir.exists() else "has no CTestTestfile.cmake"
        raise DiscoveryError(f"build_dir {settings.build_dir} {state}: configure and build the project first "
                             "(with enable_testing() and add_test())")
    # gtest_discover_tests(... DISCOVERY_MODE PRE_TEST) lists a binary's cases when
    # ctest first needs them: xdist workers must not race to it (they would collect
    # different tests), and the listing run of an instrumented binary writes no profile.
    with open(settings.build_dir / ".heaptype-discovery.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared = _shared_discovery_path(settings, session_id)
        cases = _read_shared_discovery(shared) if shared else None
        if cases is None:
            cases = _run_discovery(ctest, settings)
            if shared:
                _write_shared_discovery(shared, cases, session_id)
    return cases


def _run_discovery(ctest: str, settings: hb.CTestSettings) -> list[CTestCase]:
    command = [ctest, "--show-only=json-v1"] + (["-C", settings.configuration] if settings.configuration else [])
    environment = {**os.environ, "HEAPTYPE_DISABLE": "1"}
    try:
        done = subprocess.run(command, cwd=settings.build_dir, capture_output=True, text=True,
                              timeout=LIST_TIMEOUT, env=environment)
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"`{shlex.join(command)}` did not finish in {LIST_TIMEOUT} s") from None
    if done.returncode != 0:
        raise DiscoveryError(f"`{shlex.join(command)}` failed: {done.stderr.strip() or done.stdout.strip()}")
    try:
        tests = json.loads(done.stdout)["tests"]
    except (ValueError, KeyError, TypeError):
        raise DiscoveryError(f"`{shlex.join(command)}` printed no test list (CMake 3.14 or newer is needed)") from None
    cases = []
    for test in tests:
        if _selected(test.get("name", ""), settings):
            cases += _cases(test, settings)
    return cases


SHARED_DISCOVERY_PREFIX = ".heaptype-discovery-"


def _shared_discovery_path(settings: hb.CTestSettings, session_id: str | None) -> Path | None:
    if not session_id or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
        return None
    # the same build tree may be discovered with other [ctest] settings in the same run
    key = hashlib.sha1(repr((settings.configuration, settings.include, settings.exclude,
                             settings.gtest_split)).encode()).hexdigest()[:12]
    return settings.build_dir / f"{SHARED_DISCOVERY_PREFIX}{session_id}-{key}.json"


def _read_shared_discovery(path: Path) -> list[CTestCase] | None:
    try:
        return [CTestCase(**{**entry, "cwd": Path(entry["cwd"])}) for entry in json.loads(path.read_text())]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet (the first worker), or damaged: discover again


def _write_shared_discovery(path: Path, cases: list[CTestCase], session_id: str) -> None:
    """Written whole (rename) while the discovery lock is held; earlier runs' files go."""
    for stale in path.parent.glob(SHARED_DISCOVERY_PREFIX + "*.json"):
        if not stale.name.startswith(f"{SHARED_DISCOVERY_PREFIX}{session_id}-"):
            stale.unlink(missing_ok=True)
    entries = [{**dataclasses.asdict(case), "cwd": str(case.cwd)} for case in cases]
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(json.dumps(entries))
        partial.replace(path)
    except OSError:
        partial.unlink(missing_ok=True)  # a read-only build tree: each worker discovers on its own


def _selected(name: str, settings: hb.CTestSettings) -> bool:
    return any(hb.name_matches(g, name) for g in settings.include) and \
        not any(hb.name_matches(g, name) for g in settings.exclude)


def _properties(test: dict) -> dict[str, Any]:
    return {p.get("name"): p.get("value") for p in test.get("properties", []) if isinstance(p, dict)}


def _cases(test: dict, settings: hb.CTestSettings) -> list[CTestCase]:
    props = _properties(test)
    name = test["name"]
    env = dict(entry.split("=", 1) for entry in props.get("ENVIRONMENT", []) if "=" in entry)
    cwd = Path(props.get("WORKING_DIRECTORY") or settings.build_dir)
    timeout = float(props["TIMEOUT"]) if props.get("TIMEOUT") else None
    command = test.get("command")
    case = CTestCase(name, name, list(command or []), cwd, env, timeout, bool(props.get("WILL_FAIL")))
    if not command:
        case.skip_reason = f"CTest test {name} has no command in this configuration"
        return [case]
    if props.get("DISABLED"):
        case.skip_reason = f"CTest test {name} is DISABLED"
        return [case]
    if _split_gtest(name, command, settings):
        names = list_gtest_cases(command, cwd, env)
        if names:
            return [CTestCase(f"{name}[{case_name}]", name, command + [f"--gtest_filter={case_name}"], cwd, env,
                              timeout, False) for case_name in names]
    return [case]


def _split_gtest(name: str, command: list[str], settings: hb.CTestSettings) -> bool:
    """Split only GoogleTest binaries (the program holds gtest's flag names) that CTest
    runs whole (gtest_discover_tests already gives one CTest test per case)."""
    wanted = settings.gtest_split is True or (
        isinstance(settings.gtest_split, list) and any(hb.name_matches(g, name) for g in settings.gtest_split))
    if not wanted or any(arg.startswith("--gtest_filter") for arg in command[1:]):
        return False
    try:
        return GTEST_MARKER in Path(command[0]).read_bytes()
    except OSError:
        return False


def list_gtest_cases(command: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """`Suite.Case` names from `--gtest_list_tests` (comments such as `# GetParam()`
    dropped; `DISABLED_` cases left out, as GoogleTest itself does)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    environment.update(env, HEAPTYPE_DISABLE="1")
    try:
        done = subprocess.run(command + ["--gtest_list_tests"], cwd=cwd, env=environment, capture_output=True,
                              text=True, timeout=LIST_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise DiscoveryError(f"listing the GoogleTest cases of {command[0]} failed: {e}") from None
    if done.returncode != 0:
        raise DiscoveryError(f"`{shlex.join(command)} --gtest_list_tests` failed ({exit_text(done.returncode)}): "
                             f"{done.stderr.strip()[-500:]}")
    return parse_gtest_list(done.stdout)


def parse_gtest_list(text: str) -> list[str]:
    cases, suite = [], None
    for line in text.splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        if not line.startswith(" "):
            suite = stripped.strip()
            if not suite.endswith("."):
                suite = None  # a line gtest prints before the list
        elif suite is not None:
            case = stripped.strip()
            if not case.startswith("DISABLED_") and not suite.startswith("DISABLED_"):
                cases.append(suite + case)
    return cases


# --- the heap_profile fixture and the heap_budget marker -----------------------------------------

class HeapProfiler:
    """Runs native programs with profiling on, for Python tests: ``heap_profile.run``.

    The runs of a test are checked against its ``heap_budget`` markers when the test
    body has finished, and reported in the summary like budget-file tests.
    """

    def __init__(self, item: pytest.Item, state: HeapState):
        self._item = item
        self._state = state
        self.runs: list[HeapRun] = []

    def run(self, command, *, cwd=None, env: dict | None = None, timeout: float | None = None,
            name: str | None = None) -> HeapRun:
        """Run ``command`` (a list, or a string split like a shell would) with profiling on.

        Returns a HeapRun: ``returncode``, ``stdout``, ``stderr``, ``profile_path`` and the
        loaded ``profile``. Fails the test when the program cannot be run or writes no
        profile (not built with HeapType). A non-zero exit status is the test's to check.
        """
        command = shlex.split(command) if isinstance(command, str) else [os.fspath(c) for c in command]
        if not command:
            pytest.fail("heap_profile.run: empty command", pytrace=False)
        if timeout is None:
            timeout = self._marker_timeout()
        name = name or Path(command[0]).name
        out_dir = self._state.profile_dir() / safe_name(self._item.nodeid) / f"{len(self.runs) + 1}-{safe_name(name)}"
        try:
            run = run_program(command, cwd=Path(cwd or os.getcwd()), env={k: str(v) for k, v in (env or {}).items()},
                              timeout=timeout, out_dir=out_dir, name=name, names=self._state.names)
            if run.profile_path is None:
                raise RunProblem(no_profile_text(run))
            run.profile  # noqa: B018 - load now, so a bad profile fails here, where it was run
        except RunProblem as e:
            pytest.fail(f"heap_profile.run: {e}\n  command: {shlex.join(command)}", pytrace=False)
        self.runs.append(run)
        return run

    def _marker_timeout(self) -> float | None:
        """`@pytest.mark.heap_budget(timeout=...)`: the default timeout of each run."""
        try:
            spec = marker_budget(self._item) or {}
            return hb.budget_from_mapping(self._item.nodeid, spec, self._item.nodeid).timeout
        except hb.BudgetError:
            return None  # reported once the test body has run

    def test_names(self) -> list[str]:
        """A name per run: the test id alone for one run, `id[name]` for several."""
        nodeid = self._item.nodeid
        if len(self.runs) == 1:
            return [nodeid]
        names, seen = [], {}
        for run in self.runs:
            seen[run.name] = seen.get(run.name, 0) + 1
            names.append(f"{nodeid}[{run.name}]" if seen[run.name] == 1 else f"{nodeid}[{run.name}-{seen[run.name]}]")
        return names

    def finish(self, budget_spec: dict | None) -> list[str]:
        """Judge every run; returns the failure texts."""
        failures = []
        for test, run in zip(self.test_names(), self.runs):
            budget = hb.budget_from_mapping(test, budget_spec or {}, f"{self._item.nodeid}: heap_budget marker")
            budget = self._state.thresholds_for(budget)
            run.expect = None  # the test body judges the exit status
            record, failure = judge(self._state, test, budget, run)
            failure = with_failure_page(record, failure, run)
            remember(self._item, record)
            if failure:
                failures.append(failure)
        return failures


@pytest.fixture
def heap_profile(request: pytest.FixtureRequest) -> HeapProfiler:
    """Run native programs under HeapType: ``heap_profile.run(["build/app", "--quick"])``.

    Each run returns its profile (``run.profile.type_row("Foo")``); the test's
    ``@pytest.mark.heap_budget(...)`` limits are checked after the test body.
    """
    profiler = HeapProfiler(request.node, request.config.stash[STATE])
    request.node.stash[PROFILER] = profiler
    return profiler


def marker_budget(item: pytest.Item) -> dict | None:
    """The heap_budget markers of a test as one budget mapping: the closest marker
    wins for each type and limit. ``heap_budget("Small", peak="64 KiB")`` budgets a type,
    ``heap_budget(leaked=0)`` every typed row."""
    markers = list(item.iter_markers("heap_budget"))
    if not markers:
        return None
    spec: dict[str, Any] = {}
    for marker in markers:
        if len(marker.args) > 1:
            raise hb.BudgetError(f"{item.nodeid}: heap_budget takes at most one type name, not {marker.args!r}")
        kwargs = dict(marker.kwargs)
        if marker.args:
            if not isinstance(marker.args[0], str):
                raise hb.BudgetError(f"{item.nodeid}: heap_budget: the type must be a string, not {marker.args[0]!r}")
            for key, value in kwargs.items():
                spec.setdefault("types", {}).setdefault(marker.args[0], {}).setdefault(key, value)
        else:
            for key, value in kwargs.items():
                if key == "types" and isinstance(value, dict):
                    for type_name, limits in value.items():
                        target = spec.setdefault("types", {}).setdefault(type_name, {})
                        for k, v in (limits.items() if isinstance(limits, dict) else []):
                            target.setdefault(k, v)
                        if not isinstance(limits, dict):
                            spec["types"][type_name] = limits
                elif key == "regression" and isinstance(value, dict):
                    for k, v in value.items():
                        spec.setdefault("regression", {}).setdefault(k, v)
                else:
                    spec.setdefault(key, value)
    return spec


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    state: HeapState = item.config.stash[STATE]
    try:
        spec = marker_budget(item)
    except hb.BudgetError as e:
        spec = None
        pytest.fail(str(e), pytrace=False)
    window = _in_process_window(item, state, spec)
    try:
        result = yield
    finally:
        outcome = _end_window(item, state, spec, window) if window is not None else None
    profiler = item.stash.get(PROFILER, None)
    if window is not None:
        if outcome:
            pytest.fail(outcome, pytrace=False)
        return result
    if spec is not None and profiler is None:
        pytest.fail(f"{item.nodeid}: @pytest.mark.heap_budget needs a profile: run the native program with the "
                    "heap_profile fixture (heap_profile.run([...])), or load the HeapType runtime into this Python "
                    "process to budget native code it calls through ctypes or pybind11 (LD_PRELOAD="
                    "$(heaptype --lib-dir)/libheaptype.so python -m pytest ...)", pytrace=False)
    if profiler is not None and profiler.runs:
        try:
            failures = profiler.finish(spec)
        except (hb.BudgetError, RunProblem) as e:
            pytest.fail(str(e), pytrace=False)
        except hb.HeapBudgetWarning as e:
            pytest.fail(f"{e} (a HeapBudgetWarning, made an error by -W / filterwarnings)", pytrace=False)
        if failures:
            pytest.fail("\n\n".join(failures), pytrace=False)
    elif spec is not None:
        pytest.fail(f"{item.nodeid}: @pytest.mark.heap_budget: the test ran no program with heap_profile.run",
                    pytrace=False)
    return result


def _in_process_window(item: pytest.Item, state: HeapState, spec: dict | None) -> TestWindow | None:
    """Record this test in this process when it has heap_budget markers but no
    heap_profile fixture (it calls native code itself), or when --heap-leaks asks for
    every test, and the HeapType runtime is loaded here."""
    if isinstance(item, BudgetItem) or "heap_profile" in getattr(item, "fixturenames", ()):
        return None
    if spec is None and not state.leaks:
        return None
    runtime = state.runtime()
    if runtime is None:
        return None
    window = TestWindow(runtime, state.profile_dir() / safe_name(item.nodeid))
    window.begin(state.names)
    return window


def _end_window(item: pytest.Item, state: HeapState, spec: dict | None, window: TestWindow) -> str | None:
    """Stop recording the test and judge what it allocated: its failure text, if any."""
    profile, figures = window.end(state.names)
    try:
        budget = hb.budget_from_mapping(item.nodeid, spec or {}, f"{item.nodeid}: heap_budget marker")
    except hb.BudgetError as e:
        return str(e)
    run = HeapRun([f"(this process, runtime from {window.runtime.where})"], 0, "", "", Path(profile.path), 0.0,
                  expect=None, names=state.names)
    run._profile = profile
    record, failure = judge(state, item.nodeid, state.thresholds_for(budget), run, figures=figures)
    failure = with_failure_page(record, failure, run)
    remember(item, record)
    return failure


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call":
        records = item.stash.get(RECORDS, None)
        if records:
            report.heaptype = json.dumps(records)
    return report


# --- the end of the run: summary, baseline, GitHub ---------------------------------------------

class HeapSession:
    """The run's collector of measurements, registered as a plugin in pytest_configure:
    it sees every test report (under xdist, the workers' reports arrive here at the
    controller), and writes the summary, the report files and the baseline once."""

    def __init__(self, state: HeapState):
        self.state = state
        self.pattern_warnings: list[str] = []
        self.errors: list[str] = []
        self.tests_run = self.tests_measured = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        self.tests_run += 1
        records = getattr(report, "heaptype", None)
        if records:
            self.tests_measured += 1
            self.state.records.extend(json.loads(records))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        if self.tests_run and self.tests_run == self.tests_measured:
            gc.freeze()  # as pytest_collection_finish does, for the xdist controller's reports
        if state.is_worker or not state.records:
            return
        self._warn_unmatched(session)
        if state.save_baseline:
            outputs.save_baseline(state.baseline_path, state.records)
            state.saved_baseline = state.baseline_path
        if state.report_path:
            self._write(state.report_path, "\n".join(outputs.markdown_lines(
                state.records, warnings=self.pattern_warnings, baseline=self._compared(), rows=None, failures=True)))
        if state.json_path:
            self._write(state.json_path, outputs.results_json(state.records, warnings=self.pattern_warnings))
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_file and Path(summary_file).resolve() != state.report_path:
            with open(summary_file, "a", encoding="utf-8") as out:
                out.write("\n".join(outputs.markdown_lines(state.records, warnings=self.pattern_warnings,
                                                           baseline=self._compared(), rows=state.summary_rows,
                                                           failures=False)) + "\n")
        if self.errors:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _compared(self) -> Path | None:
        return self.state.baseline_path if self.state.baseline is not None else None

    def _write(self, path: Path, text: str) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as e:
            self.errors.append(f"cannot write {path}: {e.strerror}")

    def _warn_unmatched(self, session: pytest.Session) -> None:
        """One HeapBudgetWarning per pattern no test matched, in pytest's warnings
        summary (an error, failing the run, under -W error::...HeapBudgetWarning)."""
        self.pattern_warnings = outputs.unmatched_patterns(self.state.records)
        where = str(self.state.budget_file.name) if self.state.budget_file else "heap budgets"
        for message in self.pattern_warnings:
            warning = hb.HeapBudgetWarning(message)
            if _warning_is_error(session.config, warning):
                self.errors.append(f"{message} (a HeapBudgetWarning, made an error by -W / filterwarnings)")
                continue
            origin = re.search(r"\((\S+):(\d+) ", message)  # where the pattern was written
            record = warnings.WarningMessage(warning, hb.HeapBudgetWarning, origin.group(1) if origin else where,
                                             int(origin.group(2)) if origin else 0)
            session.config.hook.pytest_warning_recorded.call_historic(
                kwargs=dict(warning_message=record, when="runtest", nodeid=where, location=None))

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        state = self.state
        if state.is_worker or not state.records:
            return
        write = terminalreporter.write_line
        if state.summary:
            terminalreporter.write_sep("=", "heap budgets")
            files = [p for p in (state.report_path, state.json_path) if p]
            for line in outputs.terminal_lines(state.records, rows=state.summary_rows, report_files=files,
                                               full_names=state.full_names):
                write(line)
            if state.baseline is not None:
                self._baseline_lines(terminalreporter)
        for error in self.errors:
            write(f"ERROR: {error}", red=True)
        if state.saved_baseline:
            count = len(state.records)
            write(f"heaptype: saved the figures of {count} run{'' if count == 1 else 's'} to the baseline "
                  f"{state.saved_baseline}")

    def _baseline_lines(self, terminalreporter) -> None:
        state = self.state
        terminalreporter.write_sep("-", f"heap baseline {state.baseline_path}")
        for note in state.baseline.notes:
            terminalreporter.write_line(f"note: {note}")
        changes = outputs.change_lines(state.records)  # regressions first
        limit = max(state.summary_rows, sum(kind == "regressed" for kind, _ in changes))
        for verdict, line in changes[:limit]:
            terminalreporter.write_line(f"{verdict.upper():9} {line}")
        if len(changes) > limit:
            terminalreporter.write_line(f"... and {len(changes) - limit} more changes (--heap-report=FILE.md lists "
                                        "them all)")
        if not changes:
            terminalreporter.write_line("no change")


def _warning_is_error(config: pytest.Config, warning: Warning) -> bool:
    """Whether pytest's warning filters (-W, filterwarnings) turn this warning into an error."""
    try:
        from _pytest.warnings import apply_warning_filters
    except ImportError:  # pragma: no cover - pytest keeps it; without it, warnings stay warnings
        return False
    with warnings.catch_warnings(record=True):
        apply_warning_filters(config.getini("filterwarnings"), config.known_args_namespace.pythonwarnings or [])
        try:
            warnings.warn(warning)
        except type(warning):
            return True
    return False
