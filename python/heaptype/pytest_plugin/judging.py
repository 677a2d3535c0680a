"""Verdicts and records: one run judged against its budget (and the baseline),
and the record of what it measured, which travels on the test report."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import pytest

from .. import budget as hb
from ..run.runner import exit_text
from .running import HeapRun

if TYPE_CHECKING:
    from .options import HeapState

RECORDS = pytest.StashKey[list]()


def judge(state: HeapState, test: str, budget: hb.Budget, run: HeapRun,
          figures: dict[str, hb.Figures] | None = None) -> tuple[dict, str | None]:
    """Evaluate one run: its record for summaries, and its failure text (None: passed).
    ``figures``: the rows when they are not the whole profile's (a test in this
    process). An aggregated run that cannot be judged gives ({"needs_events": True}, None). Warnings about budget patterns wait for the end of the session: a
    pattern that matches in some other test is no mistake."""
    profile = run.profile
    if getattr(profile, "aggregated", False) and not profile.raw.aggregate_complete:
        return {"needs_events": True}, None
    stored = state.baseline.figures(test) if state.baseline is not None else None
    if figures is None:
        # only the rows this check can show, store, compare or fail (a GoogleTest binary
        # has a thousand types in every test): the same verdict as hb.measure's rows
        figures = hb.measure_for_check(profile, budget, wanted=stored or (), complete=profile.complete,
                                       top=max(state.baseline_top, hb.MEASURED_LARGEST))
    evaluation = hb.evaluate(budget, figures, profile_path=str(run.profile_path), complete=profile.complete,
                             hints=state.pattern_hints)
    if needs_events(profile, figures, evaluation):
        return {"needs_events": True}, None
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


def needs_events(profile, figures, evaluation) -> bool:
    """An aggregated run a budget cannot judge: a row whose peak a limit checks has no
    own peak in it (the untyped row, a name several type tags share: only their share of
    the heap's peak). The caller runs the program again, recording events; so too when
    the aggregated run wrote no counts (it crashed, or was killed)."""
    return getattr(profile, "aggregated", False) and bool(hb.unjudged_peaks(figures, evaluation))


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
                       "typed_rows": u.typed_rows, "holders": list(u.holders)} for u in evaluation.unmatched],
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
