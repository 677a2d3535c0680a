"""`heaptype check PROFILE --budget FILE [--test NAME]`: the budget engine as an exit
status, on real profiles of tests/data/budget/workload.cpp (see test_pytest_plugin.py
for its exact figures)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data" / "budget"))
from budget_testing import budget_programs  # noqa: E402,F401  (a fixture)

import heaptype  # noqa: E402
from heaptype.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def profiles(budget_programs, tmp_path_factory):
    """Profiles of a few workload runs, by name."""
    workload = budget_programs.workload()
    base = tmp_path_factory.mktemp("check-profiles")
    runs = {"small": ["small=1000"], "leaky": ["leak=3", "small=10"], "big": ["small=5000"]}
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    paths = {}
    for name, args in runs.items():
        paths[name] = base / f"{name}.htp"
        subprocess.run([str(workload), *args], env={**env, "HEAPTYPE_OUTPUT": str(paths[name])}, check=True,
                       capture_output=True)
    paths["workload"] = workload
    return paths


def budget_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "heap-budget.toml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def check(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["check", *map(str, args)])
    out, err = capsys.readouterr()
    return status, out, err


BUDGETS = """
[defaults]
leaked = 0

[[tests]]
name = "small"
command = ["bin/workload", "small=1000"]
[tests.types."Small"]
peak = "64 KiB"
allocations = 2000

[[tests]]
name = "other"
command = ["bin/other"]
"""


def test_within_budget_exits_0_with_the_figures(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, BUDGETS)
    status, out, err = check(capsys, profiles["small"], "--budget", path, "--test", "small")
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"heaptype check: small: within budget (1 row checked, profile {profiles['small']})"
    assert lines[1].split() == ["type", "peak", "live", "allocated", "allocations", "leaked", "limit", "verdict"]
    assert lines[3].startswith("  (total) ")
    assert lines[4] == "  Small     15.6 KiB   15.6 KiB        1,000     0 B  peak<=64 KiB, allocations<=2,000, leaked<=0 B  ok"
    assert check(capsys, profiles["small"], "--budget", path, "--test", "small", "-q")[1] == ""


def test_over_budget_exits_1_with_the_failure_text(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, BUDGETS)
    status, out, _ = check(capsys, profiles["big"], "--budget", path, "--test", "small")
    assert status == 1
    assert out.startswith(
        "heap budget exceeded: small\n"
        "  Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B), over by 14.1 KiB (14,464 B) (+22.1%)\n"
        "      limit set at heap-budget.toml:8 [tests.types.Small] peak\n"
        "  Small: allocations 5,000 > limit 2,000, over by 3,000 (+150.0%)\n"
        "      limit set at heap-budget.toml:9 [tests.types.Small] allocations\n")
    assert f"  profile kept: {profiles['big']}\n" in out


CASE_BUDGETS = """
[[tests]]
name = "unit"
command = ["bin/unit"]
[tests.types."Small"]
allocations = 2000

[[tests]]
name = "unit[Big.Case]"
command = ["bin/unit", "--gtest_filter=Big.Case"]
[tests.types."Small"]
peak = "64 KiB"
"""


def test_a_googletest_case_gets_its_programs_budgets_and_its_own(tmp_path, capsys, profiles):
    """`unit[Suite.Case]` (a case the Bazel budget test checks on its own) is budgeted
    as `unit` too, as the CTest split does."""
    path = budget_file(tmp_path, CASE_BUDGETS)
    status, out, err = check(capsys, profiles["big"], "--budget", path, "--test", "unit[Big.Case]")
    assert (status, err) == (1, "")
    assert out.startswith("heap budget exceeded: unit[Big.Case]\n")
    assert "  Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B)" in out
    assert "  Small: allocations 5,000 > limit 2,000, over by 3,000 (+150.0%)\n" in out

    status, out, err = check(capsys, profiles["big"], "--budget", path, "--test", "unit[Other.Case]")
    assert (status, err) == (1, "")
    assert "Small: allocations 5,000 > limit 2,000" in out and "Small: peak live" not in out

    status, out, err = check(capsys, profiles["small"], "--budget", path, "--test", "unit[Big.Case]")
    assert (status, err) == (0, "")
    assert out.startswith("heaptype check: unit[Big.Case]: within budget (1 row checked")
    assert "peak<=64 KiB, allocations<=2,000  ok\n" in out  # both entries' limits on the one row


def test_defaults_apply_to_typed_rows_only(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, BUDGETS)
    status, out, _ = check(capsys, profiles["leaky"], "--budget", path, "--test", "other")
    assert status == 1
    assert "  Leaky: leaked 72 B > limit 0 B, over by 72 B\n      limit set at heap-budget.toml:2 [defaults] leaked\n" in out
    assert "(untyped): leaked" not in out      # stdout's buffer is untyped and live at exit


def test_the_test_is_found_by_the_program_that_wrote_the_profile(tmp_path, capsys, profiles):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "workload").symlink_to(profiles["workload"])
    path = budget_file(tmp_path, BUDGETS)
    status, out, _ = check(capsys, profiles["small"], "--budget", path)
    assert status == 0 and out.startswith("heaptype check: small: within budget")


def test_an_ambiguous_file_asks_for_test(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, BUDGETS)
    status, _, err = check(capsys, profiles["small"], "--budget", path)
    assert status == 2
    assert err == f"heaptype: error: check: {path} has 2 tests: choose one with --test NAME (small, other)\n"


def test_an_unknown_test_name_warns_and_applies_defaults(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, BUDGETS)
    status, out, err = check(capsys, profiles["leaky"], "--budget", path, "--test", "smal")
    assert status == 1 and "  Leaky: leaked 72 B > limit 0 B" in out
    assert err == (f"heaptype: warning: no [[tests]] entry of {path} matches 'smal' (close names: small): "
                   "only [defaults] apply\n")


def test_a_budget_for_a_type_that_never_appears_warns(tmp_path, capsys, profiles):
    path = budget_file(tmp_path, '[[tests]]\nname = "t"\ncommand = ["x"]\n[tests.types."Smol"]\npeak = 1\n')
    status, _, err = check(capsys, profiles["small"], "--budget", path)
    assert status == 0
    assert err == ("heaptype: warning: t: budget for type 'Smol' (heap-budget.toml:5 [tests.types.Smol] peak): "
                   "the type never appears in the profile; close type names: Small\n")


@pytest.mark.parametrize("text, message", [
    ("[defaults]\nleakd = 0\n", "{path}:2:1: unknown key 'leakd' in [defaults]: did you mean 'leaked'?"),
    ("[defaults]\nleaked = \n", "{path}:2:10: invalid TOML: Invalid value"),
    ("[defaults]\npeak = '-1 KiB'\n", "{path}:2:1: peak: '-1 KiB': a size cannot be negative"),
])
def test_bad_budget_files_exit_2_with_one_line(tmp_path, capsys, profiles, text, message):
    path = budget_file(tmp_path, text)
    status, out, err = check(capsys, profiles["small"], "--budget", path)
    assert (status, out) == (2, "")
    assert err == f"heaptype: error: {message.format(path=path)}\n"


def test_missing_files_exit_2(tmp_path, capsys, profiles, monkeypatch):
    assert check(capsys, tmp_path / "none.htp", "--budget", budget_file(tmp_path, BUDGETS))[2] == \
        f"heaptype: error: {tmp_path / 'none.htp'}: no such profile file\n"
    assert check(capsys, profiles["small"], "--budget", tmp_path / "none.toml")[2] == \
        f"heaptype: error: {tmp_path / 'none.toml'}: no such budget file\n"
    monkeypatch.chdir(tmp_path / "..")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert check(capsys, profiles["small"])[2] == \
        "heaptype: error: check: no budget file: pass --budget FILE (or create heap-budget.toml here)\n"


def test_the_budget_file_defaults_to_the_current_directory(tmp_path, capsys, profiles, monkeypatch):
    budget_file(tmp_path, '[[tests]]\nname = "only"\ncommand = ["x"]\n[tests.types."Small"]\npeak = "8 KiB"\n')
    monkeypatch.chdir(tmp_path)
    status, out, _ = check(capsys, profiles["small"])
    assert status == 1 and out.startswith("heap budget exceeded: only\n  Small: peak live 15.6 KiB (16,000 B) > limit 8 KiB")


def test_the_command_line_entry_point(tmp_path, profiles):
    """The real console script: exit statuses reach the shell (and CTest)."""
    path = budget_file(tmp_path, BUDGETS)
    done = subprocess.run(["heaptype", "check", str(profiles["big"]), "--budget", str(path), "--test", "small"],
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout.startswith("heap budget exceeded: small\n")


def test_session_names_read_a_binary_once_and_name_as_load_does(profiles):
    """Three profiles of one binary, each loaded at its own address (ASLR): the session
    reads the binary's tables once (one symbolizer, the later ones share its files) and
    names every type as heaptype.load does."""
    import heaptype
    from heaptype import budget as hb
    from heaptype.budget.session import SessionNames

    session = SessionNames()
    alone = heaptype.load(profiles["small"])
    hb.measure(alone)
    for name in ("small", "leaky", "big"):
        assert hb.measure(session.load(profiles[name])) == hb.measure(heaptype.load(profiles[name]))
    last = session.load(profiles["leaky"])
    assert hb.measure(last)["Leaky"] == hb.Figures(72, 72, 3, 72)
    leaks = hb.profile_call_paths(last)("Leaky", "leaked")
    assert leaks and leaks == hb.profile_call_paths(heaptype.load(profiles["leaky"]))("Leaky", "leaked")
    assert session.binaries_read == 1
    # the counters of the files' work are shared: four profiles read the tag tables of one
    stats, one = last.symbolizer.stats, alone.symbolizer.stats
    assert stats.type_tables_read + stats.type_tables_from_cache == one.type_tables_read + one.type_tables_from_cache
    assert one.type_tables_read + one.type_tables_from_cache >= 1


def test_ctest_helper_bazel_test_and_pytest_run_and_judge_alike(budget_programs, tmp_path):
    """Issue 16, one engine: `heaptype run --budget` (what heaptype_add_test gives CTest),
    the Bazel budget test's body and the pytest plugin run the program through one runner
    and judge it with one engine. The caller's HEAPTYPE_START=stopped, which would record
    nothing, is dropped by all three: each finds the same type over its limit."""
    from heaptype import budget as hb
    from heaptype.pytest_plugin import run_program

    workload = str(budget_programs.workload())
    path = budget_file(tmp_path, f'[[tests]]\nname = "w"\ncommand = ["{workload}", "small=1000"]\n'
                                 '[tests.types."Small"]\npeak = "8 KiB"\n')
    env = {**os.environ, "HEAPTYPE_START": "stopped", "TEST_UNDECLARED_OUTPUTS_DIR": str(tmp_path / "bazel")}
    over = "heap budget exceeded: w\n  Small: peak live 15.6 KiB (16,000 B) > limit 8 KiB"

    ctest = subprocess.run(["heaptype", "run", "-o", str(tmp_path / "ctest.htp"), "--budget", str(path),
                            "--budget-test", "w", "--", workload, "small=1000"], capture_output=True, text=True,
                           env=env)
    assert ctest.returncode == 1 and over in ctest.stdout, ctest.stdout + ctest.stderr

    bazel_body = Path(__file__).resolve().parents[2] / "bazel" / "tools" / "budget_test.py"
    bazel = subprocess.run([sys.executable, str(bazel_body), "--runfiles", "/", "--label", "//app:w", "--binary",
                            workload, "--budget", str(path), "--test", "w", "--", "small=1000"],
                           capture_output=True, text=True, env=env)
    assert bazel.returncode == 1 and over in bazel.stdout, bazel.stdout + bazel.stderr

    os.environ["HEAPTYPE_START"] = "stopped"  # the pytest process's own environment
    try:
        run = run_program([workload, "small=1000"], cwd=tmp_path, env={}, timeout=None, out_dir=tmp_path / "pytest")
    finally:
        del os.environ["HEAPTYPE_START"]
    budgets = hb.load_budget_file(path)
    budget = budgets.budget_for("w", budgets.command_tests()[0])
    assert over in hb.failure_text(hb.evaluate(budget, hb.measure(run.profile), profile_path=str(run.profile_path)))


def test_ctest_helper_and_bazel_test_count_per_call_site_and_record_events_when_they_must(budget_programs,
                                                                                           tmp_path):
    """Both first run the program aggregated (docs/aggregate.md); a peak limit on the
    untyped row, whose own peak the counts do not keep, makes them run it again recording
    events, and that run's verdict is theirs."""
    workload = str(budget_programs.workload())
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    bazel_body = Path(__file__).resolve().parents[2] / "bazel" / "tools" / "budget_test.py"
    for limit, aggregated in (('[tests.types."Small"]\npeak = "64 KiB"\n', True),
                              ('[tests.types."(untyped)"]\npeak = "64 MiB"\n', False)):
        path = budget_file(tmp_path, f'[[tests]]\nname = "w"\ncommand = ["{workload}", "small=1000", "malloc=10"]\n'
                                     + limit)
        ctest_profile = tmp_path / "ctest.htp"
        ctest = subprocess.run(["heaptype", "run", "-o", str(ctest_profile), "--budget", str(path), "--budget-test",
                                "w", "--", workload, "small=1000", "malloc=10"], capture_output=True, text=True,
                               env=env)
        assert ctest.returncode == 0, ctest.stdout + ctest.stderr
        assert heaptype.load(ctest_profile).aggregated is aggregated
        assert ("running it again, recording events" in ctest.stderr) is not aggregated
        outputs = tmp_path / f"bazel-{aggregated}"
        outputs.mkdir()
        bazel = subprocess.run([sys.executable, str(bazel_body), "--runfiles", "/", "--label", "//app:w", "--binary",
                                workload, "--budget", str(path), "--test", "w", "--", "small=1000", "malloc=10"],
                               capture_output=True, text=True, env={**env, "TEST_UNDECLARED_OUTPUTS_DIR": str(outputs)})
        assert bazel.returncode == 0, bazel.stdout + bazel.stderr
        profiles = list(outputs.rglob("*.htp"))
        assert len(profiles) == 1 and heaptype.load(profiles[0]).aggregated is aggregated
        assert ("recording events" in bazel.stdout) is not aggregated
