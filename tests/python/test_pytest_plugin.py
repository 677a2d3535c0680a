"""The pytest plugin, run with pytester against real native programs built in this
session (tests/data/budget/workload.cpp, whose figures per type are known exactly,
and the CMake project tests/data/budget/ctest_project).

workload's truth: small=N keeps N Small (16 B) live at once, then frees them (peak
16*N, allocations N); medium=N the same with 32 B; large=N 64 B; leak=N leaves N Leaky
(24 B) live at exit; map=N makes N std::map<int, int> nodes (40 B); vector=N one
Elem[N] block (8 B each); malloc=N N untyped 1000 B blocks; crash=1 aborts; exit=N
exits with N. Like any program that prints, it keeps stdout's 4 KiB buffer (untyped)
live at exit.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data" / "budget"))
from budget_testing import EXAMPLE, budget_programs  # noqa: E402,F401  (budget_programs: a fixture)

import heaptype  # noqa: E402

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """The inner pytest runs must not write to a real CI's step summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def project(pytester, budget_programs):
    """A pytester directory with build/workload and build/workload_plain in it."""
    build = pytester.path / "build"
    build.mkdir()
    (build / "workload").symlink_to(budget_programs.workload())
    (build / "workload_plain").symlink_to(budget_programs.workload_plain())
    return pytester


# Inner runs load only pytest's own plugins, xdist and heaptype: a third-party plugin
# such as hypothesis's would be imported again (and assertion-rewritten) in every run,
# ~2 s each here, and would slow down every xdist worker's start.
UNRELATED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:randomly", "-p", "no:cacheprovider")


def run(pytester, *args: str):
    return pytester.runpytest(*UNRELATED_PLUGINS, *args)


def write_budget(pytester, text: str, name: str = "heap-budget.toml") -> Path:
    path = pytester.path / name
    path.write_text(text.lstrip("\n"))
    return path


def lines_in_order(result, *lines: str) -> None:
    """Each line appears exactly (trailing blanks aside), in this order."""
    result.stdout.re_match_lines([re.escape(line) + r"\s*$" for line in lines])


def summary_section(result) -> list[str]:
    """The end-of-run table, from its title to its count line."""
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if re.match(r"=+ heap budgets =+$", line))
    end = next(i for i in range(start, len(lines)) if re.match(r"\d+ measured, \d+ failed", lines[i]))
    return lines[start:end + 1]


def junit_properties(path: Path) -> dict[str, dict[str, str]]:
    tree = ET.parse(path)
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in tree.iter("testcase")}


# --- acceptance 1: budgets that hold, budgets exceeded, leaks, untyped, CTest ----------------------

def test_a_budget_that_holds_passes_and_reports_exact_figures(project):
    write_budget(project, """
[defaults]
leaked = 0

[[tests]]
name = "small_ok"
command = ["build/workload", "small=1000"]

[tests.types."Small"]
peak = "64 KiB"
allocations = 20000
bytes = "1 MiB"
leaked = 0
""")
    result = run(project, "--heap-budget", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    table = summary_section(result)
    assert re.fullmatch(r"heap-budget\.toml::small_ok\s+Small\s+15\.6 KiB\s+15\.6 KiB\s+1,000\s+0 B\s+"
                        r"peak<=64 KiB, bytes<=1 MiB, allocations<=20,000, leaked<=0 B\s+ok", table[4])
    assert table[-1] == "1 measured, 0 failed"
    properties = junit_properties(project.path / "junit.xml")["small_ok"]
    assert {k: v for k, v in properties.items() if k.endswith("[Small]")} == {
        "heaptype.peak[Small]": "16000", "heaptype.bytes[Small]": "16000",
        "heaptype.allocations[Small]": "1000", "heaptype.leaked[Small]": "0"}
    assert int(properties["heaptype.allocations[(total)]"]) >= 1000


def test_an_exceeded_budget_fails_with_the_full_report(project):
    write_budget(project, """
[[tests]]
name = "small_big"
command = ["build/workload", "small=5000", "medium=10"]

[tests.types."Small"]
peak = "64 KiB"
allocations = 4000
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    lines_in_order(
        result,
        "heap budget exceeded: heap-budget.toml::small_big",
        "  Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B), over by 14.1 KiB (14,464 B) (+22.1%)",
        "      limit set at heap-budget.toml:6 [tests.types.Small] peak",
        "  Small: allocations 5,000 > limit 4,000, over by 1,000 (+25.0%)",
        "      limit set at heap-budget.toml:7 [tests.types.Small] allocations",
    )
    result.stdout.re_match_lines([r"      top call paths of Small:$",
                                  r"        1\. 78\.1 KiB peak live: main > .*live_then_free<Small>",
                                  r"  profile kept: /.*\.htp$", r"  measured:$",
                                  r"    Small\s+78\.1 KiB\s+78\.1 KiB\s+5,000\s+0 B\s+peak<=64 KiB, "
                                  r"allocations<=4,000\s+OVER$",
                                  r"  command: \S+/build/workload small=5000 medium=10$"])
    kept = Path(next(line for line in result.outlines if line.startswith("  profile kept: ")).split(": ", 1)[1])
    assert heaptype.load(kept).type_row("Small").peak_bytes == 80000
    assert "Traceback" not in result.stdout.str()
    assert re.search(r"heap-budget\.toml::small_big\s+Small\s+78\.1 KiB.*OVER", "\n".join(summary_section(result)))


def test_a_leak_fails_leaked_zero_but_stdout_buffers_do_not(project):
    write_budget(project, """
[defaults]
leaked = 0

[[tests]]
name = "leaky"
command = ["build/workload", "leak=3"]

[[tests]]
name = "prints"
command = ["build/workload", "small=10"]

[[tests]]
name = "strict_untyped"
command = ["build/workload", "small=10"]
[tests.types."(untyped)"]
leaked = 0
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(passed=1, failed=2)
    lines_in_order(result,
                   "heap budget exceeded: heap-budget.toml::leaky",
                   "  Leaky: leaked 72 B > limit 0 B, over by 72 B",
                   "      limit set at heap-budget.toml:2 [defaults] leaked",
                   "heap budget exceeded: heap-budget.toml::strict_untyped",
                   "  (untyped): leaked 4 KiB (4,096 B) > limit 0 B, over by 4 KiB (4,096 B)",
                   '      limit set at heap-budget.toml:16 [tests.types."(untyped)"] leaked')
    result.stdout.no_fnmatch_line("*heap budget exceeded: heap-budget.toml::prints*")


def test_untyped_budgets_apply_to_memory_without_a_type(project):
    write_budget(project, """
[[tests]]
name = "over"
command = ["build/workload", "malloc=1000"]
[tests.types."(untyped)"]
peak = "1 MiB"

[[tests]]
name = "within"
command = ["build/workload", "malloc=1000"]
[tests.types."(untyped)"]
peak = "2 MiB"
allocations = 1100
""")
    result = run(project, "--heap-budget", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.re_match_lines([r"  \(untyped\): peak live 1\.\d+ MiB \(1,0\d\d,\d{3} B\) > limit 1 MiB \(1,048,576 B\), "
                                  r"over by [\d.]+ KiB"])
    peak = int(junit_properties(project.path / "junit.xml")["within"]["heaptype.peak[(untyped)]"])
    assert 1000 * 1000 <= peak < 1000 * 1000 + (256 << 10)  # the blocks, plus the runtime's own


def test_globs_and_star_budget_every_matching_type(project):
    write_budget(project, """
[[tests]]
name = "containers"
command = ["build/workload", "map=10", "vector=200", "small=4"]
[tests.types."std::_Rb_tree_node<*>"]
allocations = 5
[tests.types."*"]
peak = "1 KiB"
[tests.types."Small"]
peak = "1 MiB"
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    lines_in_order(result,
                   "  Elem: peak live 1.56 KiB (1,600 B) > limit 1 KiB (1,024 B), over by 576 B (+56.2%)",
                   '      limit set at heap-budget.toml:7 [tests.types."*"] peak',
                   "  std::_Rb_tree_node<…>: allocations 10 > limit 5, over by 5 (+100.0%)")
    result.stdout.no_fnmatch_line("  Small: *")
    whole = run(project, "--heap-budget", "--heap-full-names")
    lines_in_order(whole, "  std::_Rb_tree_node<std::pair<int const, int>>: allocations 10 > limit 5, over by 5 "
                          "(+100.0%)")


def test_a_crash_fails_with_what_the_cut_short_profile_shows(project):
    write_budget(project, """
[defaults]
leaked = 0
[[tests]]
name = "crashes"
command = ["build/workload", "small=300000", "crash=1"]
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    lines_in_order(result,
                   "heap-budget.toml::crashes: the program crashed (killed by signal 6 (SIGABRT)); figures cover "
                   "what its cut-short profile holds",
                   "  note: the profile was cut short (the program did not finish): figures cover what was written "
                   "before that; `leaked` limits are not checked")
    result.stdout.re_match_lines([r"    Small\s+\d.*\d{3},\d{3}\s+", r"heap-budget\.toml::crashes\s+\(total\).*CRASHED \(SIGABRT\)$"])


def test_a_test_over_its_timeout_is_killed_and_fails(project):
    write_budget(project, """
[[tests]]
name = "slow"
command = ["build/workload", "small=10", "sleep=20000"]
timeout = 0.5
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    lines_in_order(result, "heap-budget.toml::slow: timed out after 0.5 s and was killed; figures cover what its "
                           "cut-short profile holds")
    result.stdout.re_match_lines([r"heap-budget\.toml::slow\s+\(total\).*TIMEOUT$"])


def test_each_run_has_a_temporary_directory_of_its_own_unless_its_env_names_one(project):
    """TEST_TMPDIR (Bazel's, and GoogleTest's TempDir()) names the run's own fresh
    directory: tests that keep a fixed file there run at once under xdist without
    meeting. A TEST_TMPDIR the test's env sets is kept: there the second claim fails."""
    shared = project.path / "shared"
    shared.mkdir()
    write_budget(project, f"""
[[tests]]
name = "first"
command = ["build/workload", "claim=lock"]
[[tests]]
name = "second"
command = ["build/workload", "claim=lock"]
[[tests]]
name = "shared_a"
command = ["build/workload", "claim=lock"]
env = {{ TEST_TMPDIR = "{shared}" }}
[[tests]]
name = "shared_b"
command = ["build/workload", "claim=lock"]
env = {{ TEST_TMPDIR = "{shared}" }}
""")
    result = run(project, "--heap-budget", "-n", "2")
    result.assert_outcomes(passed=3, failed=1)
    assert (shared / "lock").is_file()
    assert "cannot claim " + str(shared / "lock") in result.stdout.str()


def test_exit_status_is_checked_against_returncode(project):
    write_budget(project, """
[[tests]]
name = "fails"
command = ["build/workload", "exit=3"]
[[tests]]
name = "expected"
command = ["build/workload", "exit=3"]
returncode = 3
""")
    result = run(project, "--heap-budget")
    result.assert_outcomes(passed=1, failed=1)
    lines_in_order(result, "heap-budget.toml::fails: exit status 3 (expected 0)")
    result.stdout.re_match_lines([r"heap-budget\.toml::fails\s+\(total\).*EXIT 3$"])


@pytest.fixture(scope="module")
def ctest_build(budget_programs):
    from tooling import require_tool

    cmake = require_tool("cmake")
    require_tool("ctest")
    return budget_programs.ctest_build(cmake)


def test_ctest_discovery_finds_the_tests_of_a_cmake_project(project, ctest_build):
    write_budget(project, f"""
[defaults]
leaked = 0

[ctest]
build_dir = "{ctest_build}"
gtest_split = ["gtest_*"]
exclude = ["locked_*", "serial", "busy", "fixture_*", "broken_*"]

[[tests]]
name = "small_*"
[tests.types."Small"]
peak = "64 KiB"

[[tests]]
name = "smal_ok"
""")
    collected = run(project, "--heap-budget", "--collect-only", "-q")
    assert [line for line in collected.outlines if "::" in line] == [
        "heap-budget.toml::small_ok", "heap-budget.toml::small_big", "heap-budget.toml::leaky",
        "heap-budget.toml::in_source_dir", "heap-budget.toml::off", "heap-budget.toml::expected_failure",
        "heap-budget.toml::gtest_cases[Alloc.Small]", "heap-budget.toml::gtest_cases[Alloc.Leak]"]
    result = run(project, "--heap-budget", "-rs")
    result.assert_outcomes(passed=4, failed=3, skipped=1, warnings=1)
    lines_in_order(result,
                   "heap budget exceeded: heap-budget.toml::small_big",
                   "  Small: peak live 78.1 KiB (80,000 B) > limit 64 KiB (65,536 B), over by 14.1 KiB (14,464 B) (+22.1%)",
                   "heap budget exceeded: heap-budget.toml::leaky",
                   "  Leaky: leaked 72 B > limit 0 B, over by 72 B",
                   "heap budget exceeded: heap-budget.toml::gtest_cases[Alloc.Leak]",
                   "  Leaky: leaked 48 B > limit 0 B, over by 48 B")
    result.stdout.re_match_lines([r".*HeapBudgetWarning: heap-budget\.toml:14: budgets for 'smal_ok' match no "
                                  r"CTest test of .*; close names: small_ok",
                                  r"SKIPPED .* CTest test off is DISABLED"])
    result.stdout.re_match_lines([r"heap-budget\.toml::small_ok\s+Small\s+1\.56 KiB\s+1\.56 KiB\s+100\s+0 B\s+"
                                  r"peak<=64 KiB, leaked<=0 B\s+ok$"])


def test_ctest_resource_locks_and_run_serial_hold_across_xdist_workers(project, ctest_build):
    """locked_1 and locked_2 share a RESOURCE_LOCK, serial is RUN_SERIAL beside busy;
    each holds one file name of a shared directory for a second, and xdist hands each
    worker a pair that would meet (tests/data/budget/ctest_project). ctest keeps them
    apart: so do the workers, and a test without the properties waits for none."""
    write_budget(project, f'[ctest]\nbuild_dir = "{ctest_build}"\ntests = ["locked_*", "serial", "busy"]\n')
    result = run(project, "--heap-budget", "-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=4)
    assert sorted(p.name for p in (Path(ctest_build) / ".heaptype-locks").iterdir()) == [
        "resource-other-" + hashlib.sha1(b"other").hexdigest()[:8] + ".lock",
        "resource-shared_file-" + hashlib.sha1(b"shared_file").hexdigest()[:8] + ".lock", "run-serial.lock"]


def test_ctest_fixtures_run_setups_first_and_cleanups_last_across_xdist_workers(project, ctest_build):
    """fixture_use_1 and _2 need the file fixture_setup makes, fixture_cleanup removes it;
    CMakeLists.txt defines them users first, setup last. As under ctest: the setup runs
    before them, the cleanup after both (each worker gets two of the four), a failed
    setup stops the test requiring its fixture but not its cleanup."""
    write_budget(project, f'[ctest]\nbuild_dir = "{ctest_build}"\ntests = ["fixture_*", "broken_*"]\n')
    (Path(ctest_build) / "fixture" / "ready").unlink(missing_ok=True)
    collected = run(project, "--heap-budget", "--collect-only", "-q")
    assert [line.split("::")[1] for line in collected.outlines if "::" in line] == [
        "fixture_setup", "fixture_use_1", "fixture_use_2", "fixture_cleanup",
        "broken_setup", "broken_use", "broken_cleanup"]
    result = run(project, "--heap-budget", "-n", "2", "-p", "no:randomly")
    result.assert_outcomes(passed=5, failed=2)
    lines_in_order(result,
                   "heap-budget.toml::broken_setup: exit status 1 (expected 0)",
                   "heap-budget.toml::broken_use (CTest test broken_use): not run: the setup test of a CTest fixture "
                   "it requires failed: broken_setup (fixture 'broken')")
    assert not (Path(ctest_build) / "fixture" / "ready").exists()


def test_selecting_a_test_of_a_ctest_fixture_brings_its_setup_and_cleanup(project, ctest_build):
    write_budget(project, f'[ctest]\nbuild_dir = "{ctest_build}"\ntests = ["fixture_*"]\n')
    (Path(ctest_build) / "fixture" / "ready").unlink(missing_ok=True)
    result = run(project, "--heap-budget", "-k", "use_2", "-v")
    result.assert_outcomes(passed=3, deselected=1)  # fixture_use_1 alone
    result.stdout.re_match_lines([r".*::fixture_setup PASSED", r".*::fixture_use_2 PASSED",
                                  r".*::fixture_cleanup PASSED"])
    result.stdout.no_fnmatch_line("*fixture_use_1*")


def test_a_program_whose_counts_waited_records_events_in_its_later_tests(project):
    """An aggregated run whose threads often found the counts' lock taken ends with the
    runtime's note (docs/aggregate.md; workload's say= writes it the same way): that
    program's later tests record events from the start, others stay aggregated."""
    note = ("heaptype: aggregated mode: 40% of the counts waited for another thread's: every count takes "
            "one lock, and this program's threads allocate at once")
    (project.path / "build" / "workload_again").symlink_to(project.path / "build" / "workload")
    write_budget(project, f"""
[[tests]]
name = "first"
command = ["build/workload", "small=10", "say={note}"]
[[tests]]
name = "second"
command = ["build/workload", "small=20"]
[[tests]]
name = "another_program"
command = ["build/workload_again", "small=5"]
[tests.types."Small"]
peak = "1 KiB"
""")
    result = run(project, "--heap-budget", "--heap-profile-dir=profiles", "-p", "no:xdist")
    result.assert_outcomes(passed=3)
    aggregated = {}
    for test in ("first", "second", "another_program"):
        [path] = (project.path / "profiles").glob(f"{test}-*/*.htp")
        aggregated[test] = heaptype.load(path).aggregated
    assert aggregated == {"first": True, "second": False, "another_program": True}


def test_a_ctest_test_that_runs_a_tool_is_told_how_to_leave_it_out(project):
    """A real suite's CTest tests include checks that run tools, not the project's programs
    (yaml-cpp's `cmake -P verify-source-list.cmake`): such a test writes no profile, and its
    failure names the [ctest] exclude that leaves it out."""
    from tooling import require_tool

    cmake = require_tool("cmake")
    require_tool("ctest")
    source, build = project.path / "tools_project", project.path / "tools_build"
    source.mkdir()
    (source / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.16)\nproject(tools NONE)\n"
                                           "enable_testing()\nadd_test(NAME tool_check COMMAND ${CMAKE_COMMAND} -E true)\n")
    subprocess.run([cmake, "-S", str(source), "-B", str(build)], check=True, capture_output=True)
    write_budget(project, '[ctest]\nbuild_dir = "tools_build"\n')
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r".*wrote no profile: it is not built with HeapType.*; or, if this CTest test runs "
                                  r'no program of yours, leave it out: \[ctest\] exclude = \["tool_check"\]'])
    write_budget(project, '[ctest]\nbuild_dir = "tools_build"\nexclude = ["tool_check"]\n')
    assert [line for line in run(project, "--heap-budget", "--collect-only", "-q").outlines if "::" in line] == []


def test_a_script_as_a_tests_command_is_named_as_a_script(project):
    """A wrapper script (a pyenv shim, a launcher) writes no profile of its own: the
    failure says it is a script and what a budget judges, not "rebuild with HeapType"."""
    script = project.path / "launcher.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    write_budget(project, '[[tests]]\nname = "wrapped"\ncommand = ["./launcher.sh"]\n')
    result = run(project, "--heap-budget", "-p", "no:xdist")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r".*launcher\.sh wrote no profile: it is a script \(\S+/launcher\.sh\), and a "
                                  r"budget judges one process of a program built with HeapType.*"])
    assert "not built with HeapType" not in result.stdout.str()


def test_the_ctest_build_tree_is_not_collected(project, ctest_build):
    """A CMake build tree holds thousands of files and no tests of the project: under
    --heap-budget collection skips the one [ctest] names (a test file put there is not
    collected), and without the flag pytest walks it as before."""
    (project.path / "tree").symlink_to(ctest_build, target_is_directory=True)
    probe = Path(ctest_build) / f"test_inside_the_build_tree_{os.getpid()}.py"
    probe.write_text("def test_inside():\n    pass\n")
    try:
        write_budget(project, '[ctest]\nbuild_dir = "tree"\n')
        collected = [line for line in run(project, "--heap-budget", "--collect-only", "-q").outlines if "::" in line]
        assert "heap-budget.toml::small_ok" in collected
        assert not any("test_inside" in line for line in collected)
        assert any("test_inside" in line for line in run(project, "--collect-only", "-q").outlines)
    finally:
        probe.unlink()


def test_xdist_workers_share_one_ctest_discovery(project, ctest_build, tmp_path, monkeypatch):
    """The controller runs ctest (and lists the GoogleTest binaries) while the workers
    start; they read what it found from the build tree. A later run discovers again,
    and its file replaces the earlier run's."""
    log = tmp_path / "ctest-calls.log"
    wrapper = tmp_path / "bin" / "ctest"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "${{PYTEST_XDIST_WORKER:-controller}} $*" >> {log}\n'
                       f'exec {shutil.which("ctest")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # this test's own worker's: the inner run's controller has none
    write_budget(project, f'[ctest]\nbuild_dir = "{ctest_build}"\ngtest_split = ["gtest_*"]\ntests = ["small_*", "gtest_*"]\n')
    shared = []
    for _ in range(2):
        result = run(project, "--heap-budget", "-n", "2")
        result.assert_outcomes(passed=4)
        assert log.read_text().splitlines().count("controller --show-only=json-v1") == 1
        assert [line for line in log.read_text().splitlines() if "--show-only" in line] == \
            ["controller --show-only=json-v1"]
        log.unlink()
        shared.append(sorted(p.name for p in Path(ctest_build).glob(".heaptype-discovery-*.json")))
        assert len(shared[-1]) == 1
    assert shared[0] != shared[1]


def test_a_command_named_like_a_ctest_test_is_an_error(project, ctest_build):
    path = write_budget(project, f'[ctest]\nbuild_dir = "{ctest_build}"\n[[tests]]\nname = "leaky"\n'
                                 'command = ["build/workload"]\n')
    result = run(project, "--heap-budget")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    lines_in_order(result, f"{path}:3: test 'leaky' is both a [[tests]] command and a CTest test of {ctest_build}: "
                           "rename it, or drop its command to budget the CTest test")


def test_ctest_problems_are_collection_errors_with_a_fix(project):
    write_budget(project, '[ctest]\nbuild_dir = "no-such-build"\n')
    result = run(project, "--heap-budget")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    lines_in_order(result, f"{project.path / 'heap-budget.toml'}:1: [ctest]: build_dir {project.path / 'no-such-build'} does not exist: "
                           "configure and build the project first (with enable_testing() and add_test())")
    assert "Traceback" not in result.stdout.str()


# --- the fixture and the marker --------------------------------------------------------------------

def test_heap_profile_fixture_and_heap_budget_marker(project):
    workload = project.path / "build" / "workload"
    plain = project.path / "build" / "workload_plain"
    project.makepyfile(test_native=f"""
        import pytest

        WORKLOAD = {str(workload)!r}

        def test_measures(heap_profile):
            run = heap_profile.run([WORKLOAD, "small=1000"])
            assert run.returncode == 0 and run.stdout == "workload: done (1000)\\n"
            row = run.profile.type_row("Small")
            assert (row.peak_bytes, row.allocations) == (16000, 1000)

        @pytest.mark.heap_budget("Small", peak="8 KiB")
        def test_over(heap_profile):
            heap_profile.run([WORKLOAD, "small=1000"])

        @pytest.mark.heap_budget(leaked=0)
        @pytest.mark.heap_budget("Leaky", leaked="1 KiB")
        def test_type_beats_default(heap_profile):
            heap_profile.run([WORKLOAD, "leak=2", "medium=1"], name="first")
            heap_profile.run([WORKLOAD, "leak=2"], name="second")

        @pytest.mark.heap_budget(leaked=0, timeout=0.5)
        def test_leak(heap_profile):
            heap_profile.run([WORKLOAD, "leak=2"])
            assert heap_profile.run([WORKLOAD, "sleep=20000"]).returncode == -9  # killed at the marker's timeout

        @pytest.mark.heap_budget("Small", peak="8 KiB")
        def test_without_fixture():
            pass

        @pytest.mark.heap_budget("Small", peek="8 KiB")
        def test_bad_marker(heap_profile):
            heap_profile.run([WORKLOAD, "small=1"])

        def test_not_instrumented(heap_profile):
            heap_profile.run([{str(plain)!r}])
        """)
    result = run(project, "--junitxml=junit.xml")
    result.assert_outcomes(passed=2, failed=5)
    properties = junit_properties(project.path / "junit.xml")
    assert properties["test_over"]["heaptype.peak[Small]"] == "16000"
    assert int(properties["test_measures"]["heaptype.allocations[(total)]"]) >= 1000
    assert properties["test_type_beats_default"]["heaptype[first].leaked[Leaky]"] == "48"
    assert properties["test_type_beats_default"]["heaptype[second].leaked[Leaky]"] == "48"
    lines_in_order(
        result,
        "heap budget exceeded: test_native.py::test_over",
        "  Small: peak live 15.6 KiB (16,000 B) > limit 8 KiB (8,192 B), over by 7.62 KiB (7,808 B) (+95.3%)",
        "      limit set at test_native.py::test_over: heap_budget marker types.Small.peak",
        "heap budget exceeded: test_native.py::test_leak[workload]",
        "  Leaky: leaked 48 B > limit 0 B, over by 48 B",
        "test_native.py::test_without_fixture: @pytest.mark.heap_budget needs a profile: run the native program "
        "with the heap_profile fixture (heap_profile.run([...])), or load the HeapType runtime into this Python "
        "process to budget native code it calls through ctypes or pybind11 (LD_PRELOAD="
        "$(heaptype --lib-dir)/libheaptype.so python -m pytest ...)",
        "test_native.py::test_bad_marker: heap_budget marker: unknown key 'peek' in types.Small: did you mean 'peak'?",
    )
    result.stdout.re_match_lines([r"heap_profile\.run: \S+/workload_plain wrote no profile: it is not built with "
                                  r"HeapType, or it did not start\. Fix: build it with HeapType: compile with "
                                  r"`heaptype --cflags` and link with `heaptype --ldflags`, or call "
                                  r"heaptype_instrument\(<target>\) after find_package\(HeapType\) in CMake"])
    table = "\n".join(summary_section(result))
    assert re.search(r"test_native\.py::test_type_beats_default\[first\]\s+Leaky\s+48 B.*leaked<=1 KiB\s+ok", table)
    assert re.search(r"test_native\.py::test_type_beats_default\[second\]\s+Leaky", table)
    assert re.search(r"test_native\.py::test_measures\s+\(total\)", table)
    assert "Traceback" not in result.stdout.str()


# --- acceptance 4: bad input, one clear message each ----------------------------------------------------

def test_malformed_toml_is_a_collection_error_naming_line_and_column(project):
    path = write_budget(project, '[[tests]]\nname = "a"\ncommand = ["build/workload"\n[tests.types."Small"]\n')
    result = run(project, "--heap-budget")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    lines_in_order(result, f"{path}:4:1: invalid TOML: Unclosed array")
    assert "Traceback" not in result.stdout.str()


def test_unknown_keys_are_collection_errors_with_the_closest_key(project):
    path = write_budget(project, '[[tests]]\nname = "a"\ncommand = ["build/workload"]\n[tests.types."Small"]\n'
                                 'peak = "1 KiB"\nallocs = 3\n')
    result = run(project, "--heap-budget")
    lines_in_order(result, f"{path}:6:1: unknown key 'allocs' in [tests.types.Small]: did you mean 'allocations'?")


def test_negative_sizes_are_collection_errors(project):
    path = write_budget(project, '[defaults]\npeak = "-2 MiB"\n[[tests]]\nname = "a"\ncommand = ["build/workload"]\n')
    result = run(project, "--heap-budget")
    lines_in_order(result, f"{path}:2:1: peak: '-2 MiB': a size cannot be negative")


def test_a_command_that_does_not_exist(project):
    write_budget(project, '[[tests]]\nname = "missing"\ncommand = ["build/nope", "x"]\n')
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    lines_in_order(result,
                   f"heap-budget.toml::missing (heap-budget.toml:1): command not found: {project.path}/build/nope: "
                   "build the program first, or fix the command",
                   f"  command: {project.path}/build/nope x")


def test_a_binary_not_built_with_heaptype(project):
    write_budget(project, '[[tests]]\nname = "plain"\ncommand = ["build/workload_plain", "small=3"]\n')
    result = run(project, "--heap-budget")
    result.assert_outcomes(failed=1)
    result.stdout.re_match_lines([r"heap-budget\.toml::plain \(heap-budget\.toml:1\): \S+/workload_plain wrote no "
                                  r"profile: it is not built with HeapType, or it did not start\. Fix: build it with "
                                  r"HeapType: compile with `heaptype --cflags` and link with `heaptype --ldflags`, or "
                                  r"call heaptype_instrument\(<target>\) after find_package\(HeapType\) in CMake$"])


def test_a_type_budget_warns_once_and_only_when_no_test_has_the_type(project):
    write_budget(project, """
[defaults.types."Smal"]
peak = "1 MiB"
[defaults.types."Medium"]
peak = "1 MiB"

[[tests]]
name = "one"
command = ["build/workload", "small=10", "medium=10"]
[[tests]]
name = "two"
command = ["build/workload", "small=10"]
[[tests]]
name = "three"
command = ["build/workload", "small=10"]
[[tests]]
name = "typo"
command = ["build/workload", "small=10"]
[tests.types."Larg"]
peak = "1 MiB"
""")
    result = run(project, "--heap-budget", "-n", "2")
    result.assert_outcomes(passed=4, warnings=2)
    text = result.stdout.str()
    assert text.count("HeapBudgetWarning") == 2 and "'Medium'" not in text  # Medium is in test "one"
    assert ("  heap-budget.toml:2: HeapBudgetWarning: budget for type 'Smal' (heap-budget.toml:2 "
            "[defaults.types.Smal] peak): the type never appears in any of the 4 tests it applies to; close type "
            "names: Small") in result.outlines
    assert ("  heap-budget.toml:19: HeapBudgetWarning: budget for type 'Larg' (heap-budget.toml:19 "
            "[tests.types.Larg] peak): the type never appears in the profile of the one test it applies to; the "
            "profile has 1 typed rows (heaptype report shows them)") in result.outlines


def test_budget_warnings_can_be_made_errors(project):
    write_budget(project, '[[tests]]\nname = "typo"\ncommand = ["build/workload", "small=10"]\n'
                          '[tests.types."Smal"]\npeak = "1 MiB"\n')
    result = run(project, "--heap-budget", "-W", "error::heaptype.budget.HeapBudgetWarning")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines_in_order(result, "ERROR: budget for type 'Smal' (heap-budget.toml:5 [tests.types.Smal] peak): the type "
                           "never appears in the profile of the one test it applies to; close type names: Small (a "
                           "HeapBudgetWarning, made an error by -W / filterwarnings)")
    assert "Traceback" not in result.stdout.str() and "runner.py" not in result.stdout.str()


@pytest.mark.parametrize("options, message", [
    (["--heap-baseline=b.json", "--heap-compare-fail=peek:5%"],
     "ERROR: --heap-compare-fail: 'peek:5%': unknown field 'peek': did you mean 'peak'?"),
    (["--heap-compare-fail=peak:5%"],
     "ERROR: --heap-compare-fail needs a baseline to compare with: --heap-baseline FILE"),
    (["--heap-baseline=b.json", "--heap-compare-fail=peak:5%", "--heap-compare-fail=peak:1%"],
     "ERROR: --heap-compare-fail: peak is given twice (5% and 1%)"),
    (["--heap-save-baseline"], "ERROR: --heap-save-baseline needs the file to write: --heap-baseline FILE"),
])
def test_bad_options_are_usage_errors(pytester, options, message):
    result = run(pytester, *options)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.lines


def test_ini_paths_are_relative_to_the_ini_file(project):
    (project.path / "ci").mkdir()
    write_budget(project, '[[tests]]\nname = "from_ini"\ncommand = ["../build/workload", "small=1"]\n', "ci/b.toml")
    project.makeini("[pytest]\nheap_budget_file = ci/b.toml\nheap_baseline = ci/heap-baseline.json\n")
    sub = project.path / "sub"
    sub.mkdir()
    quiet = run(project, str(sub))          # no --heap-budget: the ini file alone changes nothing,
    assert quiet.ret == pytest.ExitCode.NO_TESTS_COLLECTED   # and a baseline not saved yet is no error
    result = run(project, "--heap-budget", "--heap-save-baseline")
    result.assert_outcomes(passed=1)
    assert (project.path / "ci" / "heap-baseline.json").is_file()
    lines_in_order(result, f"heaptype: saved the figures of 1 run to the baseline {project.path}/ci/heap-baseline.json")


def test_a_missing_baseline_is_a_usage_error(pytester):
    result = run(pytester, "--heap-baseline=missing.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert (f"ERROR: --heap-baseline: {pytester.path / 'missing.json'}: no such baseline file "
            "(write it with --heap-save-baseline)") in result.stderr.lines


# --- where budget files come from ------------------------------------------------------------------------

def test_a_budget_file_named_on_the_command_line_is_collected(project):
    write_budget(project, '[[tests]]\nname = "named"\ncommand = ["build/workload", "small=1"]\n', "nightly.toml")
    write_budget(project, '[[tests]]\nname = "default"\ncommand = ["build/workload", "small=1"]\n')
    result = run(project, "--heap-budget", "nightly.toml", "--collect-only", "-q")
    assert [line for line in result.outlines if "::" in line] == ["nightly.toml::named"]
    everything = run(project, "--heap-budget", "--collect-only", "-q")
    assert [line for line in everything.outlines if "::" in line] == ["heap-budget.toml::default"]
    only = run(project, "--heap-budget-file=nightly.toml", "--collect-only", "-q")
    assert [line for line in only.outlines if "::" in line] == ["nightly.toml::named"]


def test_the_rootdir_budget_file_runs_whatever_testpaths_says(project):
    project.makeini("[pytest]\ntestpaths = tests\n")
    (project.path / "tests").mkdir()
    (project.path / "tests" / "test_unit.py").write_text("def test_unit():\n    pass\n")
    write_budget(project, '[[tests]]\nname = "root"\ncommand = ["build/workload", "small=1"]\n')
    result = run(project, "--heap-budget", "--collect-only", "-q")
    assert [line for line in result.outlines if "::" in line] == ["tests/test_unit.py::test_unit",
                                                                  "heap-budget.toml::root"]
    narrowed = run(project, "--heap-budget", "tests", "--collect-only", "-q")
    assert [line for line in narrowed.outlines if "::" in line] == ["tests/test_unit.py::test_unit"]


def test_budget_file_paths_are_relative_to_the_file_and_k_selects(project):
    sub = project.path / "ci"
    sub.mkdir()
    (sub / "bin").symlink_to(project.path / "build")
    write_budget(project, '[[tests]]\nname = "one"\ncommand = ["bin/workload", "small=1"]\n'
                          '[[tests]]\nname = "two"\ncommand = ["bin/workload", "small=2"]\n', "ci/budgets.toml")
    result = run(project, "--heap-budget-file=ci/budgets.toml", "-k", "two")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.re_match_lines([r"heaptype: budgets from \S+/ci/budgets\.toml$", r"ci/budgets\.toml::two\s+\(total\)"])


def test_pyproject_tool_heaptype_and_no_flag_no_items(project):
    write_budget(project, '[tool.heaptype.defaults]\nleaked = 0\n[[tool.heaptype.tests]]\nname = "leaks"\n'
                          'command = ["build/workload", "leak=1"]\n', "pyproject.toml")
    project.makepyfile(test_plain="def test_nothing():\n    pass\n")
    quiet = run(project, )
    quiet.assert_outcomes(passed=1)
    assert not any("heap budgets" in line for line in quiet.outlines)
    result = run(project, "--heap-budget")
    result.assert_outcomes(passed=1, failed=1)
    lines_in_order(result, "heap budget exceeded: pyproject.toml::leaks", "  Leaky: leaked 24 B > limit 0 B, over by 24 B",
                   "      limit set at pyproject.toml:2 [tool.heaptype.defaults] leaked")


def test_github_step_summary_gets_a_markdown_table(project, monkeypatch):
    summary = project.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    write_budget(project, '[[tests]]\nname = "small"\ncommand = ["build/workload", "small=1000"]\n'
                          '[tests.types."Small"]\npeak = "8 KiB"\n')
    run(project, "--heap-budget").assert_outcomes(failed=1)
    text = summary.read_text()
    assert text.startswith("earlier step\n## Heap budgets\n\n1 of 1 failed.\n\n"
                           "| test | type | peak live | allocated | allocations | leaked | limit | verdict |\n"
                           "|---|---|---:|---:|---:|---:|---|---|\n")
    assert "| heap-budget.toml::small | Small | 15.6 KiB | 15.6 KiB | 1,000 | 0 B | peak&lt;=8 KiB | OVER |\n" in text


# --- acceptance 2: baselines ------------------------------------------------------------------------------

BASELINE_BUDGETS = """
[[tests]]
name = "grows"
command = ["build/workload", "small={small}"]
[[tests]]
name = "same"
command = ["build/workload", "medium=1000"]
[[tests]]
name = "shrinks"
command = ["build/workload", "large={large}"]
"""


def test_baseline_round_trip_fails_growth_and_reports_improvement(project):
    write_budget(project, BASELINE_BUDGETS.format(small=1000, large=1000))
    saved = run(project, "--heap-budget", "--heap-baseline=heap-baseline.json", "--heap-save-baseline")
    saved.assert_outcomes(passed=3)
    path = project.path / "heap-baseline.json"
    lines_in_order(saved, f"heaptype: saved the figures of 3 runs to the baseline {path}")
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["fields"] == ["peak", "bytes", "allocations", "leaked"]
    assert sorted(data["tests"]) == ["heap-budget.toml::grows", "heap-budget.toml::same", "heap-budget.toml::shrinks"]
    assert data["tests"]["heap-budget.toml::grows"]["Small"] == [16000, 16000, 1000, 0]
    assert '      "Small": [16000, 16000, 1000, 0],' in path.read_text().splitlines()  # one line per type
    assert data["tests"]["heap-budget.toml::shrinks"]["Large"][0] == 64000

    write_budget(project, BASELINE_BUDGETS.format(small=1100, large=500))
    result = run(project, "--heap-budget", "--heap-baseline=heap-baseline.json", "--heap-compare-fail=peak:5%")
    result.assert_outcomes(passed=2, failed=1)
    lines_in_order(
        result,
        f"heap regression against the baseline {path}: heap-budget.toml::grows",
        "  Small: peak live 17.2 KiB (17,600 B) vs baseline 15.6 KiB (16,000 B): +1.56 KiB (+10.0%), > threshold 5% "
        "(--heap-compare-fail=peak:5%)",
    )
    out = result.stdout.str()
    assert "REGRESSED heap-budget.toml::grows: Small: peak live 17.2 KiB (17,600 B) vs baseline 15.6 KiB (16,000 B)" in out
    assert ("IMPROVED  heap-budget.toml::shrinks: Large: peak live 31.2 KiB (32,000 B) vs baseline 62.5 KiB (64,000 B): "
            "-31.2 KiB (-50.0%), beyond threshold 5% (--heap-compare-fail=peak:5%)") in out
    assert "IMPROVED  heap-budget.toml::shrinks: Large: allocations 500 vs baseline 1,000: -500 (-50.0%)" in out
    assert not re.search(r"heap-budget\.toml::same: Medium", out)
    assert not re.search(r"REGRESSED heap-budget\.toml::(same|shrinks)", out)
    assert re.search(r"heap-budget\.toml::grows\s+Small\s+17\.2 KiB.*REGRESSED$", out, re.M)
    # saving again replaces the figures: the same workload then compares clean
    run(project, "--heap-budget", "--heap-baseline=heap-baseline.json", "--heap-save-baseline")
    clean = run(project, "--heap-budget", "--heap-baseline=heap-baseline.json", "--heap-compare-fail=peak:5%")
    clean.assert_outcomes(passed=3)
    lines_in_order(clean, "no change")


def test_per_test_regression_thresholds_beat_the_command_line(project):
    write_budget(project, BASELINE_BUDGETS.format(small=1000, large=1000))
    run(project, "--heap-budget", "--heap-baseline=b.json", "--heap-save-baseline").assert_outcomes(passed=3)
    write_budget(project, BASELINE_BUDGETS.format(small=1100, large=1000).replace(
        'command = ["build/workload", "small=1100"]', 'command = ["build/workload", "small=1100"]\n'
                                                      'regression = { peak = "20%" }'))
    result = run(project, "--heap-budget", "--heap-baseline=b.json", "--heap-compare-fail=peak:5%")
    result.assert_outcomes(passed=3)
    assert ("GREW      heap-budget.toml::grows: Small: peak live 17.2 KiB (17,600 B) vs baseline 15.6 KiB (16,000 B): "
            "+1.56 KiB (+10.0%), <= threshold 20% (heap-budget.toml:4 [tests.regression] peak)") in result.stdout.str()


# --- acceptance 3: pytest -n 2 gives the same verdicts and summary ----------------------------------------

XDIST_BUDGETS = """
[defaults]
leaked = 0
""" + "".join(f"""
[[tests]]
name = "t{i}"
command = ["build/workload", "small={100 * i}", "{'leak=1' if i % 3 == 0 else 'medium=5'}"]
[tests.types."Small"]
peak = "8 KiB"
""" for i in range(1, 9))


def split_pages(properties: dict[str, dict[str, str]]) -> tuple[dict, dict]:
    """JUnit properties without the failure pages' paths, and those paths by test."""
    figures = {case: {k: v for k, v in p.items() if k != "heaptype.page"} for case, p in properties.items()}
    return figures, {case: p["heaptype.page"] for case, p in properties.items() if "heaptype.page" in p}


def test_xdist_gives_the_same_verdicts_summary_and_baseline(project):
    pytest.importorskip("xdist")
    write_budget(project, XDIST_BUDGETS)
    runs = {}
    for workers in ("0", "2"):
        result = run(project, "-n", workers, "--heap-budget", f"--heap-baseline=base-{workers}.json",
                                   "--heap-save-baseline", "--junitxml", f"junit-{workers}.xml")
        runs[workers] = result
    assert runs["0"].parseoutcomes() == runs["2"].parseoutcomes()
    runs["0"].assert_outcomes(passed=4, failed=4)
    assert summary_section(runs["0"]) == summary_section(runs["2"])
    assert summary_section(runs["0"])[-1] == ("8 measured, 4 failed: heap-budget.toml::t3, heap-budget.toml::t6, "
                                              "heap-budget.toml::t7, heap-budget.toml::t8")
    assert (project.path / "base-0.json").read_text() == (project.path / "base-2.json").read_text()
    # the same figures; the failing tests' pages differ only by their profiles' names (the pid)
    figures, pages = zip(*(split_pages(junit_properties(project.path / f"junit-{w}.xml")) for w in ("0", "2")))
    assert figures[0] == figures[1]
    assert pages[0].keys() == pages[1].keys() == {"t3", "t6", "t7", "t8"}
    failed = lambda result: sorted(line.split()[1] for line in result.outlines if line.startswith("FAILED "))
    assert failed(runs["0"]) == failed(runs["2"])
    # comparing under xdist works too: the same workload, no regression
    compared = run(project, "-n", "2", "--heap-budget", "--heap-baseline=base-0.json",
                                 "--heap-compare-fail=peak:0%")
    compared.assert_outcomes(passed=4, failed=4)
    lines_in_order(compared, "no change")


# --- issue 16: output that scales, pytest-memray's asks, native code in this process ----------------------

MANY_BUDGETS = "".join(f"""
[[tests]]
name = "t{i:02d}"
command = ["build/workload", "small={10 * (i + 1)}"{', "leak=1"' if i == 7 else ''}]
[tests.types."Small"]
peak = "1 KiB"
""" for i in range(12)) + "[defaults]\nleaked = 0\n"


def test_the_summary_shows_failures_and_the_closest_rows_and_the_report_files_everything(project):
    write_budget(project, MANY_BUDGETS.replace("[defaults]\nleaked = 0\n", "").replace(
        "[[tests]]", "[defaults]\nleaked = 0\n\n[[tests]]", 1))
    result = run(project, "--heap-budget", "--heap-summary-rows=4", "--heap-report=out/report.md",
                 "--heap-json=out/results.json")
    result.assert_outcomes(passed=6, failed=6)  # Small above 1 KiB from t06 (1,120 B) on; t07 leaks too
    table = summary_section(result)
    rows = [line.split()[:2] for line in table[3:-1]]
    # the 4 rows: failing rows first (t06 ... in test order, cut at 4)
    assert rows == [["heap-budget.toml::t06", "Small"], ["heap-budget.toml::t07", "Leaky"],
                    ["heap-budget.toml::t07", "Small"], ["heap-budget.toml::t08", "Small"]]
    assert table[-1].startswith("12 measured, 6 failed: heap-budget.toml::t06, heap-budget.toml::t07")
    report = project.path / "out" / "report.md"
    lines_in_order(result, f"(4 of 25 rows shown: the failing rows, then those closest to their limits; every row: "
                           f"{report}, {project.path / 'out' / 'results.json'})")
    markdown = report.read_text()
    assert markdown.startswith("## Heap budgets\n\n6 of 12 failed.\n\n| test | type | peak live | allocated |")
    assert markdown.count("| heap-budget.toml::t") == 25  # every row: 12 totals, 12 Small, t07's Leaky
    assert "#### `heap-budget.toml::t07`" in markdown and "  Leaky: leaked 24 B > limit 0 B, over by 24 B" in markdown
    data = json.loads((project.path / "out" / "results.json").read_text())
    assert data["format"] == "heaptype-budget-results" and len(data["tests"]) == 12
    t00 = next(t for t in data["tests"] if t["test"] == "heap-budget.toml::t00")
    assert t00["passed"] and t00["figures"]["Small"] == {"peak": 160, "bytes": 160, "allocations": 10, "leaked": 0}
    assert t00["failure"] is None and "Leaky: leaked 24 B" in next(
        t["failure"] for t in data["tests"] if t["test"] == "heap-budget.toml::t07")


def test_when_rows_are_few_the_summary_shows_them_all(project):
    write_budget(project, MANY_BUDGETS)
    result = run(project, "--heap-budget", "-k", "t00 or t01")
    assert [line.split()[:2] for line in summary_section(result)[3:-1]] == [
        ["heap-budget.toml::t00", "(total)"], ["heap-budget.toml::t00", "Small"],
        ["heap-budget.toml::t01", "(total)"], ["heap-budget.toml::t01", "Small"]]
    result.stdout.no_fnmatch_line("*rows shown*")


def test_a_default_peak_and_a_leak_check_from_the_command_line(project):
    write_budget(project, """
[[tests]]
name = "big"
command = ["build/workload", "malloc=300"]
[[tests]]
name = "own_limit"
command = ["build/workload", "malloc=300"]
[tests.types."(total)"]
peak = "1 MiB"
[[tests]]
name = "leaks"
command = ["build/workload", "leak=2"]
[[tests]]
name = "may_leak"
command = ["build/workload", "leak=2"]
[tests.types."Leaky"]
leaked = "1 KiB"
""")
    run(project, "--heap-budget").assert_outcomes(passed=4)
    result = run(project, "--heap-budget", "--heap-default-peak=256KiB", "--heap-leaks")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.re_match_lines([r"heap budget exceeded: heap-budget\.toml::big$",
                                  r"  \(total\): peak live \d+ KiB \([\d,]+ B\) > limit 256 KiB \(262,144 B\), over by ",
                                  r"      limit set at --heap-default-peak=256KiB$",
                                  r"heap budget exceeded: heap-budget\.toml::leaks$",
                                  r"  Leaky: leaked 48 B > limit 0 B, over by 48 B$",
                                  r"      limit set at --heap-leaks$"])
    assert run(project, "--heap-budget", "--heap-default-peak=lots").ret == pytest.ExitCode.USAGE_ERROR


NATIVE_TESTS = """
import ctypes
import pytest

lib = ctypes.CDLL({library!r})


@pytest.mark.heap_budget("Token", peak="2 KiB", allocations=100)
def test_within():
    assert lib.make_tokens(50) == 50


@pytest.mark.heap_budget("Token", peak="2 KiB")
def test_over():
    lib.make_tokens(100)


@pytest.mark.heap_budget(leaked=0)
def test_leaks():
    lib.leak(3)


def test_unmarked():
    lib.leak(1)
"""


@pytest.mark.parametrize("how", ["preloaded", "ctypes"])
def test_markers_budget_native_code_called_in_this_process(pytester, budget_programs, monkeypatch, how):
    """The runtime in the Python process: LD_PRELOAD of libheaptype.so, or only the
    ctypes-loaded library that links it. Each marked test is recorded on its own."""
    from heaptype.capture import flags

    library = budget_programs.native_library()
    pytester.makepyfile(test_native=NATIVE_TESTS.format(library=str(library)))
    if how == "preloaded":
        monkeypatch.setenv("LD_PRELOAD", str(flags.lib_dir() / "libheaptype.so"))
    monkeypatch.setenv("HEAPTYPE_OUTPUT", str(pytester.path / "pytest.%p.htp"))
    result = pytester.runpytest_subprocess(*UNRELATED_PLUGINS, "-p", "no:xdist")
    result.assert_outcomes(passed=2, failed=2)
    lines_in_order(result,
                   "heap budget exceeded: test_native.py::test_over",
                   "  Token: peak live 3.12 KiB (3,200 B) > limit 2 KiB (2,048 B), over by 1.12 KiB (1,152 B) (+56.2%)",
                   "      limit set at test_native.py::test_over: heap_budget marker types.Token.peak",
                   "heap budget exceeded: test_native.py::test_leaks",
                   "  Leaked: leaked 48 B > limit 0 B, over by 48 B")
    result.stdout.re_match_lines([r"test_native\.py::test_within\s+Token\s+1\.56 KiB\s+1\.56 KiB\s+50\s+0 B\s+"
                                  r"peak<=2 KiB, allocations<=100\s+ok$"])
    # Once each: under CI pytest's short summary repeats each failure's whole text.
    pages = [Path(line.split(": ", 1)[1])
             for line in dict.fromkeys(line for line in result.outlines if line.startswith("  HTML report: "))]
    assert [page.name for page in pages] == ["test.html"] * 2 and all(page.with_suffix(".htp").exists() for page in pages)
    if how == "preloaded":  # glibc's no-op call hooks come first in the global scope of a ctypes-only load
        # the walk steps over the interpreter's and libffi's frames by their rules: from
        # Python's entry down to leak()
        path = leak_path(result.outlines, "        1. 48 B leaked: ")
        assert path[0] == "Py_BytesMain" and path[-1] == "leak" and "ffi_call" in path, path
    # --heap-leaks checks every test, marked or not
    leaks = pytester.runpytest_subprocess(*UNRELATED_PLUGINS, "-p", "no:xdist", "--heap-leaks", "-k", "unmarked")
    leaks.assert_outcomes(failed=1)
    lines_in_order(leaks, "  Leaked: leaked 16 B > limit 0 B, over by 16 B", "      limit set at --heap-leaks")


def leak_path(lines: list[str], head: str) -> list[str]:
    """The call path a failure report prints after `head`, joined from its wrapped lines."""
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    text = lines[start][len(head):]
    for line in lines[start + 1:]:
        if not line.lstrip().startswith("> "):
            break
        text += " " + line.strip()
    return [frame.strip() for frame in text.split(" > ")]


def test_without_the_runtime_a_marker_without_the_fixture_says_how_to_load_it(pytester):
    pytester.makepyfile(test_native="""
import pytest

@pytest.mark.heap_budget("Token", peak="2 KiB")
def test_calls_native_code():
    pass
""")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    assert "or load the HeapType runtime into this Python process to budget native code it calls through ctypes " \
           "or pybind11 (LD_PRELOAD=$(heaptype --lib-dir)/libheaptype.so python -m pytest ...)" in result.stdout.str()


# --- the example project --------------------------------------------------------------------------------------

def test_the_example_project_passes_its_own_budgets(pytester, budget_programs):
    from tooling import require_tool

    cmake = require_tool("cmake")
    require_tool("ctest")
    build = budget_programs.example_build(cmake)
    for name in ("heap-budget.toml",):
        (pytester.path / name).write_text((EXAMPLE / name).read_text())
    (pytester.path / "build").symlink_to(build)
    result = run(pytester, "--heap-budget", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 3 and "failed" not in outcomes and "error" not in outcomes, \
        result.stdout.str()


def test_budget_runs_count_per_call_site_and_record_events_only_for_what_counts_cannot_judge(project):
    """The first run of a budget test is aggregated (HEAPTYPE_MODE=aggregate): a typed
    row's peak, allocations, bytes and leaks are exact in it. A peak limit on the untyped
    row (whose own peak an aggregated run does not keep) makes a run that records events,
    and its figures are the verdict's."""
    write_budget(project, """
[[tests]]
name = "typed"
command = ["build/workload", "small=1000", "leak=3"]
[tests.types."Small"]
peak = "64 KiB"
allocations = 1000
[tests.types."Leaky"]
leaked = "72 B"

[[tests]]
name = "untyped"
command = ["build/workload", "malloc=1000"]
[tests.types."(untyped)"]
peak = "2 MiB"
""")
    result = run(project, "--heap-budget", "--heap-profile-dir=profiles", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    runs = {d.name.split("-")[0] + ("-events" if d.name.endswith("-events") else ""): d
            for d in (project.path / "profiles").iterdir() if d.is_dir()}
    assert set(runs) == {"typed", "untyped", "untyped-events"}
    loaded = {name: heaptype.load(next(d.glob("*.htp"))) for name, d in runs.items()}
    assert loaded["typed"].aggregated and loaded["untyped"].aggregated and not loaded["untyped-events"].aggregated
    properties = junit_properties(project.path / "junit.xml")
    assert {k: v for k, v in properties["typed"].items() if k.endswith("[Small]")} == {
        "heaptype.peak[Small]": "16000", "heaptype.bytes[Small]": "16000",
        "heaptype.allocations[Small]": "1000", "heaptype.leaked[Small]": "0"}
    assert properties["typed"]["heaptype.leaked[Leaky]"] == "72"
    peak = int(properties["untyped"]["heaptype.peak[(untyped)]"])
    assert peak == loaded["untyped-events"].type_row(None).peak_bytes
