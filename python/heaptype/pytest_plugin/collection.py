"""Collecting budget files: a budget file becomes a node whose items are its
[[tests]] commands and the CTest tests its [ctest] names; a ``BudgetItem`` runs one
of them under profiling and judges it."""

from __future__ import annotations

import contextlib
import gc
import shlex
import warnings
from pathlib import Path
from typing import Iterator

import pytest

from .. import budget as hb
from ..budget.failure_page import with_failure_page
from .ctest import DiscoveryError, discover_ctest
from .fixtures import bring_back, ordered, plan, roles_from_properties
from .judging import judge, process_problem, remember
from .locks import LockError, locks_of
from .options import STATE, HeapState
from .running import HeapRun, RunProblem, RunSpec, counts_waited, resolve_command, run_program, safe_name


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
    -m deselect, so that they select budget items too. Then --heap-shard keeps its shard."""
    state = config.stash.get(STATE, None)
    if state is None:
        return
    if _budget_file_joins(state, config):
        node = BudgetFileNode.from_parent(session, path=state.budget_file)
        items.extend(session.genitems(node))
    state.collected_items = list(items)  # before any deselection: CTest fixtures bring some back
    if state.shard is not None:
        keep_shard(state.shard, config, items)


def _budget_file_joins(state: HeapState, config: pytest.Config) -> bool:
    if not state.active or state.budget_file is None or state.budget_file in state.collected:
        return False
    return state.explicit_file or config.args_source != pytest.Config.ArgsSource.ARGS


def keep_shard(shard: hb.Shard, config: pytest.Config, items: list) -> None:
    """--heap-shard I/N: the items of shard I stay, the others are deselected (pytest
    counts them). Each item's shard depends on its id alone (``hb.shard_of``), so
    every xdist worker, and every runner, makes the same choice whatever it collected."""
    kept, deselected = [], []
    for item in items:
        (kept if shard.holds(item.nodeid) else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


class CTestFixtureOrder:
    """Registered at configure time (its hook wraps every plugin's selection): the
    selected items with the setup and cleanup tests their CTest fixtures need, in an
    order that runs setups first and cleanups last, and who waits for whom
    (fixtures.py)."""

    def __init__(self, state: HeapState):
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list):
        result = yield
        if self.state.active:
            back = bring_back(self.state.collected_items or items, items)
            items.extend(back)
            _no_longer_deselected(config, back)
            items[:] = ordered(items)
            self.state.fixture_plan = plan(items, self.state.run_id,
                                           lambda item: item.get_closest_marker("skip") is None)
        return result


def _no_longer_deselected(config: pytest.Config, items: list) -> None:
    """Items -k, -m or --heap-shard deselected (and pytest counted) that run after all,
    as setups and cleanups of a selected test's CTest fixtures: out of the count, so
    that the summary's "N deselected" and "M passed" add up to what was collected."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    counted = reporter.stats.get("deselected") if reporter is not None else None
    if items and counted:
        back = {id(item) for item in items}
        counted[:] = [item for item in counted if id(item) not in back]


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
        tree_has_serial = any(case.run_serial for case in cases)
        for case in cases:
            budget = state.thresholds_for(budgets.budget_for(case.name, aliases=(case.test,)))
            # a matching [[tests]] entry's timeout, else [ctest]'s, else CTest's TIMEOUT, else [defaults]'
            timeout = _first(budget.timeout, settings.timeout, case.timeout, budget.default_timeout)
            spec = RunSpec(command=case.command, cwd=case.cwd, env=case.env, timeout=timeout,
                           expect="nonzero" if case.will_fail else 0, where=f"CTest test {case.test}",
                           ctest_test=case.test,
                           locks=locks_of(settings.build_dir, case.resource_locks, case.run_serial, tree_has_serial),
                           fixtures=roles_from_properties(settings.build_dir, case.fixtures))
            item = BudgetItem.from_parent(self, name=case.name, spec=spec, budget=budget, line=settings.line)
            if case.skip_reason:
                item.add_marker(pytest.mark.skip(reason=case.skip_reason))
            yield item


def _first(*values):
    return next((v for v in values if v is not None), None)


def private_temp_dir(env: dict[str, str], run_dir: Path) -> dict[str, str]:
    """``env`` with TEST_TMPDIR naming the run's own directory (made empty for each run),
    unless the test's env sets it. Bazel's convention, which GoogleTest's TempDir() and
    many suites follow: the cases of one binary, split into tests and run at once by
    xdist workers, would otherwise share one fixed directory (leveldb's DBTest cases
    open the same database and fail on its lock)."""
    return env if "TEST_TMPDIR" in env else {**env, "TEST_TMPDIR": str(run_dir)}


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
        fixtures = state.fixture_plan
        self._program_ran = False  # as expected: what the tests of a CTest fixture's setup wait for
        try:
            if fixtures and self.nodeid in fixtures.waits:
                self._wait_for_fixtures(fixtures)
            self._run_with_locks(state)
        finally:
            if fixtures and self.nodeid in fixtures.awaited:
                fixtures.board(self.nodeid).leave_mark(self.nodeid, self._program_ran)

    def _run_with_locks(self, state: HeapState) -> None:
        budget = self.budget.named(self.nodeid)
        try:
            with self.spec.locks.held() if self.spec.locks else contextlib.nullcontext():
                record, failure = self._run_and_judge(state, budget)
        except LockError as e:
            raise HeapBudgetFailure(f"{self.nodeid} ({self.spec.where}): {e}") from None
        remember(self, record)
        if failure:
            raise HeapBudgetFailure(failure)

    def _wait_for_fixtures(self, fixtures) -> None:
        """Until the setups of this test's CTest fixtures (and, for a cleanup, the
        fixture's tests) have ended, in whichever worker; not run when a setup failed."""
        awaited = fixtures.waits[self.nodeid]
        try:
            outcomes = fixtures.board(self.nodeid).wait_for(awaited)
        except TimeoutError as e:
            raise HeapBudgetFailure(f"{self.nodeid} ({self.spec.where}): not run: {e}") from None
        # as ctest: a failed setup stops the tests requiring its fixture, not its cleanups
        cleans_up = set(self.spec.fixtures.cleanup) if self.spec.fixtures else set()
        failed = [a for a in awaited if a.is_setup and not outcomes[a.nodeid] and a.fixture not in cleans_up]
        if failed:
            setups = "; ".join(f"{a.test} (fixture '{a.fixture}')" for a in failed)
            raise HeapBudgetFailure(f"{self.nodeid} ({self.spec.where}): not run: the setup test of a CTest fixture "
                                    f"it requires failed: {setups}")

    def _run_and_judge(self, state: HeapState, budget: hb.Budget) -> tuple[dict, str]:
        try:
            # The first run counts per call site (aggregated: no events to write or read)
            # unless call paths are always wanted or every row's figures are kept (a
            # baseline, --heap-json, --heap-report: an aggregated run has no own peak for
            # the untyped row) or an earlier test of this program said its threads waited
            # for each other's counts (they run faster recording events); a checked peak
            # it did not keep, or a failure, makes a second run that records every event.
            quick = not state.call_paths_always
            program = self.spec.command[0]
            aggregate = quick and not state.keeps_all_rows and program not in state.counts_contended
            run = self._run(state, call_paths=not quick, aggregate=aggregate)
            if aggregate and counts_waited(run):
                state.counts_contended.add(program)
            self._output_sections(run)
            record, failure = judge(state, self.nodeid, budget, run)
            if record.get("needs_events"):
                run = self._run(state, call_paths=True, suffix="-events")
                record, failure = judge(state, self.nodeid, budget, run)
                quick = False
            if failure and quick and process_problem(run, budget.test) is None:
                record, failure, run = self._judge_with_call_paths(state, budget, record, failure, run)
            failure = with_failure_page(record, failure, run)
            self._program_ran = process_problem(run, budget.test) is None
        except RunProblem as e:
            raise HeapBudgetFailure(f"{self.nodeid} ({self.spec.where}): {e}\n  command: "
                                    f"{shlex.join(self.spec.command)}") from None
        return record, failure

    def _run(self, state: HeapState, *, call_paths: bool, suffix: str = "", aggregate: bool = False) -> HeapRun:
        out_dir = state.profile_dir() / (safe_name(self.nodeid) + suffix)
        run = run_program(self.spec.command, cwd=self.spec.cwd, env=private_temp_dir(self.spec.env, out_dir),
                          timeout=self.spec.timeout, out_dir=out_dir, name=self.name, names=state.names,
                          call_paths=call_paths, aggregate=aggregate)
        run.expect = self.spec.expect
        run.ctest_test = self.spec.ctest_test
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
