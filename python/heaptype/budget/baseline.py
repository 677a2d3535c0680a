"""Baselines: stored figures per test and type, compared against a run with
regression thresholds (as pytest-benchmark compares against a saved run)."""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from ..analyze.labels import TOTAL, UNTYPED
from .evaluate import Figures, sort_labels
from .model import Threshold
from .shards import join_by_test
from .values import FIELD_LABEL, FIELDS, BudgetError, format_exact, format_value

BASELINE_FORMAT = "heaptype-baseline"
BASELINE_VERSION = 2
BASELINE_TOP = 5  # types per test kept besides the budgeted ones and the totals

@dataclass(frozen=True)
class Change:
    """A figure that differs from its baseline. ``verdict``: regressed (over the
    threshold: fails the test), improved (down by more than the threshold, or by
    anything when there is none), grew (up, within the threshold), new, gone."""

    test: str
    type: str
    field: str
    baseline: int | None
    current: int | None
    threshold: Threshold | None
    verdict: str

    def delta_text(self) -> str:
        if self.baseline is None or self.current is None:
            return ""
        delta = self.current - self.baseline
        sign = "+" if delta >= 0 else "-"
        ratio = f" ({delta / self.baseline:+.1%})" if self.baseline else ""
        return f"{sign}{format_value(self.field, abs(delta))}{ratio}"

    def text(self) -> str:
        return f"{self.type}: {self.detail()}"

    def detail(self) -> str:
        """The change without the type's name."""
        f, label = self.field, FIELD_LABEL[self.field]
        if self.verdict == "new":
            return f"new type (not in the baseline): {label} {format_exact(f, self.current or 0)}"
        if self.verdict == "gone":
            return f"gone (was {label} {format_exact(f, self.baseline or 0)} in the baseline)"
        text = (f"{label} {format_exact(f, self.current)} vs baseline "
                f"{format_exact(f, self.baseline)}: {self.delta_text()}")
        if self.threshold is not None:
            relation = ">" if self.verdict == "regressed" else "<=" if self.verdict == "grew" else "beyond"
            text += f", {relation} threshold {self.threshold.text()} ({self.threshold.origin})"
        return text


@dataclass
class Comparison:
    """A test's figures against its baseline."""

    test: str
    changes: list[Change]
    in_baseline: bool = True

    @property
    def regressions(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "regressed"]

    @property
    def improvements(self) -> list[Change]:
        return [c for c in self.changes if c.verdict == "improved"]


def compare(test: str, figures: Mapping[str, Figures], baseline: Mapping[str, Figures] | None,
            thresholds: Mapping[str, Threshold], kept: Iterable[str] | None = None) -> Comparison:
    """Every stored figure against this run. ``kept``: the rows this run would store
    (a baseline holds a few rows per test): a kept row the baseline lacks is "new";
    a stored row the profile lacks is "gone". Types new in this run are reported,
    never failed: renaming a type is not a regression, and "(total)" still catches
    memory that moved to a new type."""
    if baseline is None:
        return Comparison(test, [], in_baseline=False)
    changes = []
    candidates = set(figures) if kept is None else set(kept) & set(figures)
    for label in sort_labels(candidates | set(baseline)):
        now, then = figures.get(label), baseline.get(label)
        if then is None:
            changes.append(Change(test, label, "peak", None, now.peak, None, "new"))
            continue
        if now is None:
            changes.append(Change(test, label, "peak", then.peak, None, None, "gone"))
            continue
        for name in FIELDS:
            change = _compare_figure(test, label, name, then.get(name), now.get(name), thresholds.get(name))
            if change:
                changes.append(change)
    return Comparison(test, changes)


def kept_labels(figures: Mapping[str, Figures], budgeted: Iterable[str], top: int = BASELINE_TOP) -> list[str]:
    """The rows a baseline stores for a test: the totals, the budgeted rows, and the
    ``top`` typed rows by peak (a GoogleTest binary has a thousand types in every test:
    storing them all made baselines of hundreds of megabytes)."""
    typed = (label for label in figures if label not in (TOTAL, UNTYPED))
    largest = heapq.nsmallest(top, typed, key=lambda label: (-figures[label].peak, label))
    kept = {TOTAL, UNTYPED} | set(budgeted) | set(largest)
    return sort_labels(label for label in kept if label in figures)


def _compare_figure(test, label, name, base: int, current: int, threshold: Threshold | None) -> Change | None:
    if base == current:
        return None
    if threshold is None:
        verdict = "grew" if current > base else "improved"
    elif threshold.exceeded(base, current):
        verdict = "regressed"
    elif current < base:
        verdict = "improved" if threshold.improved(base, current) else "shrank"
    else:
        verdict = "grew"
    return Change(test, label, name, base, current, threshold, verdict)


class Baseline:
    """Stored figures per test and type: a JSON file meant to be committed and
    reviewed, so tests and types come in a stable order, one type per line, and the
    file ends with a newline (diffs show only what changed)."""

    def __init__(self, path: Path, tests: dict[str, dict[str, Figures]] | None = None, notes: list[str] | None = None):
        self.path = Path(path)
        self.tests: dict[str, dict[str, Figures]] = tests or {}
        self.notes: list[str] = notes or []  # what the reader should know (an old version)

    @classmethod
    def load(cls, path: str | Path) -> "Baseline":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise BudgetError(f"{path}: no such baseline file (write it with --heap-save-baseline)") from None
        except (OSError, UnicodeDecodeError) as e:
            raise BudgetError(f"{path}: cannot read the baseline: {e}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise BudgetError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
        if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT:
            raise BudgetError(f"{path}: not a HeapType baseline (no \"format\": \"{BASELINE_FORMAT}\")")
        version = data.get("version")
        if version == 1:
            return cls(path, _tests_v1(path, data), [
                f"{path} is a version 1 baseline (every type of every test): it is compared as it is; "
                f"--heap-save-baseline rewrites it as version {BASELINE_VERSION} (the totals, the budgeted types "
                "and the top types of each test)"])
        if version != BASELINE_VERSION:
            raise BudgetError(f"{path}: baseline version {version!r} is not supported "
                              f"(this HeapType reads versions 1 and {BASELINE_VERSION}): save it again")
        return cls(path, _tests_v2(path, data))

    def figures(self, test: str) -> dict[str, Figures] | None:
        return self.tests.get(test)

    def to_json(self) -> str:
        """Version 2: each type on one line as [peak, bytes, allocations, leaked]."""
        lines = ["{", f'  "fields": {json.dumps(list(FIELDS))},', f'  "format": "{BASELINE_FORMAT}",', '  "tests": {']
        tests = sorted(self.tests)
        for n, test in enumerate(tests):
            rows = self.tests[test]
            labels = sort_labels(rows)
            lines.append(f"    {json.dumps(test)}: {{")
            for m, label in enumerate(labels):
                comma = "," if m < len(labels) - 1 else ""
                lines.append(f"      {json.dumps(label)}: {json.dumps(list(rows[label])[:len(FIELDS)])}{comma}")
            lines.append("    }" + ("," if n < len(tests) - 1 else ""))
        lines += ["  },", f'  "version": {BASELINE_VERSION}', "}"]
        return "\n".join(lines) + "\n"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(self.to_json(), encoding="utf-8")
        temporary.replace(self.path)


def merge_baselines(paths: Iterable[str | Path], output: str | Path) -> Baseline:
    """The baselines of a run's shards joined into the one a full run saves (each
    test's figures as its shard stored them; written in the same order, so the merge
    of a sharded run equals the full run's file byte for byte). A test in two inputs
    with different figures is an error naming both files."""
    loaded = [Baseline.load(path) for path in paths]
    tests = join_by_test(((baseline.path, baseline.tests) for baseline in loaded), "figures")
    return Baseline(Path(output), tests, [note for baseline in loaded for note in baseline.notes])


def _tests_v2(path: Path, data: dict) -> dict[str, dict[str, Figures]]:
    fields = data.get("fields")
    if fields != list(FIELDS):
        raise BudgetError(f"{path}: malformed baseline: \"fields\" must be {json.dumps(list(FIELDS))}")
    try:
        return {test: {label: Figures(*(int(v) for v in row)) for label, row in types.items()}
                for test, types in data.get("tests", {}).items()}
    except (AttributeError, TypeError, ValueError):
        raise BudgetError(f"{path}: malformed baseline: expected tests -> type -> [{', '.join(FIELDS)}]") from None


def _tests_v1(path: Path, data: dict) -> dict[str, dict[str, Figures]]:
    try:
        return {test: {label: Figures.from_dict(row) for label, row in types.items()}
                for test, types in data.get("tests", {}).items()}
    except (AttributeError, TypeError, ValueError):
        raise BudgetError(f"{path}: malformed baseline: expected tests -> type -> figures") from None
