"""The budget parser under libFuzzer, through atheris (tests/fuzz/budget_fuzzer.py).

The seed corpus is every budget file of the repository (examples/, tests/data/), the
TOML examples of docs/budgets.md and the README, each also as a pyproject.toml
[tool.heaptype] table, and the hostile files of issue 15 (wrong types, deep nesting).
HEAPTYPE_FUZZ_RUNS sets the fuzzing run's length (CI: 200,000 executions, 2-4
minutes); an exception other than BudgetError, or an input that takes more than
-timeout seconds, fails the test with libFuzzer's report and the input.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tooling import require_module

ROOT = Path(__file__).resolve().parents[2]
FUZZER = ROOT / "tests" / "fuzz" / "budget_fuzzer.py"
LIMITS = ["-max_len=4096", "-timeout=10", "-rss_limit_mb=2048"]
HOSTILE = {
    "wrong-types.toml": '[[tests]]\nname = "t"\ncommand = [1, 2]\nenv = {A = 1}\n',
    "deep-arrays.toml": "x = " + "[" * 200 + "]" * 200 + "\n",
    "deep-tables.toml": "x = " + "{a = " * 120 + "1" + "}" * 120 + "\n",
    "latin1.toml": '[[tests]]\nname = "caf\xe9"\n',
    # A quoted key with tabs and an escape, which TOML allows: the locator of keys decoded
    # it as JSON, which refuses tabs (the fuzzer found it: a JSONDecodeError, not a model).
    "tab-in-quoted-key.toml": '[tests.types."Posti\\"\t\t\tx"]\nleaked = "2 KiB"\n',
}


def seed_files() -> dict[str, bytes]:
    seeds = {}
    for path in sorted([*ROOT.glob("examples/**/*.toml"), *ROOT.glob("tests/data/**/*.toml")]):
        seeds[str(path.relative_to(ROOT)).replace("/", "_")] = path.read_bytes()
    for doc in ("docs/budgets.md", "README.md"):
        text = (ROOT / doc).read_text()
        for index, block in enumerate(re.findall(r"```toml\n(.*?)```", text, re.S)):
            seeds[f"{Path(doc).stem}-{index}.toml"] = block.encode()
    # The same budgets as pyproject.toml tables: [tests] -> [tool.heaptype.tests] ...
    for name, data in list(seeds.items()):
        table = re.sub(rb"^(\[\[?)", rb"\1tool.heaptype.", data, flags=re.M)
        seeds[f"pyproject-{name}"] = b"[tool.heaptype]\n" + table
    for name, text in HOSTILE.items():
        seeds[name] = text.encode("latin-1")
    return seeds


@pytest.fixture(scope="module")
def seed_corpus(tmp_path_factory) -> Path:
    require_module("atheris", "atheris")
    corpus = tmp_path_factory.mktemp("budget-seeds")
    for name, data in seed_files().items():
        (corpus / name).write_bytes(data)
    return corpus


def run_fuzzer(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, str(FUZZER), *args], capture_output=True, text=True, timeout=3600)
    report = done.stderr[-6000:]
    assert done.returncode == 0, f"the budget fuzzer found a problem (exit {done.returncode}):\n{report}"
    return done


def test_the_seeds_include_every_budget_file_of_the_repository(seed_corpus):
    names = {p.name for p in seed_corpus.iterdir()}
    assert {"examples_cmake-basic_heap-budget.toml", "tests_data_budget_malformed.toml", "budgets-0.toml",
            "pyproject-budgets-0.toml"} <= names


def test_every_seed_parses_or_raises_budget_error(seed_corpus):
    inputs = sorted(str(p) for p in seed_corpus.iterdir())
    done = run_fuzzer(*LIMITS, *inputs)
    assert done.stderr.count("Executed ") == len(inputs)


def test_fuzzing_the_budget_parser_finds_nothing(seed_corpus, tmp_path):
    runs = int(os.environ.get("HEAPTYPE_FUZZ_RUNS", "20000"))
    work = tmp_path / "corpus"
    work.mkdir()
    done = run_fuzzer(f"-runs={runs}", "-seed=1", *LIMITS, str(work), str(seed_corpus))
    assert f"Done {runs} runs" in done.stderr
