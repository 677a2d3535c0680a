#!/usr/bin/env python3
"""`pytest --heap-budget -n 2` beside `ctest -j2` on a generated GoogleTest suite (issue 16).

    python bench/budget_bench.py                 # 1,000 tests, 3 rounds (~5 min with the builds)
    python bench/budget_bench.py --tests 200 --rounds 5 --json budget-bench.json

The suite comes from tests/data/budget/gtest_suite/generate.py (one binary, one CTest test
per case from gtest_discover_tests). It is built twice with CMake: plain, and with
heaptype_instrument(). Then, in interleaved rounds:

    ctest -j2                                  (the plain build: the bar)
    pytest --heap-budget -n 2                  (the instrumented build, [ctest] discovery)

The figure is the ratio of the medians (issue 16 asks for at most 3x). Then the budget
check's own cost per test is timed in this process, on the profiles of the last round:
loading a profile with the session's per-binary names, measuring it, judging it against
its budget and making its record, i.e. everything pytest-heaptype does per test besides
running the program. The machine's load average is printed before and after; a figure
taken on a busy machine (load average before the rounds above the core count / 2; the
rounds themselves keep every core busy) is flagged BUSY.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "tests" / "data" / "budget" / "gtest_suite" / "generate.py"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def generator():
    spec = importlib.util.spec_from_file_location("gtest_suite_generate", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def children_cpu() -> float:
    """User + system CPU seconds of every finished (waited-for) descendant of this process."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    """Runs a command to completion (output discarded unless it fails); its wall time."""
    return run_timed(command, cwd, env)[0]


def run_timed(command: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[float, float]:
    """Runs a command to completion: its wall time and the CPU time (user + system) of the
    whole process tree, which a busy machine distorts much less than wall time."""
    started, started_cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - started, children_cpu() - started_cpu
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(map(str, command))}\n{done.stdout[-3000:]}"
                 f"{done.stderr[-3000:]}")
    return elapsed, cpu


def build(source: Path, build_dir: Path, heaptype: bool, jobs: int) -> None:
    from heaptype.capture import flags

    generator_args = ["-G", "Ninja"] if shutil.which("ninja") else []
    run(["cmake", "-S", str(source), "-B", str(build_dir), *generator_args, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
         f"-DSUITE_HEAPTYPE={'ON' if heaptype else 'OFF'}", f"-DHeapType_DIR={flags.cmake_dir()}"])
    run(["cmake", "--build", str(build_dir), "-j", str(jobs)])


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def pytest_command(budget: Path, jobs: int, plain: Path) -> list[str]:
    # The plain build is the bench's, for ctest: a project's tree would not hold it.
    # Profiles go where the plugin puts them by default (pytest's temporary directory).
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", str(jobs),
            f"--heap-budget-file={budget}", "--heap-summary=no", f"--ignore={plain}",
            "-p", "no:randomly", "-p", "no:benchmark", "-p", "no:hypothesispytest"]


def pytest_environment(temp_root: Path) -> dict[str, str]:
    """A developer's environment: Python caches bytecode (a shell that turns that off
    makes pytest rewrite its plugins' modules in every process), and pytest's temporary
    directories (the profiles; pytest keeps the last three sessions') go under the
    bench's work directory."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTEST_DEBUG_TEMPROOT"] = str(temp_root)
    return env


def last_session_profiles(temp_root: Path) -> Path:
    """The basetemp of the last pytest session under ``temp_root`` (pytest-current)."""
    current = sorted(temp_root.glob("pytest-of-*/pytest-current"))
    if not current:
        sys.exit(f"no pytest session in {temp_root}")
    return current[0].resolve()


def check_cost(budget_path: Path, profiles: Path, limit: int) -> dict:
    """The budget check's cost per test, without running anything: each of ``limit``
    profiles is loaded (with the session's per-binary names), measured, judged against
    its budget and made a record of, as the plugin does."""
    from heaptype import budget as hb
    from heaptype.budget.session import SessionNames
    from heaptype.pytest_plugin import limit_usage  # noqa: F401 - the plugin imports cleanly

    budgets = hb.load_budget_file(budget_path)
    paths = sorted(profiles.glob("**/heaptype-profiles/*/*.htp"))[:limit]
    if not paths:
        sys.exit(f"no profiles in {profiles}")
    names = SessionNames()
    first = names.load(paths[0])
    hb.measure(first)  # the binary's symbol table is read here, once per session
    costs, cpu, hints = [], [], {}
    for path in paths:
        started, started_cpu = time.perf_counter(), time.process_time()
        profile = names.load(path)
        budget = budgets.budget_for(path.parent.name)
        figures = hb.measure_for_check(profile, budget, complete=profile.complete,
                                       top=max(hb.BASELINE_TOP, hb.MEASURED_LARGEST))
        evaluation = hb.evaluate(budget, figures, profile_path=str(path), complete=profile.complete, hints=hints)
        hb.kept_labels(evaluation.figures, set(evaluation.shown_labels(budget)))
        costs.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)  # less sensitive to a busy machine than wall time
    return {"profiles": len(paths), "median_ms": statistics.median(costs) * 1000,
            "median_cpu_ms": statistics.median(cpu) * 1000,
            "max_ms": max(costs) * 1000, "symbol_tables_read": names.binaries_read, "rows": len(evaluation.figures),
            "typed_rows": getattr(figures, "typed_rows", sum(k not in (hb.TOTAL, hb.UNTYPED) for k in figures))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="ctest -j and pytest -n (default 2)")
    parser.add_argument("--workdir", type=Path, help="keep the builds here (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="also write every measurement as JSON")
    options = parser.parse_args()
    cores = os.cpu_count() or 1
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="heaptype-budget-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "suite"
    gen = generator()
    gen.generate(source, options.tests, max(1, options.tests // 50), {}, set())
    log(f"building the {options.tests}-test suite in {workdir} (plain and with HeapType)")
    build(source, workdir / "plain", heaptype=False, jobs=options.jobs)
    build(source, workdir / "heaptype", heaptype=True, jobs=options.jobs)
    budget = gen.write_budget(workdir / "heap-budget.toml", workdir / "heaptype")
    temp_root = workdir.with_name(workdir.name + ".pytest-tmp")  # outside the project, as /tmp is
    temp_root.mkdir(exist_ok=True)

    before = load_average()
    ctest, pytest_runs, ctest_cpu, pytest_cpu, loads = [], [], [], [], []
    run(["ctest", "-j", str(options.jobs)], cwd=workdir / "plain")  # warm the page cache, untimed
    for n in range(options.rounds):
        wall, cpu = run_timed(["ctest", "-j", str(options.jobs)], cwd=workdir / "plain")
        ctest.append(wall)
        ctest_cpu.append(cpu)
        wall, cpu = run_timed(pytest_command(budget, options.jobs, workdir / "plain"), cwd=workdir,
                              env=pytest_environment(temp_root))
        pytest_runs.append(wall)
        pytest_cpu.append(cpu)
        loads.append(load_average()[0])
        log(f"round {n + 1}: ctest -j{options.jobs} {ctest[-1]:.2f} s ({ctest_cpu[-1]:.2f} s CPU), "
            f"pytest --heap-budget -n {options.jobs} {pytest_runs[-1]:.2f} s ({pytest_cpu[-1]:.2f} s CPU), "
            f"load average {loads[-1]:.2f}")
    cost = check_cost(budget, last_session_profiles(temp_root), limit=200)
    after = load_average()

    ratio = statistics.median(pytest_runs) / statistics.median(ctest)
    cpu_ratio = statistics.median(pytest_cpu) / statistics.median(ctest_cpu)
    busy = before[0] > cores / 2  # the rounds load every core themselves: only the load before counts
    per_test = 1000 / options.tests
    print(f"suite: {options.tests} GoogleTest cases, one binary; {options.rounds} interleaved rounds, medians")
    print(f"ctest -j{options.jobs} (plain build)          {statistics.median(ctest):7.2f} s wall "
          f"{statistics.median(ctest_cpu):7.2f} s CPU   ({statistics.median(ctest_cpu) * per_test:.1f} ms CPU per test)")
    print(f"pytest --heap-budget -n {options.jobs}          {statistics.median(pytest_runs):7.2f} s wall "
          f"{statistics.median(pytest_cpu):7.2f} s CPU   ({statistics.median(pytest_cpu) * per_test:.1f} ms CPU per test)")
    print(f"ratio, wall time                    {ratio:7.2f}x   (issue 16: at most 3x)")
    print(f"ratio, CPU time (user + sys)        {cpu_ratio:7.2f}x   (the wall ratio a quiet {options.jobs}-core "
          "machine would show, if both runs kept every core busy)")
    print(f"budget check per test (in process)  {cost['median_ms']:7.2f} ms median, {cost['max_ms']:.2f} ms max, "
          f"{cost['median_cpu_ms']:.2f} ms CPU median, "
          f"{cost['rows']} rows per profile handed over (of {cost['typed_rows']} typed rows, the untyped row and the "
          f"total), "
          f"symbol tables read: {cost['symbol_tables_read']}")
    print(f"load average before {before[0]:.2f}, after {after[0]:.2f}, after each round "
          f"{', '.join(f'{x:.2f}' for x in loads)} on {cores} cores"
          + ("   BUSY: re-run on a quiet machine" if busy else ""))
    if options.json:
        options.json.write_text(json.dumps({
            "tests": options.tests, "rounds": options.rounds, "jobs": options.jobs, "ctest_s": ctest,
            "pytest_s": pytest_runs, "ctest_cpu_s": ctest_cpu,
            "pytest_cpu_s": pytest_cpu, "ratio": ratio, "cpu_ratio": cpu_ratio, "round_loads": loads, "check": cost, "load_before": before, "load_after": after,
            "cores": cores, "busy": busy}, indent=2) + "\n")


if __name__ == "__main__":
    main()
