"""The budget model: limits, rules, regression thresholds, tests and budget files."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..analyze.labels import TOTAL, UNTYPED
from ..analyze.patterns import is_glob
from .matching import did_you_mean, name_matches, pattern_specificity, type_matches
from .values import FIELDS, LIMIT_FIELDS, parse_limit, format_value

# --- the budget file -------------------------------------------------------------------------

TOP_KEYS = ("defaults", "tests", "ctest")
LIMIT_KEYS = LIMIT_FIELDS
DEFAULTS_KEYS = LIMIT_FIELDS + ("timeout", "types", "regression")
TEST_KEYS = ("name", "command", "cwd", "env", "timeout", "returncode", "types", "regression")
CTEST_KEYS = ("build_dir", "configuration", "tests", "exclude", "gtest_split", "timeout")


@dataclass(frozen=True)
class Limit:
    """One limit and where it was set, so a failure can point at the line to edit."""

    value: int
    origin: str


@dataclass(frozen=True)
class Rule:
    """Limits for the rows a type pattern covers. ``pattern`` None: [defaults]."""

    pattern: str | None
    limits: Mapping[str, Limit]
    rank: tuple

    def covers(self, label: str) -> bool:
        if self.pattern is not None and not self.is_glob:
            return self.pattern == label  # the common case, without the glob matcher
        return type_matches(self.pattern, label)

    @cached_property
    def is_glob(self) -> bool:
        return self.pattern is not None and is_glob(self.pattern)

    @property
    def order(self) -> int:
        """Position in the file (rank's last element is minus it)."""
        return -self.rank[-1]


@dataclass(frozen=True)
class Threshold:
    """How much a figure may grow over its baseline: a percentage or an amount."""

    field: str
    value: float
    percent: bool
    origin: str

    def text(self) -> str:
        if self.percent:
            return f"{self.value:g}%"
        return format_value(self.field, int(self.value))

    def allowance(self, base: int) -> float:
        return base * self.value / 100 if self.percent else self.value

    def exceeded(self, base: int, current: int) -> bool:
        return current - base > self.allowance(base)

    def improved(self, base: int, current: int) -> bool:
        return base - current > self.allowance(base)


@dataclass
class TestEntry:
    """One [[tests]] entry: a command to run, or (without a command) budgets for the
    CTest tests whose names match ``name``."""

    name: str
    command: list[str] | None
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    returncode: int
    rules: list[Rule]
    thresholds: dict[str, Threshold]
    origin: str
    line: int

    @property
    def is_pattern(self) -> bool:
        return self.command is None


@dataclass
class CTestSettings:
    """[ctest]: turn the tests of a CMake build tree into budget tests."""

    build_dir: Path
    configuration: str | None
    include: list[str]
    exclude: list[str]
    gtest_split: bool | list[str]
    timeout: float | None
    origin: str
    line: int


@dataclass
class Budget:
    """The merged budget of one test: rules, most specific first, and regression
    thresholds: the test's own, else the command line's, else [defaults.regression]."""

    test: str
    rules: list[Rule]
    test_thresholds: dict[str, Threshold] = field(default_factory=dict)
    timeout: float | None = None            # the test's own entry's, if any
    source: str = ""
    default_thresholds: dict[str, Threshold] = field(default_factory=dict)
    cli_thresholds: dict[str, Threshold] = field(default_factory=dict)
    default_timeout: float | None = None    # [defaults] timeout

    def __post_init__(self):
        self.rules = sorted(self.rules, key=lambda r: r.rank, reverse=True)

    @property
    def thresholds(self) -> dict[str, Threshold]:
        return {**self.default_thresholds, **self.cli_thresholds, **self.test_thresholds}

    def limits_for(self, label: str) -> dict[str, Limit]:
        """Each field's limit for a row, taken from the most specific covering rule that
        sets that field (so `[defaults] leaked = 0` holds unless a type overrides it)."""
        return self.limits_and_naming(label)[0]

    def limits_and_naming(self, label: str) -> tuple[dict[str, Limit], bool]:
        """``limits_for(label)``, and whether a named pattern (not [defaults]) covers it.
        Rows no pattern names share one answer: a GoogleTest binary has a thousand
        types in every test, most of them covered by [defaults] alone."""
        exact, globs, unnamed, plain = self._rule_index
        rules = exact.get(label, ())
        matching_globs = [r for r in globs if r.covers(label)] if globs else ()
        if not rules and not matching_globs and label not in (UNTYPED, TOTAL):
            return plain, False
        named = bool(rules or matching_globs)
        chosen = set(map(id, rules)) | set(map(id, matching_globs))
        limits: dict[str, Limit] = {}
        for rule in self.rules:
            if id(rule) in chosen or (rule.pattern is None and label not in (UNTYPED, TOTAL)):
                for name, limit in rule.limits.items():
                    limits.setdefault(name, limit)
        return {name: limits[name] for name in LIMIT_FIELDS if name in limits}, named

    @property
    def default_limits(self) -> dict[str, Limit]:
        """The limits of a typed row that no named pattern covers ([defaults], and the
        command line's limits for every typed row)."""
        return self._rule_index[3]

    @cached_property
    def _rule_index(self) -> tuple[dict[str, list[Rule]], list[Rule], list[Rule], dict[str, Limit]]:
        """Exact patterns by name, the globs, the [defaults] rules, and the limits of a
        typed row that only [defaults] cover."""
        exact: dict[str, list[Rule]] = {}
        for rule in self.rules:
            if rule.pattern is not None and not rule.is_glob:
                exact.setdefault(rule.pattern, []).append(rule)
        globs = [r for r in self.rules if r.is_glob]
        unnamed = [r for r in self.rules if r.pattern is None]
        plain: dict[str, Limit] = {}
        for rule in unnamed:
            for name, limit in rule.limits.items():
                plain.setdefault(name, limit)
        return exact, globs, unnamed, {name: plain[name] for name in LIMIT_FIELDS if name in plain}

    def named_patterns(self) -> list[Rule]:
        """Rules that name types (not [defaults]); their rows are shown in summaries."""
        return [r for r in self.rules if r.pattern is not None]

    def with_thresholds(self, cli: Mapping[str, Threshold]) -> "Budget":
        """A copy with the command line's thresholds (--heap-compare-fail): they beat
        [defaults.regression], not a test's own `regression` table."""
        return replace(self, cli_thresholds=dict(cli))

    def with_rules(self, rules: Iterable[Rule]) -> "Budget":
        """A copy with more rules (the command line's, which rank below every file rule)."""
        rules = list(rules)
        return replace(self, rules=self.rules + rules) if rules else self

    def named(self, test: str) -> "Budget":
        return replace(self, test=test)


@dataclass
class BudgetFile:
    """A parsed budget file: heap-budget.toml, or [tool.heaptype] in pyproject.toml."""

    path: Path
    defaults: list[Rule]
    default_thresholds: dict[str, Threshold]
    default_timeout: float | None
    tests: list[TestEntry]
    ctest: CTestSettings | None

    @property
    def directory(self) -> Path:
        return self.path.parent

    def command_tests(self) -> list[TestEntry]:
        return [t for t in self.tests if not t.is_pattern]

    def budget_for(self, test_name: str, entry: TestEntry | None = None, aliases: Iterable[str] = (),
                   inherited: Iterable[TestEntry] = ()) -> Budget:
        """The budget of a test: [defaults], plus its own entry, plus every command-less
        entry whose name (or glob) matches the test's name or one of its ``aliases``
        (a GoogleTest case `unit[Suite.Case]` is budgeted as `unit` too), plus the
        ``inherited`` entries (the program's own entry, for a case checked on its own)."""
        rules = list(self.defaults)
        thresholds: dict[str, Threshold] = {}
        timeout = None
        names = [test_name, *aliases]
        inherited = list(inherited)
        matching = [t for t in self.tests
                    if t is entry or any(t is i for i in inherited)
                    or (t.is_pattern and any(name_matches(t.name, n) for n in names))]
        matching.sort(key=lambda t: (t is entry, pattern_specificity(t.name)))
        for t in matching:
            rules += t.rules
            thresholds.update(t.thresholds)
            if t.timeout is not None:
                timeout = t.timeout
        sources = ", ".join(t.origin for t in matching) or str(self.path)
        return Budget(test_name, rules, thresholds, timeout, sources, dict(self.default_thresholds),
                      default_timeout=self.default_timeout)

    def entry_names(self) -> list[str]:
        return [t.name for t in self.tests]



def command_line_rule(pattern: str | None, field_name: str, value: int, origin: str) -> Rule:
    """A limit given on the command line: it ranks below [defaults] and any pattern of
    a file or marker, so whatever a budget sets for that row and field wins."""
    return Rule(pattern, {field_name: Limit(value, origin)}, ((-1, 0), -1, (0, 0), 0))


# --- baselines and regression thresholds ----------------------------------------------------

THRESHOLD_HELP = ("FIELD:AMOUNT with FIELD one of peak, bytes, allocations, leaked and AMOUNT a percentage "
                  "(peak:5%) or an absolute amount (peak:64KiB, allocations:100)")


def parse_threshold_value(field_name: str, value: Any, origin: str) -> Threshold:
    """A threshold from "5%", "64 KiB", 100: percent of the baseline, or an amount."""
    if isinstance(value, str) and value.strip().endswith("%"):
        number = value.strip()[:-1].strip()
        try:
            percent = float(number)
        except ValueError:
            raise ValueError(f"{value!r} is not a percentage (e.g. \"5%\")") from None
        if percent < 0 or not math.isfinite(percent):
            raise ValueError(f"{value!r}: a threshold cannot be negative")
        return Threshold(field_name, percent, True, origin)
    return Threshold(field_name, parse_limit(field_name, value), False, origin)


def parse_threshold_option(text: str) -> Threshold:
    """``--heap-compare-fail=peak:5%`` (raises ValueError with the expected format)."""
    name, sep, amount = text.partition(":")
    name = name.strip()
    if not sep or not amount.strip():
        raise ValueError(f"{text!r}: expected {THRESHOLD_HELP}")
    if name not in FIELDS:
        raise ValueError(f"{text!r}: unknown field '{name}': {did_you_mean(name, FIELDS)}")
    try:
        return parse_threshold_value(name, amount.strip(), f"--heap-compare-fail={text}")
    except ValueError as e:
        raise ValueError(f"{text!r}: {e}") from None
