"""Reading budget files (heap-budget.toml, pyproject.toml [tool.heaptype]) and
inline budgets (pytest markers) into the model, with errors that name file, line
and column."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

from ..analyze.labels import TOTAL, UNTYPED
from ..analyze.patterns import is_glob
from .matching import did_you_mean, pattern_specificity
from .model import (CTEST_KEYS, DEFAULTS_KEYS, LIMIT_KEYS, TEST_KEYS, TOP_KEYS, Budget, BudgetFile, CTestSettings,
                    Limit, Rule, TestEntry, Threshold, parse_threshold_value)
from .toml_source import BARE_KEY, TomlLocator
from .values import FIELDS, LIMIT_FIELDS, BudgetError, parse_limit

DEFAULT_FILE = "heap-budget.toml"


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
        return "[" + ".".join(k if re.fullmatch(BARE_KEY, k) else json.dumps(k) for k in keys) + "]"

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
    return parse_toml(path, raw)


def parse_toml(path: Path, raw: bytes) -> tuple[dict, str]:
    """read_toml for content already read: `path` only names it in errors."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise BudgetError(f"{path}:{line}: not UTF-8 text (TOML files are UTF-8)") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as e:
        raise BudgetError(_toml_error_text(path, text, e)) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        line = _deep_nesting_line(text)
        raise BudgetError(f"{path}:{line}: arrays or inline tables nested more than {MAX_NESTING} deep "
                          "(a budget file never needs that many)") from None


MAX_NESTING = 100


def _deep_nesting_line(text: str) -> int:
    """The line where brackets and braces first nest more than MAX_NESTING deep
    (strings and comments skipped; 1 when none does)."""
    depth, line, quote, position = 0, 1, None, 0
    while position < len(text):
        char = text[position]
        if char == "\n":
            line += 1
        if quote:
            if char == "\\" and quote == '"':
                position += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            position = text.find("\n", position) - 1 if "\n" in text[position:] else len(text)
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return line
        elif char in "]}":
            depth -= 1
        position += 1
    return 1


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
    return _parse_budget(path, *read_toml(path))


def parse_budget_bytes(path: str | Path, raw: bytes) -> BudgetFile:
    """load_budget_file for content already read (the budget parser's fuzzing target,
    tests/fuzz/budget_fuzzer.py): `path` names the file in errors, and its name
    pyproject.toml selects the [tool.heaptype] table. Raises BudgetError only."""
    path = Path(path)
    return _parse_budget(path, *parse_toml(path, raw))


def _parse_budget(path: Path, data: dict, text: str) -> BudgetFile:
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
        for key in LIMIT_FIELDS:
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
                                     f"({', '.join(LIMIT_FIELDS)}), not {_kind(limits)}")
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
        # Strings only: `A = 1` may have meant "1" or "1.0"; the file says which.
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            bad = next((k for k, v in env.items() if not isinstance(v, str)), None) if isinstance(env, dict) else None
            raise self.src.error(path + ("env",) + ((bad,) if bad else ()),
                                 f"env of test '{name}' must be a table of strings, "
                                 "e.g. env = { OMP_NUM_THREADS = \"1\" }" +
                                 (f", not {bad} = {_kind(env[bad])}" if bad else ""))
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
        if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
            raise self.src.error(path + ("command",), f"command of test '{name}' must be a non-empty array of "
                                 "strings, e.g. command = [\"build/app\", \"--quick\"]")
        return command

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
