"""One budget suite over many runners (issue 26): `--heap-shard I/N` keeps the tests
whose id hashes to shard I, and `heaptype baseline merge` / `heaptype results merge`
join what the shards wrote into what one full run writes.

The budget runs use tests/data/budget/workload.cpp (see test_pytest_plugin.py for
its truth): small=N keeps N Small (16 B) live at once, leak=1 leaves one Leaky live.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_pytest_plugin import budget_programs, clean_environment, project, run, write_budget  # noqa: F401 (fixtures)

from budget_testing import comparable_results  # noqa: E402 (on the path test_pytest_plugin sets)

from heaptype import budget as hb

pytest_plugins = ["pytester"]


# --- which shard runs a test ------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("0/4", "'0/4': the shard number must be 1 to 4 (I/N counts from 1)"),
    ("5/4", "'5/4': the shard number must be 1 to 4 (I/N counts from 1)"),
    ("1/0", "'1/0': the number of shards N must be 1 or more"),
    ("2", "'2' is not a shard: write I/N, e.g. 1/4 for the first of four"),
    ("a/b", "'a/b' is not a shard: write I/N, e.g. 1/4 for the first of four"),
])
def test_a_bad_shard_says_how_to_write_one(text, message):
    with pytest.raises(hb.BudgetError) as error:
        hb.Shard.parse(text)
    assert str(error.value) == message


def test_a_shard_is_the_sha256_of_the_test_id_whatever_the_other_tests():
    ids = [f"heap-budget.toml::Suite{i // 10}.Case{i % 10}" for i in range(1000)]
    assert hb.Shard.parse("3/4") == hb.Shard(3, 4)
    for test in ids[:50]:  # the documented rule, spelled another way
        expected = int(hashlib.sha256(test.encode()).hexdigest()[:16], 16) % 4 + 1
        assert hb.shard_of(test, 4) == expected
        assert hb.Shard(expected, 4).holds(test)
    sizes = [sum(hb.shard_of(test, 4) == shard for test in ids) for shard in (1, 2, 3, 4)]
    assert sum(sizes) == 1000 and min(sizes) >= 200 and max(sizes) <= 300, sizes
    assert hb.shard_of("only", 1) == 1


def test_the_shard_of_a_test_is_the_same_in_every_process(tmp_path):
    """Python's hash() is salted per process (PYTHONHASHSEED): the shard must not use it."""
    script = ("import json, sys; from heaptype.budget import shard_of; "
              "print(json.dumps([shard_of(f't{i}', 7) for i in range(200)]))")
    answers = set()
    for seed in ("0", "1", "12345"):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed})
        answers.add(done.stdout)
    assert len(answers) == 1
    assert json.loads(answers.pop()) == [hb.shard_of(f"t{i}", 7) for i in range(200)]


PYTHON_TESTS = """
import pytest

@pytest.mark.parametrize("n", range(30))
def test_n(n):
    pass

def test_other():
    pass
"""

UNRELATED = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:randomly", "-p", "no:cacheprovider")


def junit_tests(path: Path) -> list[str]:
    return sorted(f"{case.get('classname')}::{case.get('name')}" for case in ET.parse(path).iter("testcase"))


def test_shards_split_the_collected_tests_and_deselect_the_rest_with_or_without_xdist(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_many=PYTHON_TESTS)
    everything = [f"test_many::test_n[{n}]" for n in range(30)] + ["test_many::test_other"]
    ran = []
    for shard in (1, 2, 3):
        result = pytester.runpytest(*UNRELATED, f"--heap-shard={shard}/3", f"--junitxml=s{shard}.xml")
        kept = [test for test in everything if hb.shard_of(test.replace("test_many::", "test_many.py::"), 3) == shard]
        result.assert_outcomes(passed=len(kept), deselected=len(everything) - len(kept))
        result.stdout.fnmatch_lines([f"heaptype: shard {shard}/3 (--heap-shard): the tests whose id hashes to it"])
        ran.append(junit_tests(pytester.path / f"s{shard}.xml"))
        assert ran[-1] == [f"test_many::{test.split('::')[1]}" for test in sorted(kept)]
        workers = pytester.runpytest(*UNRELATED, "-n", "2", f"--heap-shard={shard}/3", f"--junitxml=x{shard}.xml")
        workers.assert_outcomes(passed=len(kept))
        assert junit_tests(pytester.path / f"x{shard}.xml") == ran[-1]
    assert sorted(test for tests in ran for test in tests) == sorted(everything)  # each test once
    assert all(ran)


def test_a_bad_shard_option_is_a_usage_error(pytester):
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = pytester.runpytest(*UNRELATED, "--heap-shard=4/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --heap-shard: '4/3': the shard number must be 1 to 3 (I/N counts from 1)"])


# --- budget runs in shards, merged ------------------------------------------------------------------

def shard_budgets(grown: int = 0) -> str:
    """t1..t8, Small up to 8 KiB: t6, t7, t8 go over; t3 and t6 leak one Leaky (leaked = 0).
    "Leaky" is budgeted in every test but appears in t3 and t6 only; "Medum" in none.
    ``grown``: t1 keeps that many more Small live (a regression against a baseline)."""
    text = '[defaults]\nleaked = 0\n[defaults.types."Leaky"]\npeak = "1 MiB"\n[defaults.types."Medum"]\npeak = "1 KiB"\n'
    for i in range(1, 9):
        small = 100 * i + (grown if i == 1 else 0)
        extra = "leak=1" if i % 3 == 0 else "medium=5"
        text += f'\n[[tests]]\nname = "t{i}"\ncommand = ["build/workload", "small={small}", "{extra}"]\n' \
                f'[tests.types."Small"]\npeak = "8 KiB"\n'
    return text


SHARDS = 3
TESTS = [f"heap-budget.toml::t{i}" for i in range(1, 9)]


def heaptype(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "heaptype", *map(str, args)], capture_output=True, text=True)


def failed(result) -> list[str]:
    return sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED "))


def run_shards(project, *args: str) -> list:
    """Every shard of the suite, the second under xdist (a shard is the same with or without it)."""
    results = []
    for shard in range(1, SHARDS + 1):
        workers = ("-n", "2") if shard == 2 else ()
        results.append(run(project, *workers, "--heap-budget", f"--heap-shard={shard}/{SHARDS}",
                           *(arg.replace("{shard}", str(shard)) for arg in args)))
    return results


def test_shards_merge_into_the_baseline_results_and_verdicts_of_one_full_run(project):
    pytest.importorskip("xdist")
    write_budget(project, shard_budgets())
    leaking = {"heap-budget.toml::t3", "heap-budget.toml::t6"}
    in_shard = {shard: [t for t in TESTS if hb.shard_of(t, SHARDS) == shard] for shard in range(1, SHARDS + 1)}
    assert all(in_shard.values()) and any(not leaking & set(tests) for tests in in_shard.values())

    full = run(project, "--heap-budget", "--heap-baseline=full.json", "--heap-save-baseline",
               "--heap-json=full-results.json")
    full.assert_outcomes(passed=4, failed=4, warnings=1)  # the warning: "Medum" matches no test
    shards = run_shards(project, "--heap-baseline=shard-{shard}.json", "--heap-save-baseline",
                        "--heap-json=results-{shard}.json", "-W", "error::heaptype.budget.HeapBudgetWarning")
    for shard, result in enumerate(shards, 1):
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == len(in_shard[shard])
        assert "warnings" not in outcomes  # a pattern another shard matches is no warning here
        patterns = 1 if leaking & set(in_shard[shard]) else 2
        result.stdout.fnmatch_lines([f"heaptype: {patterns} budget pattern{'s' if patterns > 1 else ''} matched no "
                                     f"test of shard {shard}/{SHARDS}; `heaptype results merge` of every shard's "
                                     "--heap-json warns about those that matched in none"])
    assert sorted(t for result in shards for t in failed(result)) == failed(full) == [
        "heap-budget.toml::t3", "heap-budget.toml::t6", "heap-budget.toml::t7", "heap-budget.toml::t8"]

    inputs = [project.path / f"shard-{shard}.json" for shard in range(1, SHARDS + 1)]
    merged = heaptype("baseline", "merge", *inputs, "-o", project.path / "merged.json")
    assert merged.returncode == 0, merged.stderr
    assert merged.stdout == f"heaptype: 8 tests from 3 baselines -> {project.path / 'merged.json'}\n"
    assert (project.path / "merged.json").read_bytes() == (project.path / "full.json").read_bytes()

    results = heaptype("results", "merge", *(project.path / f"results-{s}.json" for s in range(1, SHARDS + 1)),
                       "-o", project.path / "merged-results.json", "--report", project.path / "merged.md")
    assert results.returncode == 0, results.stderr
    assert results.stdout.startswith("heaptype: 8 tests from 3 results files, 4 failed: heap-budget.toml::t3, ")
    assert results.stderr.startswith("heaptype: warning: budget for type 'Medum' "), results.stderr
    assert comparable_results(project.path / "merged-results.json") == comparable_results(project.path / "full-results.json")
    warnings = json.loads((project.path / "full-results.json").read_text())["warnings"]
    assert len(warnings) == 1 and results.stderr == f"heaptype: warning: {warnings[0]}\n"
    markdown = (project.path / "merged.md").read_text()
    assert markdown.startswith("## Heap budgets\n\n4 of 8 failed.\n")
    assert "#### `heap-budget.toml::t7`" in markdown and "Medum" in markdown.split("### Warnings")[1]

    # t1 grows by 10%: the shards against the merged baseline fail what the full run fails
    write_budget(project, shard_budgets(grown=10))
    full = run(project, "--heap-budget", "--heap-baseline=full.json", "--heap-compare-fail=peak:5%")
    shards = run_shards(project, "--heap-baseline=merged.json", "--heap-compare-fail=peak:5%")
    assert sorted(t for result in shards for t in failed(result)) == failed(full) == [
        "heap-budget.toml::t1", "heap-budget.toml::t3", "heap-budget.toml::t6", "heap-budget.toml::t7",
        "heap-budget.toml::t8"]
    holder = shards[hb.shard_of("heap-budget.toml::t1", SHARDS) - 1]
    holder.stdout.fnmatch_lines(["REGRESSED heap-budget.toml::t1: Small: peak live 1.72 KiB (1,760 B) vs baseline "
                                 "1.56 KiB (1,600 B)*"])


# --- merging files: conflicts and bad input --------------------------------------------------------

def figures(**rows: tuple[int, int, int, int]) -> dict[str, hb.Figures]:
    return {label: hb.Figures(*values) for label, values in rows.items()}


def test_baseline_merge_joins_tests_and_names_both_files_of_a_conflict(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    hb.Baseline(a, {"x::one": figures(Small=(1, 2, 3, 0)), "x::both": figures(Big=(5, 5, 1, 0))}).save()
    hb.Baseline(b, {"x::two": figures(Small=(7, 7, 1, 0)), "x::both": figures(Big=(5, 5, 1, 0))}).save()
    hb.Baseline(c, {"x::both": figures(Big=(6, 6, 1, 0))}).save()
    done = heaptype("baseline", "merge", a, b, "-o", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    merged = hb.Baseline.load(tmp_path / "out.json")
    assert merged.tests == {"x::one": figures(Small=(1, 2, 3, 0)), "x::two": figures(Small=(7, 7, 1, 0)),
                            "x::both": figures(Big=(5, 5, 1, 0))}
    conflict = heaptype("baseline", "merge", a, b, c, "-o", tmp_path / "bad.json")
    assert conflict.returncode == 2 and conflict.stdout == ""
    assert conflict.stderr == (f"heaptype: error: baseline merge: test 'x::both' is in {a} and in {c} with different "
                               "figures: merge the files of one run's shards (each test runs in one shard)\n")
    assert not (tmp_path / "bad.json").exists()
    missing = heaptype("baseline", "merge", a, tmp_path / "none.json", "-o", tmp_path / "bad.json")
    assert missing.returncode == 2
    assert missing.stderr == (f"heaptype: error: baseline merge: {tmp_path / 'none.json'}: no such baseline file "
                              "(write it with --heap-save-baseline)\n")
    no_output = heaptype("baseline", "merge", a)
    assert no_output.returncode == 2 and "the following arguments are required: -o/--output" in no_output.stderr
    bare = heaptype("baseline")  # the command without its action: its help
    assert bare.returncode == 2 and bare.stdout.startswith("usage: heaptype baseline [-h] action ...")


def test_results_merge_names_both_files_of_a_conflict_and_rejects_other_json(tmp_path):
    entry = {"test": "x::one", "passed": True, "complete": True, "profile": "p.htp", "figures": {}, "rows": [],
             "changes": [], "failure": None, "page": None, "in_baseline": None, "matched": [], "unmatched": []}
    files = {}
    for name, entries in (("a", [entry]), ("b", [entry]), ("c", [{**entry, "passed": False, "failure": "over"}])):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps({"format": "heaptype-budget-results", "version": 1, "tests": entries,
                                           "warnings": [], "baseline": None}))
    same = heaptype("results", "merge", files["a"], files["b"], "-o", tmp_path / "out.json")
    assert same.returncode == 0 and same.stdout == f"heaptype: 1 test from 2 results files, all within budget -> " \
                                                   f"{tmp_path / 'out.json'}\n"
    assert [t["test"] for t in json.loads((tmp_path / "out.json").read_text())["tests"]] == ["x::one"]
    conflict = heaptype("results", "merge", files["a"], files["c"], "-o", tmp_path / "bad.json")
    assert conflict.returncode == 2
    assert conflict.stderr == (f"heaptype: error: results merge: test 'x::one' is in {files['a']} and in "
                               f"{files['c']} with different results: merge the files of one run's shards (each test "
                               "runs in one shard)\n")
    hb.Baseline(tmp_path / "base.json", {"x::one": figures(Small=(1, 1, 1, 0))}).save()
    other = heaptype("results", "merge", tmp_path / "base.json", "-o", tmp_path / "bad.json")
    assert other.returncode == 2 and other.stderr == (
        f"heaptype: error: results merge: {tmp_path / 'base.json'}: not HeapType budget results (no \"format\": "
        "\"heaptype-budget-results\" with a list of tests)\n")
