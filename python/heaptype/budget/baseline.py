"""Baselines: stored figures per test and type, compared against a run with
regression thresholds (as pytest-benchmark compares against a saved run)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .evaluate import Figures, sort_labels
from .model import Threshold
from .values import FIELDS, BudgetError, format_exact, format_value

BASELINE_FORMAT = "heaptype-baseline"
BASELINE_VERSION = 1

BASELINE_FORMAT = "heaptype-baseline"
BASELINE_VERSION = 1

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
        f = self.field
        if self.verdict == "new":
            return f"{self.type}: new type (not in the baseline): {f} {format_exact(f, self.current or 0)}"
        if self.verdict == "gone":
            return f"{self.type}: gone (was {f} {format_exact(f, self.baseline or 0)} in the baseline)"
        text = (f"{self.type}: {f} {format_exact(f, self.current)} vs baseline "
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
            thresholds: Mapping[str, Threshold]) -> Comparison:
    """Every figure against the baseline. Types new in this run are reported, never
    failed: renaming a type is not a regression, and "(total)" still catches memory
    that moved to a new type."""
    if baseline is None:
        return Comparison(test, [], in_baseline=False)
    changes = []
    for label in sort_labels(set(figures) | set(baseline)):
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
    """Stored figures per test and type: a JSON file meant to be committed, so its
    keys are sorted and it ends with a newline (diffs show only what changed)."""

    def __init__(self, path: Path, tests: dict[str, dict[str, Figures]] | None = None):
        self.path = Path(path)
        self.tests: dict[str, dict[str, Figures]] = tests or {}

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
        if data.get("version") != BASELINE_VERSION:
            raise BudgetError(f"{path}: baseline version {data.get('version')!r} is not supported "
                              f"(this HeapType writes version {BASELINE_VERSION}): save it again")
        try:
            tests = {test: {label: Figures.from_dict(row) for label, row in types.items()}
                     for test, types in data.get("tests", {}).items()}
        except (AttributeError, TypeError, ValueError):
            raise BudgetError(f"{path}: malformed baseline: expected tests -> type -> figures") from None
        return cls(path, tests)

    def figures(self, test: str) -> dict[str, Figures] | None:
        return self.tests.get(test)

    def update(self, measured: Mapping[str, Mapping[str, Figures]]) -> None:
        """Replace the tests that were measured; tests not run keep their figures."""
        for test, figures in measured.items():
            self.tests[test] = dict(figures)

    def to_json(self) -> str:
        data = {"format": BASELINE_FORMAT, "version": BASELINE_VERSION,
                "tests": {test: {label: figs.as_dict() for label, figs in types.items()}
                          for test, types in self.tests.items()}}
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        temporary.write_text(self.to_json(), encoding="utf-8")
        temporary.replace(self.path)
