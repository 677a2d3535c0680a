"""The end of the run: the summary, the report files, the baseline and the
warnings about budget patterns, written once by the process that sees every report."""

from __future__ import annotations

import gc
import json
import os
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .. import budget as hb
from ..judge import budget_outputs as outputs

if TYPE_CHECKING:
    from .options import HeapState


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
            self._write(state.json_path, outputs.results_json(state.records, warnings=self.pattern_warnings,
                                                              baseline=self._compared()))
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
        summary (an error, failing the run, under -W error::...HeapBudgetWarning). In
        a shard (--heap-shard) none: the summary names them, and `heaptype results
        merge` warns about those that matched in no shard."""
        self.pattern_warnings = outputs.unmatched_patterns(self.state.records)
        if self.state.shard is not None:
            return  # another shard may match them: the merge of the shards' results warns (terminal_summary says so)
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
        if state.shard is not None and self.pattern_warnings:
            count = len(self.pattern_warnings)
            write(f"heaptype: {count} budget pattern{'s' if count > 1 else ''} matched no test of shard "
                  f"{state.shard.text()}; `heaptype results merge` of every shard's --heap-json warns about those "
                  "that matched in none")
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
    try:  # pytest's own filters: in _pytest.config (pytest 9.2 no longer imports it into _pytest.warnings)
        from _pytest.config import apply_warning_filters
    except ImportError:  # pragma: no cover - older pytest
        try:
            from _pytest.warnings import apply_warning_filters
        except ImportError:  # without it, warnings stay warnings
            return False
    with warnings.catch_warnings(record=True):
        apply_warning_filters(config.getini("filterwarnings"), config.known_args_namespace.pythonwarnings or [])
        try:
            warnings.warn(warning)
        except type(warning):
            return True
    return False
