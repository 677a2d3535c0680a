"""The heap_profile fixture and the heap_budget marker: Python tests that run
native programs (or call native code in this process) and budget what they allocate."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from .. import budget as hb
from ..budget.failure_page import with_failure_page
from ..run.inprocess import TestWindow
from .collection import BudgetItem
from .judging import RECORDS, judge, remember
from .options import STATE, HeapState
from .running import HeapRun, RunProblem, no_profile_text, run_program, safe_name

PROFILER = pytest.StashKey["HeapProfiler"]()


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
