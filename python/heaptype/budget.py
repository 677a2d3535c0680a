"""Heap budgets: limits per C++ type, checked against a HeapType profile.

One engine for every integration: ``pytest --heap-budget`` (``pytest_plugin``),
``heaptype check`` (``check_command``) and the Bazel budget test. It reads budget files
(TOML), matches type names, evaluates limits against a loaded profile, writes the
failure text, and keeps baselines (JSON) for regression thresholds. It imports nothing
from pytest and runs no process: callers run programs and load profiles, so each
integration decides how to run things and this module decides what "over budget" means.

A budget file::

    [defaults]                      # every typed row of every test, unless overridden
    leaked = 0

    [[tests]]
    name = "alloc_bench"
    command = ["build/alloc_bench", "10000"]   # relative to this file
    [tests.types."Small"]           # exact name, glob, "*", "(untyped)" or "(total)"
    peak = "64 KiB"

The full format is in docs/budgets.md.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
import sys
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

FIELDS = ("peak", "bytes", "allocations", "leaked")
SIZE_FIELDS = frozenset({"peak", "bytes", "leaked"})
FIELD_MEANING = {
    "peak": "most live bytes at any moment",
    "bytes": "bytes allocated in all",
    "allocations": "number of allocations",
    "leaked": "bytes still live at exit",
}
UNTYPED = "(untyped)"
TOTAL = "(total)"
DEFAULT_FILE = "heap-budget.toml"
BASELINE_FORMAT = "heaptype-baseline"
BASELINE_VERSION = 1

SIZE_HELP = ("a size is a whole number of bytes, or a string with a unit: B, KiB, MiB, GiB "
             "(KB, MB, GB are read as the same 1024-based units), e.g. \"64 KiB\" or \"1.5 MiB\"")


class BudgetError(ValueError):
    """Bad budget input. The message is complete and names the file, line and column,
    so that every caller can print it as it is, without a traceback."""


class HeapBudgetWarning(UserWarning):
    """A budget that is valid but probably not what was meant (a type that never
    appears). A warning, not an error: types come and go with compiler versions."""


# --- sizes and counts --------------------------------------------------------------------

_UNITS = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20,
          "gb": 1 << 30, "gib": 1 << 30, "tb": 1 << 40, "tib": 1 << 40}
_SIZE_RE = re.compile(r"^\s*([+-]?[0-9][0-9_,]*(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(value: Any) -> int:
    """Bytes from ``65536``, ``"64 KiB"``, ``"1.5MB"``: 1024-based whatever the spelling,
    as pytest-memray reads them, because "KB" in a memory budget always meant KiB to
    its authors. Fractions are rounded down to whole bytes. Raises ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{value!r} is not a size: {SIZE_HELP}")
    if isinstance(value, int):
        number, unit = Decimal(value), 1
    else:
        match = _SIZE_RE.match(value)
        unit = _UNITS.get(match.group(2).lower()) if match and match.group(2) else 1
        if not match or unit is None:
            raise ValueError(f"{value!r} is not a size: {SIZE_HELP}")
        try:
            number = Decimal(match.group(1).replace("_", "").replace(",", ""))
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a size: {SIZE_HELP}") from None
    if number < 0:
        raise ValueError(f"{value!r}: a size cannot be negative")
    return int(number * unit)


def parse_count(value: Any) -> int:
    """A non-negative whole number (allocations), from an int or a string of digits."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9][0-9_,]*\s*", value):
        value = int(value.replace("_", "").replace(",", ""))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a count: use a whole number, e.g. 20000")
    if value < 0:
        raise ValueError(f"{value}: a count cannot be negative")
    return value


def parse_limit(field_name: str, value: Any) -> int:
    return parse_size(value) if field_name in SIZE_FIELDS else parse_count(value)


def format_size(n: int) -> str:
    """Human sizes, 1024-based: 512 B, 64 KiB, 78.1 KiB (the report's style)."""
    from .report import format_bytes

    return format_bytes(n) if n >= 0 else "-" + format_bytes(-n)


def format_value(field_name: str, n: int) -> str:
    return format_size(n) if field_name in SIZE_FIELDS else f"{n:,}"


def format_exact(field_name: str, n: int) -> str:
    """A value as a human number, with the exact bytes beside it when they differ."""
    human = format_value(field_name, n)
    return human if field_name not in SIZE_FIELDS or n < 1024 else f"{human} ({n:,} B)"


# --- type name patterns ------------------------------------------------------------------

def is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def _glob_regex(pattern: str) -> re.Pattern:
    """`*` any run of characters, `?` one; `[` stays literal, since type names hold
    brackets (``int [MEM_TYPE_IMGBUF]``, ``Token[]``)."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts) + r"\Z", re.S)


def name_matches(pattern: str, name: str) -> bool:
    """Whether a test name or type name matches a pattern (exact or glob)."""
    return _glob_regex(pattern).match(name) is not None if is_glob(pattern) else pattern == name


def pattern_specificity(pattern: str | None) -> tuple[int, int]:
    """Which of several matching patterns sets a limit: an exact name beats a glob, a
    glob with more literal characters beats a shorter one, "*" beats [defaults]."""
    if pattern is None:            # [defaults] limits
        return (0, 0)
    if pattern == "*":
        return (1, 0)
    if is_glob(pattern):
        return (2, sum(c not in "*?" for c in pattern))
    return (3, len(pattern))


def type_matches(pattern: str | None, label: str) -> bool:
    """Whether a rule's type pattern covers a row. [defaults] (pattern None), "*" and
    globs cover typed rows only: every program has untyped memory of its own (stdout's
    buffer, libstdc++'s emergency pool), so "(untyped)" and "(total)" are budgeted only
    when named."""
    special = label in (UNTYPED, TOTAL)
    if pattern is None:
        return not special
    if pattern in (UNTYPED, TOTAL) or special:
        return pattern == label
    return name_matches(pattern, label)


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    candidates = list(candidates)
    close = close_names(name, candidates, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return "expected one of: " + ", ".join(candidates)


# --- locating keys in TOML source ------------------------------------------------------------

_BARE = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_KEY_PART = f"(?:{_BARE}|{_BASIC}|{_LITERAL})"
_DOTTED = f"{_KEY_PART}(?:\\s*\\.\\s*{_KEY_PART})*"
_TOKEN = re.compile(f"(?P<key>{_DOTTED})\\s*=(?!=)|(?P<str>{_BASIC}|{_LITERAL})|(?P<open>\\{{)|(?P<close>\\}})|(?P<other>.)")
_HEADER = re.compile(f"^\\s*(\\[\\[?)\\s*({_DOTTED})\\s*\\]\\]?")


def _split_key(text: str) -> tuple[str, ...]:
    parts = []
    for match in re.finditer(_KEY_PART, text):
        part = match.group(0)
        if part.startswith('"'):
            part = json.loads(part) if "\\" in part else part[1:-1]
        elif part.startswith("'"):
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


class TomlLocator:
    """Line and column of the tables and keys of a TOML text.

    tomllib reports positions only for syntax errors; a valid file with a wrong key or
    a bad size still deserves a message naming its line. This scans the text once
    (headers, `key =` lines, one-line inline tables) into a map from key paths, with
    array-of-tables indices, to positions. Best effort: what it cannot place falls back
    to the nearest enclosing table.
    """

    def __init__(self, text: str):
        self.positions: dict[tuple, tuple[int, int]] = {}
        self._arrays: dict[tuple, int] = {}
        self._scan(text)

    def find(self, path: Iterable) -> tuple[int, int] | None:
        path = tuple(path)
        while path:
            if path in self.positions:
                return self.positions[path]
            path = path[:-1]
        return None

    def _resolve(self, parts: tuple[str, ...]) -> tuple:
        out: list = []
        for part in parts:
            out.append(part)
            count = self._arrays.get(tuple(out))
            if count:
                out.append(count - 1)
        return tuple(out)

    def _scan(self, text: str) -> None:
        table: tuple = ()
        in_multiline = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header:
                table = self._header(header, number)
                continue
            self._key_line(line, number, table)
            for quote in ('"""', "'''"):
                if line.count(quote) % 2 == 1:
                    in_multiline = quote

    def _header(self, match: re.Match, number: int) -> tuple:
        parts = _split_key(match.group(2))
        column = match.start(2) + 1 + [m.start() for m in re.finditer(_KEY_PART, match.group(2))][-1]
        if match.group(1) == "[[":
            array = self._resolve(parts[:-1]) + (parts[-1],)
            self._arrays[array] = self._arrays.get(array, 0) + 1
            self.positions.setdefault(array, (number, column))
            table = array + (self._arrays[array] - 1,)
        else:
            table = self._resolve(parts)
        self.positions[table] = (number, column)
        return table

    def _key_line(self, line: str, number: int, table: tuple) -> None:
        stack, pending, position = [table], None, 0
        while position < len(line):
            token = _TOKEN.match(line, position)
            position = token.end()
            if token.group("key") is not None:
                if pending is not None and stack[-1] == table and len(stack) == 1:
                    return  # a second `=` on a plain line: inside a value, stop
                pending = stack[-1] + _split_key(token.group("key"))
                self.positions.setdefault(pending, (number, token.start("key") + 1))
            elif token.group("open"):
                stack.append(pending if pending is not None else stack[-1])
            elif token.group("close") and len(stack) > 1:
                stack.pop()
            elif token.group("other") == "#":
                return
            elif token.group("other") == "[" and pending is None:
                return


# --- the budget file -------------------------------------------------------------------------

TOP_KEYS = ("defaults", "tests", "ctest")
LIMIT_KEYS = FIELDS
DEFAULTS_KEYS = FIELDS + ("timeout", "types", "regression")
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
        return type_matches(self.pattern, label)

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
        limits: dict[str, Limit] = {}
        for rule in self.rules:
            if rule.covers(label):
                for name, limit in rule.limits.items():
                    limits.setdefault(name, limit)
        return {name: limits[name] for name in FIELDS if name in limits}

    def named_patterns(self) -> list[Rule]:
        """Rules that name types (not [defaults]); their rows are shown in summaries."""
        return [r for r in self.rules if r.pattern is not None]

    def with_thresholds(self, cli: Mapping[str, Threshold]) -> "Budget":
        """A copy with the command line's thresholds (--heap-compare-fail): they beat
        [defaults.regression], not a test's own `regression` table."""
        return replace(self, cli_thresholds=dict(cli))

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

    def budget_for(self, test_name: str, entry: TestEntry | None = None, aliases: Iterable[str] = ()) -> Budget:
        """The budget of a test: [defaults], plus its own entry, plus every command-less
        entry whose name (or glob) matches the test's name or one of its ``aliases``
        (a GoogleTest case `unit[Suite.Case]` is budgeted as `unit` too)."""
        rules = list(self.defaults)
        thresholds: dict[str, Threshold] = {}
        timeout = None
        names = [test_name, *aliases]
        matching = [t for t in self.tests
                    if t is entry or (t.is_pattern and any(name_matches(t.name, n) for n in names))]
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


class _Source:
    """A budget file's text and positions: turns a key path into `file:line:col: ...`."""

    def __init__(self, path: Path, text: str, prefix: tuple = ()):
        self.path = path
        self.locator = TomlLocator(text)
        self.prefix = prefix

    def position(self, path: tuple) -> tuple[int, int]:
        return self.locator.find(self.prefix + path) or (1, 1)

    def where(self, path: tuple) -> str:
        line, _ = self.position(path)
        return f"{self.path.name}:{line}"

    def error(self, path: tuple, message: str) -> BudgetError:
        line, column = self.position(path)
        return BudgetError(f"{self.path}:{line}:{column}: {message}")

    def table_name(self, path: tuple) -> str:
        keys = [p for p in self.prefix + path if not isinstance(p, int)]
        return "[" + ".".join(k if re.fullmatch(_BARE, k) else json.dumps(k) for k in keys) + "]"

    def origin(self, path: tuple, key: str) -> str:
        return f"{self.where(path + (key,))} {self.table_name(path)} {key}"


def read_toml(path: Path) -> tuple[dict, str]:
    """The parsed TOML and its text; a syntax error names file, line and column."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BudgetError(f"{path}: no such budget file") from None
    except OSError as e:
        raise BudgetError(f"{path}: cannot read the budget file: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise BudgetError(f"{path}:{line}: not UTF-8 text (TOML files are UTF-8)") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:
        raise BudgetError(_toml_error_text(path, text, e)) from None


def _toml_error_text(path: Path, text: str, error: Exception) -> str:
    message = str(error)
    match = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
    if match:
        return f"{path}:{match.group(1)}:{match.group(2)}: invalid TOML: {message[:match.start()]}"
    match = re.search(r"\s*\(at end of document\)\s*$", message)
    if match:
        lines = text.splitlines() or [""]
        return f"{path}:{len(lines)}:{len(lines[-1]) + 1}: invalid TOML: {message[:match.start()]} " \
               "(at the end of the file)"
    return f"{path}: invalid TOML: {message}"


def load_budget_file(path: str | Path) -> BudgetFile:
    """Parse and check a budget file. Every problem raises one BudgetError whose message
    names the file, line and column (and the closest valid key for a misspelt one)."""
    path = Path(path).resolve()
    data, text = read_toml(path)
    prefix: tuple = ()
    if path.name == "pyproject.toml":
        tool = data.get("tool", {}).get("heaptype") if isinstance(data.get("tool"), dict) else None
        if not isinstance(tool, dict):
            raise BudgetError(f"{path}: no [tool.heaptype] table: put the budgets there, or in {DEFAULT_FILE}")
        data, prefix = tool, ("tool", "heaptype")
    return _Parser(_Source(path, text, prefix)).parse(data)


def has_pyproject_budgets(path: Path) -> bool:
    """Whether a pyproject.toml holds [tool.heaptype] (without raising on bad TOML)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "[tool.heaptype" in path.read_text(errors="replace") if path.exists() else False
    tool = data.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("heaptype"), dict)


def find_budget_file(*directories: Path) -> Path | None:
    """The default budget file: heap-budget.toml, else a pyproject.toml with
    [tool.heaptype], in the first directory that has one."""
    for directory in directories:
        candidate = Path(directory) / DEFAULT_FILE
        if candidate.is_file():
            return candidate
        pyproject = Path(directory) / "pyproject.toml"
        if pyproject.is_file() and has_pyproject_budgets(pyproject):
            return pyproject
    return None


class _Parser:
    """Checks a budget file's structure and turns it into BudgetFile."""

    def __init__(self, source: _Source):
        self.src = source
        self.order = 0

    def parse(self, data: dict) -> BudgetFile:
        self._keys(data, (), TOP_KEYS, "the budget file")
        defaults = self._table(data, ("defaults",))
        self._keys(defaults, ("defaults",), DEFAULTS_KEYS, "[defaults]")
        default_rules = [self._rule(None, defaults, ("defaults",), level=0)]
        default_rules += self._types(defaults, ("defaults",), level=0)
        default_thresholds = self._thresholds(defaults, ("defaults",))
        default_timeout = self._timeout(defaults, ("defaults",))
        tests = self._tests(data.get("tests", []))
        ctest = self._ctest(data["ctest"]) if "ctest" in data else None
        if ctest is None:
            for t in tests:
                if t.is_pattern:
                    raise self.src.error(("tests", tests.index(t)), f"test '{t.name}' has no command: give it "
                                         "`command = [...]`, or add a [ctest] table whose tests it budgets")
        return BudgetFile(self.src.path, [r for r in default_rules if r.limits or r.pattern],
                          default_thresholds, default_timeout, tests, ctest)

    # -- generic checks --

    def _keys(self, table: dict, path: tuple, allowed: Iterable[str], what: str) -> None:
        allowed = list(allowed)
        for key in table:
            if key not in allowed:
                raise self.src.error(path + (key,), f"unknown key '{key}' in {what}: {did_you_mean(key, allowed)}")

    def _table(self, data: dict, path: tuple) -> dict:
        value = data.get(path[-1], {})
        if not isinstance(value, dict):
            raise self.src.error(path, f"{self.src.table_name(path)} must be a table, not {_kind(value)}")
        return value

    def _string(self, table: dict, path: tuple, key: str, default: Any = None) -> Any:
        value = table.get(key, default)
        if value is not default and not isinstance(value, str):
            raise self.src.error(path + (key,), f"'{key}' must be a string, not {_kind(value)}")
        return value

    def _timeout(self, table: dict, path: tuple) -> float | None:
        value = table.get("timeout")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise self.src.error(path + ("timeout",), f"timeout must be a positive number of seconds, not {value!r}")
        return float(value)

    # -- limits --

    def _limits(self, table: dict, path: tuple) -> dict[str, Limit]:
        limits = {}
        for key in FIELDS:
            if key in table:
                try:
                    limits[key] = Limit(parse_limit(key, table[key]), self.src.origin(path, key))
                except ValueError as e:
                    raise self.src.error(path + (key,), f"{key}: {e}") from None
        return limits

    def _rule(self, pattern: str | None, table: dict, path: tuple, level: int, name_rank=(0, 0)) -> Rule:
        self.order += 1
        rank = (pattern_specificity(pattern), level, name_rank, -self.order)
        return Rule(pattern, self._limits(table, path), rank)

    def _types(self, table: dict, path: tuple, level: int, name_rank=(0, 0)) -> list[Rule]:
        types = self._table(table, path + ("types",))
        rules = []
        for pattern, limits in types.items():
            type_path = path + ("types", pattern)
            if not isinstance(limits, dict):
                raise self.src.error(type_path, f"types.\"{pattern}\" must be a table of limits "
                                     f"({', '.join(FIELDS)}), not {_kind(limits)}")
            if not pattern.strip():
                raise self.src.error(type_path, "an empty type name: use a type name, a glob, \"*\" or \"(untyped)\"")
            if pattern.startswith("(") and pattern not in (UNTYPED, TOTAL) and not is_glob(pattern):
                raise self.src.error(type_path, f"'{pattern}' is not a type: the special rows are "
                                     f"\"{UNTYPED}\" and \"{TOTAL}\"; {did_you_mean(pattern, [UNTYPED, TOTAL])}")
            self._keys(limits, type_path, LIMIT_KEYS, self.src.table_name(type_path))
            rules.append(self._rule(pattern, limits, type_path, level, name_rank))
        return rules

    # -- regression thresholds --

    def _thresholds(self, table: dict, path: tuple) -> dict[str, Threshold]:
        regression = self._table(table, path + ("regression",))
        reg_path = path + ("regression",)
        self._keys(regression, reg_path, FIELDS, self.src.table_name(reg_path))
        thresholds = {}
        for key, value in regression.items():
            try:
                thresholds[key] = parse_threshold_value(key, value, self.src.origin(reg_path, key))
            except ValueError as e:
                raise self.src.error(reg_path + (key,), f"{key}: {e}") from None
        return thresholds

    # -- [[tests]] --

    def _tests(self, tests: Any) -> list[TestEntry]:
        if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
            raise self.src.error(("tests",), "'tests' must be an array of tables: write each test as [[tests]]")
        entries, seen = [], {}
        for index, table in enumerate(tests):
            entry = self._test(table, ("tests", index))
            if entry.name in seen:
                raise self.src.error(("tests", index, "name"), f"a second test named '{entry.name}' "
                                     f"(the first is at {seen[entry.name]})")
            seen[entry.name] = entry.origin
            entries.append(entry)
        return entries

    def _test(self, table: dict, path: tuple) -> TestEntry:
        name = table.get("name")
        what = f"test '{name}'" if isinstance(name, str) else f"[[tests]] number {path[1] + 1}"
        self._keys(table, path, TEST_KEYS, what)
        if not isinstance(name, str) or not name.strip():
            raise self.src.error(path + (("name",) if "name" in table else ()),
                                 f"{what} needs a name: name = \"...\" (it becomes the pytest item)")
        command = self._command(table, path, name)
        cwd = self._string(table, path, "cwd")
        env = table.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                for v in env.values()):
            raise self.src.error(path + ("env",), f"env of test '{name}' must be a table of strings, "
                                 "e.g. env = { OMP_NUM_THREADS = \"1\" }")
        returncode = table.get("returncode", 0)
        if isinstance(returncode, bool) or not isinstance(returncode, int):
            raise self.src.error(path + ("returncode",), f"returncode must be a whole number, not {returncode!r}")
        name_rank = pattern_specificity(name) if command is None else (4, 0)
        rules = self._types(table, path, level=1, name_rank=name_rank)
        line = self.src.position(path)[0]
        return TestEntry(name=name, command=command, cwd=(self.src.path.parent / cwd) if cwd else self.src.path.parent,
                         env={k: str(v) for k, v in env.items()}, timeout=self._timeout(table, path),
                         returncode=returncode, rules=rules, thresholds=self._thresholds(table, path),
                         origin=f"{self.src.path.name}:{line}", line=line)

    def _command(self, table: dict, path: tuple, name: str) -> list[str] | None:
        command = table.get("command")
        if command is None:
            return None
        if isinstance(command, str):
            try:
                command = shlex.split(command)
            except ValueError as e:
                raise self.src.error(path + ("command",), f"command of test '{name}': {e}") from None
        if not isinstance(command, list) or not command or not all(isinstance(a, (str, int)) for a in command):
            raise self.src.error(path + ("command",), f"command of test '{name}' must be a non-empty array of "
                                 "strings, e.g. command = [\"build/app\", \"--quick\"]")
        return [str(a) for a in command]

    # -- [ctest] --

    def _ctest(self, table: Any) -> CTestSettings:
        path = ("ctest",)
        if not isinstance(table, dict):
            raise self.src.error(path, f"[ctest] must be a table, not {_kind(table)}")
        self._keys(table, path, CTEST_KEYS, "[ctest]")
        build_dir = self._string(table, path, "build_dir")
        if not build_dir:
            raise self.src.error(path, "[ctest] needs build_dir = \"...\": the CMake build tree whose tests to run")
        globs = {}
        for key in ("tests", "exclude"):
            value = table.get(key, ["*"] if key == "tests" else [])
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.src.error(path + (key,), f"[ctest] {key} must be a glob or an array of globs")
            globs[key] = value
        split = table.get("gtest_split", False)
        if isinstance(split, str):
            split = [split]
        if not isinstance(split, (bool, list)) or (isinstance(split, list)
                                                  and not all(isinstance(s, str) for s in split)):
            raise self.src.error(path + ("gtest_split",), "gtest_split must be true, false, or globs of test names")
        line = self.src.position(path)[0]
        return CTestSettings(build_dir=(self.src.path.parent / build_dir).resolve(),
                             configuration=self._string(table, path, "configuration"),
                             include=globs["tests"], exclude=globs["exclude"], gtest_split=split,
                             timeout=self._timeout(table, path), origin=f"{self.src.path.name}:{line}", line=line)


def _kind(value: Any) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)


def budget_from_mapping(test: str, spec: Mapping[str, Any], origin: str) -> Budget:
    """A budget from Python data (the ``heap_budget`` marker), checked like a file:
    ``{"types": {"Small": {"peak": "64 KiB"}}, "leaked": 0, "regression": {...}}``."""
    errors = _MappingSource(origin)
    parser = _Parser(errors)  # type: ignore[arg-type]
    parser._keys(spec, (), DEFAULTS_KEYS, origin)
    rules = [parser._rule(None, spec, (), level=0)] + parser._types(spec, (), level=1)
    return Budget(test, [r for r in rules if r.limits or r.pattern], parser._thresholds(spec, ()),
                  parser._timeout(spec, ()), origin)


class _MappingSource(_Source):
    """Error messages for budgets given as Python data: no lines, the origin instead."""

    def __init__(self, origin: str):
        self.path = Path(origin)
        self.prefix = ()
        self._origin = origin

    def position(self, path: tuple) -> tuple[int, int]:
        return (0, 0)

    def where(self, path: tuple) -> str:
        return self._origin

    def error(self, path: tuple, message: str) -> BudgetError:
        return BudgetError(f"{self._origin}: {message}")

    def table_name(self, path: tuple) -> str:
        keys = [p for p in path if not isinstance(p, int)]
        return ".".join(keys) or "heap_budget"

    def origin(self, path: tuple, key: str) -> str:
        return f"{self._origin} {self.table_name(path + (key,))}"


# --- measuring a profile --------------------------------------------------------------------

@dataclass(frozen=True)
class Figures:
    """The four figures budgets are about, for one row of a profile."""

    peak: int = 0
    bytes: int = 0
    allocations: int = 0
    leaked: int = 0

    def get(self, name: str) -> int:
        return getattr(self, name)

    def as_dict(self) -> dict[str, int]:
        return {name: self.get(name) for name in FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Figures":
        return cls(**{name: int(data.get(name, 0)) for name in FIELDS})


def type_label(type_name: str | None) -> str:
    return UNTYPED if type_name is None else type_name


def measure(profile) -> dict[str, Figures]:
    """Figures per row label of a loaded profile, plus the whole process as "(total)"."""
    figures = {type_label(r.type): Figures(r.peak_bytes, r.bytes, r.allocations, r.live_bytes)
               for r in profile.by_type()}
    t = profile.totals
    figures[TOTAL] = Figures(t.peak_bytes, t.bytes, t.allocations, t.live_bytes)
    return figures


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
        return (f"{self.type}: {f} {format_exact(f, self.measured)} > limit {format_exact(f, self.limit.value)}, "
                f"over by {format_exact(f, self.over)}{ratio}")


@dataclass
class Evaluation:
    """A test's verdict: the figures, the limits that applied, what is over."""

    test: str
    figures: dict[str, Figures]
    limits: dict[str, dict[str, Limit]]
    violations: list[Violation]
    warnings: list[str]
    profile_path: str | None = None
    complete: bool = True

    @property
    def passed(self) -> bool:
        return not self.violations

    def shown_labels(self, budget: Budget | None = None) -> list[str]:
        """Rows worth a line in a summary: the total, every row a named rule covers, and
        every row over its limit (not all rows that only [defaults] cover)."""
        labels = {TOTAL} | {v.type for v in self.violations}
        if budget is not None:
            labels |= {label for label in self.figures
                       if any(r.covers(label) for r in budget.named_patterns())}
        else:
            labels |= set(self.limits)
        return sort_labels(label for label in labels if label in self.figures)


def evaluate(budget: Budget, figures: Mapping[str, Figures], *, profile_path: str | None = None,
             complete: bool = True) -> Evaluation:
    """Check every row of a profile against the limits that cover it. A profile cut
    short (crash, kill) has no exit: what was live then is not a leak, so `leaked`
    limits are not checked on it."""
    limits: dict[str, dict[str, Limit]] = {}
    violations = []
    for label in sort_labels(figures):
        row_limits = budget.limits_for(label)
        if not complete:
            row_limits.pop("leaked", None)
        if not row_limits:
            continue
        limits[label] = row_limits
        for name, limit in row_limits.items():
            measured = figures[label].get(name)
            if measured > limit.value:
                violations.append(Violation(budget.test, label, name, limit, measured))
    return Evaluation(budget.test, dict(figures), limits, violations, unmatched_warnings(budget, figures),
                      profile_path, complete)


def unmatched_warnings(budget: Budget, figures: Mapping[str, Figures]) -> list[str]:
    """A warning for each named type (or glob) that no row of the profile matches,
    with the closest type names: a budget for a misspelt type would pass forever."""
    typed = [label for label in figures if label not in (UNTYPED, TOTAL)]
    warnings = []
    seen = set()
    for rule in sorted(budget.named_patterns(), key=lambda r: r.order):
        pattern = rule.pattern
        if pattern in (UNTYPED, TOTAL, "*") or pattern in seen or any(rule.covers(label) for label in typed):
            continue
        seen.add(pattern)
        origin = next(iter(rule.limits.values())).origin if rule.limits else budget.source
        kind = "matches no type" if is_glob(pattern) else "never appears"
        close = close_names(pattern.replace("*", ""), typed) if is_glob(pattern) else close_names(pattern, typed)
        hint = f"; close type names: {', '.join(close)}" if close else \
            f"; the profile has {len(typed)} typed rows (heaptype report shows them)"
        warnings.append(f"{budget.test}: budget for type '{pattern}' ({origin}): the type {kind} in the profile{hint}")
    return warnings


CallPaths = Callable[[str, str], "list[str] | None"]
CALL_PATH_SORT = {"peak": ("peak", "peak_bytes"), "bytes": ("bytes", "bytes"),
                  "allocations": ("allocations", "allocations"), "leaked": ("live", "live_bytes")}


def profile_call_paths(profile, top: int = 3) -> CallPaths:
    """``(type label, field) -> lines``: the top call paths of a type in a loaded profile,
    sorted by the figure that is over; None when the profile has no calling contexts."""

    def paths(label: str, field_name: str) -> list[str] | None:
        if not getattr(profile, "has_call_paths", False):
            return None
        sort, attribute = CALL_PATH_SORT[field_name]
        try:
            rows = profile.call_paths(types=[label], sort=sort, infer=False)
        except Exception as e:  # noqa: BLE001 - call paths only explain a verdict: never hide it
            return [f"(the call paths could not be read: {type(e).__name__}: {e})"]
        rows = [r for r in rows if r.type_label == label][:top]
        return [f"{format_value(field_name, getattr(r, attribute))} {field_name}: {format_path(r.path)}"
                for r in rows]

    return paths


def format_path(frames: Iterable[str], last: int = 6, width: int = 100) -> str:
    """`main > run > make<Small>`, root first, the allocating frames kept when long."""
    frames = [shorten(frame, width) for frame in frames] or ["(no frames)"]
    return " > ".join((["..."] if len(frames) > last else []) + frames[-last:])


def failure_text(evaluation: Evaluation, *, call_paths: CallPaths | None = None, top_paths: int = 3,
                 regressions: Iterable["Change"] = (), baseline: str | None = None) -> str:
    """The text of a failed budget: test, type, limit, measured value, by how much it is
    over, where the limit was set, the top call paths of that type, and the profile kept
    for inspection. ``call_paths(type)`` gives call paths when the profile has them."""
    lines = []
    if evaluation.violations:
        lines.append(f"heap budget exceeded: {evaluation.test}")
        for label in sort_labels({v.type for v in evaluation.violations}):
            over = [v for v in evaluation.violations if v.type == label]
            for v in over:
                lines.append(f"  {v.headline()}")
                lines.append(f"      limit set at {v.limit.origin}")
            lines += _call_path_lines(label, over[0].field, call_paths, top_paths)
    regressions = list(regressions)
    if regressions:
        lines.append(f"heap regression against the baseline {baseline}: {evaluation.test}")
        lines += [f"  {change.text()}" for change in regressions]
    if not evaluation.complete:
        lines.append("  note: the profile was cut short (the program did not finish): figures cover what "
                     "was written before that; `leaked` limits are not checked")
    if evaluation.profile_path:
        lines.append(f"  profile kept: {evaluation.profile_path}")
        lines.append(f"      heaptype report {shlex.quote(str(evaluation.profile_path))}")
    return "\n".join(lines)


def _call_path_lines(label: str, field_name: str, call_paths: CallPaths | None, top: int) -> list[str]:
    if label == TOTAL:
        return []
    paths = call_paths(label, field_name) if call_paths else None
    if paths is None:
        return ["      call paths: not recorded in this profile (build with HeapType's call stacks: "
                "`heaptype --cflags` adds them unless --callstack none)"]
    if not paths:
        return ["      call paths: none recorded for this type"]
    return [f"      top call paths of {label}:"] + [f"        {i}. {p}" for i, p in enumerate(paths[:top], 1)]


# --- tables ------------------------------------------------------------------------------------

TABLE_HEADER = ("test", "type", "peak", "bytes", "allocations", "leaked", "limit", "verdict")


def limits_text(limits: Mapping[str, Any]) -> str:
    """`peak<=64 KiB, leaked<=0 B`: the limits of one row, values or Limit objects."""
    parts = []
    for name in FIELDS:
        if name in limits:
            value = limits[name].value if isinstance(limits[name], Limit) else limits[name]
            parts.append(f"{name}<={format_value(name, value)}")
    return ", ".join(parts)


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def render_table(header: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[int] = (),
                 widest: int = 60) -> list[str]:
    """A plain text table; columns in ``numeric`` are right-aligned."""
    table = [[shorten(str(c), widest) for c in header]] + [[shorten(str(c), widest) for c in r] for r in rows]
    numeric = set(numeric)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    lines = []
    for n, row in enumerate(table):
        cells = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def render_markdown(header: Iterable[str], rows: Iterable[Iterable[str]], numeric: Iterable[int] = ()) -> list[str]:
    header = list(header)
    numeric = set(numeric)
    escape = lambda c: str(c).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    lines = ["| " + " | ".join(escape(h) for h in header) + " |",
             "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return lines


def evaluation_rows(evaluation: "Evaluation", labels: Iterable[str]) -> list[list[str]]:
    """Table rows (without the test column) for some rows of an evaluation."""
    over = {(v.type, v.field) for v in evaluation.violations}
    rows = []
    for label in labels:
        figs = evaluation.figures[label]
        limits = evaluation.limits.get(label, {})
        verdict = "OVER" if any((label, f) in over for f in FIELDS) else ("ok" if limits else "")
        rows.append([label] + [format_value(f, figs.get(f)) for f in FIELDS] + [limits_text(limits), verdict])
    return rows


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
