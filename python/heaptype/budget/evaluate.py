"""Measuring a profile and judging it against a budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple

from .. import _core
from ..analyze.labels import TOTAL, UNTYPED
from ..analyze.patterns import is_glob
from .matching import close_names, rows_holding
from .model import Budget, Limit
from .values import FIELD_LABEL, FIELDS, LIMIT_FIELDS, format_exact

# --- measuring a profile --------------------------------------------------------------------

class Figures(NamedTuple):
    """The figures budgets are about, for one row of a profile (a tuple: a profile of
    a GoogleTest binary has a thousand rows, measured for every test). The findings
    count against the row of the block's type."""

    peak: int = 0
    bytes: int = 0
    allocations: int = 0
    leaked: int = 0
    mismatched_deletes: int = 0
    mismatched_frees: int = 0

    def get(self, name: str) -> int:
        return getattr(self, name)

    def as_dict(self) -> dict[str, int]:
        return {name: self.get(name) for name in FIELDS}  # the figures baselines keep

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Figures":
        return cls(**{name: int(data.get(name, 0)) for name in FIELDS})


def type_label(type_name: str | None) -> str:
    return UNTYPED if type_name is None else type_name


def measure(profile) -> dict[str, Figures]:
    """Figures per row label of a loaded profile, plus the whole process as "(total)"."""
    # The pass's groups as they come: by_type() would sort them, and a GoogleTest binary
    # has a thousand types in every test, measured for every test.
    figures = MeasuredFigures()
    for r in profile.analysis(infer=False).types:
        allocations = r.allocations
        if allocations or r.live_blocks:
            name = r.type
            label = UNTYPED if name is None else name
            figures[label] = Figures(r.peak_bytes, r.bytes, allocations, r.live_bytes)
            if getattr(profile, "aggregated", False) and r.peak_at_heap_peak:
                figures.snapshot_peaks.add(label)
    t = profile.totals
    figures[TOTAL] = Figures(t.peak_bytes, t.bytes, t.allocations, t.live_bytes)
    for finding in getattr(profile, "findings", ()):
        field = "mismatched_deletes" if finding["kind"] == "mismatched_delete" else "mismatched_frees"
        label = finding["allocated"] if finding["allocated"] in figures else UNTYPED
        for row in {label, TOTAL}:
            current = figures.get(row, Figures())
            figures[row] = current._replace(**{field: current.get(field) + finding["count"]})
    return figures


class MeasuredFigures(dict):
    """Figures by row label; ``snapshot_peaks``: the labels whose peak, in an aggregated
    profile, is their share of the heap's peak rather than their own (a budget cannot
    judge it: the run is made again recording events)."""

    def __init__(self, rows: dict | None = None):
        super().__init__(rows or {})
        self.snapshot_peaks: set[str] = set()


class CheckFigures(MeasuredFigures):
    """The rows of a profile a budget check uses (``measure_for_check``), as ``measure``
    gives them, and the names of all its typed rows when a hint needs them."""

    def __init__(self, rows: dict[str, Figures], source: "_core.BudgetRows"):
        super().__init__(rows)
        self._source = source
        self.typed_rows = source.typed_rows
        self.snapshot_peaks = {UNTYPED if name is None else name for name in source.snapshot_peaks()}

    def typed_labels(self, containing: str = "") -> list[str]:
        """Every typed row's label (that contains ``containing``), not only those at hand
        (in the order ``measure`` gives)."""
        return self._source.typed_names(containing)


def measure_for_check(profile, budget: Budget, *, wanted: Iterable[str] = (), top: int = 5,
                      complete: bool = True) -> dict[str, Figures]:
    """``measure(profile)`` as far as a check of ``budget`` can tell, from one pass in the
    core that makes no object per type: the rows a named pattern covers, those over a
    [defaults] limit, the ``top`` typed rows by peak (ties by name), the rows ``wanted``
    by label (a baseline's), the untyped row and the total. The rows left out are typed
    rows that only [defaults] cover and that are within those limits: ``evaluate`` gives
    them the same verdict (passed, not shown), so it judges these figures as it judges
    measure()'s, apart from the ``limits`` it lists. ``complete``: False when ``leaked``
    limits do not apply (a profile cut short). A filtered view is measured whole."""
    names = getattr(profile, "_names", None)
    if names is None or getattr(profile, "filters", None):
        return measure(profile)
    defaults = budget.default_limits
    default_limits = [(FIELDS.index(name), limit.value) for name, limit in defaults.items()
                      if complete or name != "leaked"]
    patterns = [r.pattern for r in budget.named_patterns() if r.pattern not in (UNTYPED, TOTAL)]
    from ..analyze.naming import NamingError
    from ..analyze.profile import ProfileError

    try:
        rows = _core.BudgetRows(profile.raw, names, patterns=patterns,
                                wanted=[label for label in wanted if label not in (UNTYPED, TOTAL)],
                                default_limits=default_limits, top=top)
    except (NamingError, _core.SymbolError) as e:  # as Profile.analysis() says it
        raise ProfileError(f"{profile.path}: cannot name the types: {e}") from None
    figures = {UNTYPED if name is None else name: Figures(*values) for name, values in rows.rows()}
    figures[TOTAL] = Figures(*rows.totals)
    return CheckFigures(figures, rows)


def unjudged_peaks(figures: Mapping[str, Figures], evaluation: "Evaluation") -> list[str]:
    """The rows whose peak a limit checks but whose figures hold only their share of the
    heap's peak (``MeasuredFigures.snapshot_peaks``, aggregated profiles): a verdict on
    them needs a run that records events."""
    snapshot = getattr(figures, "snapshot_peaks", ())
    return sorted(label for label in snapshot if "peak" in evaluation.limits.get(label, {}))


def sort_labels(labels: Iterable[str]) -> list[str]:
    """A stable order for tables: the total first, the untyped row last."""
    return sorted(labels, key=lambda label: (label != TOTAL, label == UNTYPED, label))


# --- evaluating ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Violation:
    """A figure over its limit."""

    test: str
    type: str
    field: str
    limit: Limit
    measured: int

    @property
    def over(self) -> int:
        return self.measured - self.limit.value

    def headline(self) -> str:
        f = self.field
        ratio = f" (+{self.over / self.limit.value:.1%})" if self.limit.value else ""
        return (f"{FIELD_LABEL[f]} {format_exact(f, self.measured)} > limit {format_exact(f, self.limit.value)}, "
                f"over by {format_exact(f, self.over)}{ratio}")


@dataclass
class Evaluation:
    """A test's verdict: the figures, the limits that applied, what is over, and which
    named patterns of the budget matched rows of the profile."""

    test: str
    figures: dict[str, Figures]
    limits: dict[str, dict[str, Limit]]
    violations: list[Violation]
    unmatched: list["UnmatchedPattern"] = field(default_factory=list)
    profile_path: str | None = None
    complete: bool = True
    named: set[str] = field(default_factory=set)            # rows a named pattern covers
    matched_patterns: set[str] = field(default_factory=set)  # UnmatchedPattern.key of those that matched

    @property
    def passed(self) -> bool:
        return not self.violations

    @property
    def warnings(self) -> list[str]:
        return [f"{self.test}: {u.message()}" for u in self.unmatched]

    def shown_labels(self, budget: Budget | None = None) -> list[str]:
        """Rows worth a line in a summary: the total, every row a named rule covers, and
        every row over its limit (not all rows that only [defaults] cover)."""
        labels = {TOTAL} | {v.type for v in self.violations} | (self.named if budget is not None else set(self.limits))
        return sort_labels(label for label in labels if label in self.figures)


def evaluate(budget: Budget, figures: Mapping[str, Figures], *, profile_path: str | None = None,
             complete: bool = True, hints: dict | None = None) -> Evaluation:
    """Check every row of a profile against the limits that cover it. A profile cut
    short (crash, kill) has no exit: what was live then is not a leak, so `leaked`
    limits are not checked on it. ``hints``: a cache of close names per unmatched
    pattern, kept across the tests of a session (one lookup per pattern, not per test)."""
    limits: dict[str, dict[str, Limit]] = {}  # of the rows given (measure_for_check leaves some out)
    violations = []
    named = set()
    checks: dict[int, list[tuple[str, int, Limit]]] = {}  # per distinct limits: (field, index, limit)
    limits_and_naming = budget.limits_and_naming
    for label, row in figures.items():
        row_limits, covered_by_name = limits_and_naming(label)
        if covered_by_name:
            named.add(label)
        if not complete and "leaked" in row_limits:
            row_limits = {k: v for k, v in row_limits.items() if k != "leaked"}
        if not row_limits:
            continue
        limits[label] = row_limits
        row_checks = checks.get(id(row_limits))
        if row_checks is None:  # rows only [defaults] cover share one limits dict, and this list
            row_checks = checks[id(row_limits)] = [(n, LIMIT_FIELDS.index(n), lim) for n, lim in row_limits.items()]
        for name, index, limit in row_checks:
            if row[index] > limit.value:
                violations.append(Violation(budget.test, label, name, limit, row[index]))
    order = {label: i for i, label in enumerate(sort_labels({v.type for v in violations}))}
    violations.sort(key=lambda v: (order[v.type], LIMIT_FIELDS.index(v.field)))
    matched, unmatched = pattern_matches(budget, figures, named, hints)
    return Evaluation(budget.test, dict(figures), limits, violations, unmatched, profile_path, complete, named,
                      matched)


@dataclass(frozen=True)
class UnmatchedPattern:
    """A named type (or glob) that no row of a profile matches: a budget for a misspelt
    type would pass forever. A suite warns once per pattern, and only when it matches
    in none of the tests it applies to."""

    pattern: str
    origin: str
    close: tuple[str, ...]
    typed_rows: int
    holders: tuple[str, ...] = ()  # rows whose blocks hold the type (matching.rows_holding)

    @property
    def key(self) -> str:
        return f"{self.pattern}\0{self.origin}"

    def message(self, where: str = "the profile") -> str:
        kind = "matches no type" if is_glob(self.pattern) else "never appears"
        if self.holders:  # the type itself, whole, inside another's name: a surer lead than a spelling
            hint = (f"; it is allocated inside {', '.join(self.holders)} (a block that holds one, as "
                    f"std::make_shared's does): budget that row, or every such row with '*{self.pattern}*'")
        elif self.close:
            hint = f"; close type names: {', '.join(self.close)}"
        else:
            hint = f"; the profile has {self.typed_rows} typed rows (heaptype report shows them)"
        return f"budget for type '{self.pattern}' ({self.origin}): the type {kind} in {where}{hint}"


def typed_labels(figures: Mapping[str, Figures], containing: str = "") -> list[str]:
    """Every typed row's label (that contains ``containing``), also those a check's
    figures left out."""
    if isinstance(figures, CheckFigures):
        return figures.typed_labels(containing)
    return [label for label in figures if label not in (UNTYPED, TOTAL) and containing in label]


def pattern_matches(budget: Budget, figures: Mapping[str, Figures], named: set[str] | None = None,
                    hints: dict | None = None) -> tuple[set[str], list[UnmatchedPattern]]:
    """The keys of the named patterns some row matches, and those no row matches.
    ``named``: the rows some named pattern covers, when known (only they can match);
    ``hints``: close names already found for a pattern."""
    typed = [label for label in (figures if named is None else named) if label not in (UNTYPED, TOTAL)]
    matched: set[str] = set()
    unmatched: dict[str, UnmatchedPattern] = {}
    for rule in sorted(budget.named_patterns(), key=lambda r: r.order):
        pattern = rule.pattern
        if pattern in (UNTYPED, TOTAL, "*"):
            continue
        origin = next(iter(rule.limits.values())).origin if rule.limits else budget.source
        key = f"{pattern}\0{origin}"
        if key in matched or key in unmatched:
            continue
        if any(rule.covers(label) for label in typed):
            matched.add(key)
            continue
        if hints is None or key not in hints:
            all_typed = typed_labels(figures)
            close = close_names(pattern.replace("*", "") if is_glob(pattern) else pattern, all_typed)
            holders = () if is_glob(pattern) else tuple(rows_holding(pattern, all_typed))
            hint = (tuple(close), len(all_typed), holders)
            if hints is not None:
                hints[key] = hint
        else:
            hint = hints[key]
            if not hint[2] and not is_glob(pattern):  # the type may be held in this test's rows only
                # (only the rows whose names contain it: a suite's tests mostly lack the type)
                holders = tuple(rows_holding(pattern, typed_labels(figures, pattern)))
                if holders:
                    hint = hints[key] = (hint[0], hint[1], holders)
        unmatched[key] = UnmatchedPattern(pattern, origin, *hint)
    return matched, list(unmatched.values())


def unmatched_warnings(budget: Budget, figures: Mapping[str, Figures]) -> list[str]:
    """A warning for each named type (or glob) that no row of one profile matches."""
    return [f"{budget.test}: {u.message()}" for u in pattern_matches(budget, figures)[1]]
