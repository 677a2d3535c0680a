"""The budget parser under libFuzzer, through atheris (coverage-guided fuzzing of
Python code; `pip install atheris`, in the `test` extra).

Each input is the content of a budget file, parsed twice: as heap-budget.toml and
as pyproject.toml (the [tool.heaptype] table). The parser must return a model or
raise BudgetError, the one error its callers catch: any other exception is a crash
that libFuzzer reports with the input that caused it; an input that takes longer
than -timeout seconds is a hang.

    python tests/fuzz/budget_fuzzer.py -runs=200000 -max_len=4096 -timeout=10 CORPUS_DIR SEED_DIR...

tests/python/test_fuzz_budget.py runs it (HEAPTYPE_FUZZ_RUNS executions, seeded with
the budget files of the repository); the README shows a longer run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["heaptype.budget", "tomllib"]):
    import tomllib  # noqa: F401  (instrumented: the TOML parser is half of what is fuzzed)

    from heaptype.budget import BudgetError
    from heaptype.budget.parse import parse_budget_bytes

# Never opened: it names the input in error messages and anchors relative paths.
HERE = Path("/nonexistent/heaptype-fuzz")
AS_BUDGET_FILE = HERE / "heap-budget.toml"
AS_PYPROJECT = HERE / "pyproject.toml"


def test_one_input(data: bytes) -> None:
    for path in (AS_BUDGET_FILE, AS_PYPROJECT):
        try:
            parse_budget_bytes(path, data)
        except BudgetError as e:
            if not str(e).startswith(str(path)):
                raise AssertionError(f"an error that does not name the file: {e}") from None


def main() -> None:
    sys.setrecursionlimit(1000)  # the interpreter's default: what a user's run has
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
