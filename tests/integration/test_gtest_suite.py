"""Issue 16's acceptance on a GoogleTest suite of 1,000 tests: the suite is generated
(tests/data/budget/gtest_suite/generate.py), built once per session with CMake,
heaptype_instrument() on a target that uses the plain target_link_libraries signature,
and gtest_discover_tests; `pytest --heap-budget -n 2` runs it through [ctest].
Issue 26's acceptance rides on the same build: the suite as 4 shards (--heap-shard),
merged with `heaptype baseline merge` / `heaptype results merge`, gives the full run's
baseline byte for byte, its verdicts and its results.

What is checked here is exact: verdicts, warnings, baseline sizes, the failure texts.
How long it takes beside `ctest -j2` is a benchmark (bench/budget_bench.py), not a test.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tooling import require_file, require_tool, run_once

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "data" / "budget" / "gtest_suite"))
sys.path.insert(0, str(REPO / "tests" / "data" / "budget"))
import generate  # noqa: E402
from budget_testing import comparable_results  # noqa: E402

TESTS = 1000
GROWN = "Suite2.Case6"    # test 26: 10 Records, grown by 10% to 11 (480 B -> 528 B)
LEAKING = "Suite5.Case2"  # test 52: leaks one Widget through leak_widget()
SHARDS = 4


def _run(command: list, cwd: Path | None = None, timeout: float = 1800) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"$ {' '.join(map(str, command))}\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
    return done


def _build(source: Path, build: Path) -> None:
    from heaptype.capture import flags

    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    # The default build type (no optimisation, no debug info) compiles fastest; the
    # budgets and call paths are the same.
    _run([require_tool("cmake"), "-S", source, "-B", build, *generator, "-DSUITE_HEAPTYPE=ON",
          f"-DHeapType_DIR={flags.cmake_dir()}"])
    _run([require_tool("cmake"), "--build", build, "-j", "2"])


@pytest.fixture(scope="session")
def gtest_suite(tmp_path_factory) -> Path:
    """The 1,000-test suite, generated and built once per session (shared by xdist workers)."""
    require_tool("g++")
    require_tool("cmake")
    require_tool("ctest")
    require_file("/usr/include/gtest/gtest.h", "Debian's libgtest-dev")
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "heaptype-gtest-suite"
    workdir.mkdir(exist_ok=True)

    def make() -> None:
        generate.generate(workdir / "src", TESTS, 20, {}, set())
        _build(workdir / "src", workdir / "build")

    run_once(workdir / "suite.built", make)
    return workdir


def _pytest(workdir: Path, *args: str, workers: str = "2") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "-n", workers, "-p", "no:cacheprovider", "-p", "no:randomly",
               "-p", "no:benchmark", "-p", "no:hypothesispytest", f"--heap-budget-file={workdir / 'heap-budget.toml'}",
               f"--heap-profile-dir={workdir / 'profiles'}", *args]
    return subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=1800)


def _shards(workdir: Path, *args: str) -> list[subprocess.CompletedProcess]:
    """The suite as SHARDS runs of `--heap-shard I/N`, as CI runners make them; "{shard}"
    in an argument is the shard's number. The last shard runs without xdist (a test's
    shard does not depend on it)."""
    return [_pytest(workdir, f"--heap-shard={shard}/{SHARDS}", *(a.replace("{shard}", str(shard)) for a in args),
                    workers="0" if shard == SHARDS else "2")
            for shard in range(1, SHARDS + 1)]


def _heaptype(*args) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "heaptype", *args])


def _failed(out: str) -> list[str]:
    return sorted(line.split()[1] for line in out.splitlines() if line.startswith("FAILED "))


def test_a_thousand_gtest_cases_save_a_compact_baseline_and_catch_a_ten_percent_growth(gtest_suite, tmp_path):
    workdir = tmp_path
    budget = generate.write_budget(workdir / "heap-budget.toml", gtest_suite / "build")
    with budget.open("a") as out:  # a misspelt type: the one pattern that matches in no test
        out.write('\n[defaults.types."Recrod"]\npeak = "1 KiB"\n')
    baseline = workdir / "heap-baseline.json"

    saved = _pytest(workdir, f"--heap-baseline={baseline}", "--heap-save-baseline")
    assert saved.returncode == 0, saved.stdout[-5000:] + saved.stderr[-3000:]
    assert re.search(rf" {TESTS} passed, 1 warning in ", saved.stdout.splitlines()[-1])
    # one warning for the misspelt pattern; none for "Special", which is in 20 of the tests
    assert saved.stdout.count("HeapBudgetWarning") == 1
    assert re.search(r"HeapBudgetWarning: budget for type 'Recrod' \(heap-budget\.toml:\d+ \[defaults\.types\.Recrod\] "
                     rf"peak\): the type never appears in any of the {TESTS} tests it applies to; close type names: "
                     r"Record\b", saved.stdout)
    assert "'Special'" not in saved.stdout
    assert len(saved.stdout) < 20_000  # the summary is bounded whatever the number of tests
    data = json.loads(baseline.read_text())
    assert len(data["tests"]) == TESTS
    per_test = _bytes_per_test(baseline.read_text())
    assert max(per_test.values()) <= 1024, max(per_test.items(), key=lambda item: item[1])
    assert baseline.stat().st_size <= 1024 * TESTS
    grown_key = f"heap-budget.toml::{GROWN}"
    assert data["tests"][grown_key]["Record"] == [480, 480, 1, 0]

    # issue 26: four shards, each saving its own tests' figures, merge into the same file
    saved_shards = _shards(workdir, "--heap-baseline=shard-{shard}.json", "--heap-save-baseline")
    ran = 0
    for shard in saved_shards:
        last = shard.stdout.splitlines()[-1]
        assert shard.returncode == 0 and re.search(r" \d+ passed", last), shard.stdout[-3000:] + shard.stderr[-3000:]
        ran += int(re.search(r" (\d+) passed", last).group(1))
        assert "HeapBudgetWarning" not in shard.stdout  # the misspelt pattern waits for the merge
    assert ran == TESTS
    assert re.search(r" \d+ deselected", saved_shards[-1].stdout.splitlines()[-1])  # the shard without xdist says so
    merged = workdir / "merged-baseline.json"
    _heaptype("baseline", "merge", *(workdir / f"shard-{s}.json" for s in range(1, SHARDS + 1)), "-o", merged)
    assert merged.read_bytes() == baseline.read_bytes()

    generate.generate(gtest_suite / "src", TESTS, 20, {GROWN: 10}, {LEAKING})
    try:
        _build(gtest_suite / "src", gtest_suite / "build")
        # the full run against the merged baseline too: failure texts name the baseline's path
        compared = _pytest(workdir, f"--heap-baseline={merged}", "--heap-compare-fail=peak:5%",
                           "--heap-json=full-results.json")
        sharded = _shards(workdir, f"--heap-baseline={merged}", "--heap-compare-fail=peak:5%",
                          "--heap-json=results-{shard}.json")
    finally:  # the session's suite stays the plain one
        generate.generate(gtest_suite / "src", TESTS, 20, {}, set())
        _build(gtest_suite / "src", gtest_suite / "build")
    out = compared.stdout
    assert re.search(rf" 2 failed, {TESTS - 2} passed, 1 warning in ", out.splitlines()[-1]), out[-3000:]
    failed = _failed(out)
    assert failed == [f"heap-budget.toml::{GROWN}", f"heap-budget.toml::{LEAKING}"]
    assert (f"  Record: peak live 528 B vs baseline 480 B: +48 B (+10.0%), > threshold 5% "
            f"(--heap-compare-fail=peak:5%)") in out
    leak = out[out.index(f"heap budget exceeded: heap-budget.toml::{LEAKING}"):]
    assert leak.splitlines()[1] == "  Widget: leaked 40 B > limit 0 B, over by 40 B"
    paths = leak[leak.index("top call paths of Widget:"):leak.index("profile kept:")]
    assert re.search(r"1\. 40 B leaked: (?:[^\n]|\n\s+>)*?Suite5_Case2_Test::TestBody\(\)\s+>?\s*leak_widget\(\)", paths), paths
    assert f"REGRESSED heap-budget.toml::{GROWN}: Record: peak live 528 B vs baseline 480 B" in out

    # the shards against the merged baseline fail exactly what the full run fails
    assert sorted(test for shard in sharded for test in _failed(shard.stdout)) == failed
    assert sum(shard.stdout.count(f"REGRESSED heap-budget.toml::{GROWN}:") for shard in sharded) == 1
    merged_results = workdir / "merged-results.json"
    summary = _heaptype("results", "merge", *(workdir / f"results-{s}.json" for s in range(1, SHARDS + 1)),
                        "-o", merged_results)
    assert summary.stdout.startswith(f"heaptype: {TESTS} tests from {SHARDS} results files, 2 failed: "
                                     f"heap-budget.toml::{GROWN}, heap-budget.toml::{LEAKING} -> ")
    assert summary.stderr.count("budget for type 'Recrod'") == 1
    assert comparable_results(merged_results) == comparable_results(workdir / "full-results.json")


def _bytes_per_test(text: str) -> dict[str, int]:
    """The baseline's bytes per test: its key line, its types' lines and its closing line."""
    sizes: dict[str, int] = {}
    test = None
    for line in text.splitlines(keepends=True):
        match = re.match(r'^    "(.+)": \{$', line.rstrip("\n"))
        if match:
            test = match.group(1)
        if test is not None:
            sizes[test] = sizes.get(test, 0) + len(line)
            if line.startswith("    }"):
                test = None
    return sizes
