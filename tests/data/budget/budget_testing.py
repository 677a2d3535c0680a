"""Native programs for the budget tests, built once per test session.

test_budget_check.py, test_pytest_plugin.py, test_shards.py and
tests/integration/test_gtest_suite.py import this module (it sits beside the data it
builds; comparable_results is their one way to compare --heap-json files). Programs are built the two ways users build them: with
`heaptype --cflags/--ldflags` (workload), without HeapType at all (workload_plain: it
writes no profile), and as a CMake project with find_package(HeapType) and CTest tests
(ctest_project). Under pytest-xdist the workers share one build directory and build
each program once between them (an flock per program).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tooling import run_once

DATA = Path(__file__).resolve().parent
WORKLOAD_SOURCE = DATA / "workload.cpp"
NATIVE_CALLS_SOURCE = DATA / "native_calls.cpp"
CTEST_PROJECT = DATA / "ctest_project"
EXAMPLE = DATA.parents[2] / "examples" / "pytest-budget"


class BuildError(Exception):
    pass


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=cwd)
    if done.returncode != 0:
        raise BuildError(f"{what} failed (exit {done.returncode}):\n$ {' '.join(map(str, command))}\n"
                         f"{done.stdout[-3000:]}{done.stderr[-6000:]}")


class NativePrograms:
    """Builds start at once on a small thread pool; each accessor waits for its own."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._builds: dict[str, Future] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _get(self, name: str, build) -> Path:
        if name not in self._builds:
            self._builds[name] = self._pool.submit(self._locked, name, build)
        error = self._builds[name].exception()
        if error is not None:
            pytest.fail(str(error), pytrace=False)
        return self._builds[name].result()

    def start(self, *names: str) -> None:
        builders = {"workload": self._workload, "workload_plain": self._plain}
        for name in names:
            if name not in self._builds and name in builders:
                self._builds[name] = self._pool.submit(self._locked, name, builders[name])

    def _locked(self, name: str, build) -> Path:
        target = self.workdir / name
        run_once(self.workdir / f"{name}.built", lambda: build(target))
        return target

    # -- the programs --

    def workload(self) -> Path:
        """tests/data/budget/workload.cpp built with `heaptype --cflags/--ldflags`."""
        return self._get("workload", self._workload)

    def workload_plain(self) -> Path:
        """The same program built without HeapType: it runs, and writes no profile."""
        return self._get("workload_plain", self._plain)

    def native_library(self) -> Path:
        """native_calls.cpp as a shared library built with HeapType's flags, linking the
        shared runtime (what a ctypes or pybind11 extension built with HeapType is)."""
        return self._get("libnative_calls.so", self._native_library)

    def ctest_build(self, cmake: str) -> Path:
        """The configured and built ctest_project (its build tree)."""
        return self._get("ctest_project", lambda target: self._cmake(cmake, CTEST_PROJECT, target))

    def example_build(self, cmake: str) -> Path:
        """examples/pytest-budget built as its README says (its build tree)."""
        return self._get("example", lambda target: self._cmake(cmake, EXAMPLE, target))

    def _workload(self, target: Path) -> None:
        from heaptype.capture import flags

        _run(["g++", "-std=c++17", "-O2", *flags.compile_flags(), str(WORKLOAD_SOURCE), *flags.link_flags(),
              "-o", str(target)], "building workload.cpp with HeapType")

    def _native_library(self, target: Path) -> None:
        from heaptype.capture import flags

        _run(["g++", "-std=c++17", "-O2", "-fPIC", "-shared", *flags.compile_flags(), str(NATIVE_CALLS_SOURCE),
              *flags.link_flags(shared=True), "-o", str(target)], "building native_calls.cpp as a shared library")

    def _plain(self, target: Path) -> None:
        _run(["g++", "-std=c++17", "-O2", str(WORKLOAD_SOURCE), "-o", str(target)],
             "building workload.cpp without HeapType")

    def _cmake(self, cmake: str, source: Path, target: Path) -> None:
        from heaptype.capture import flags

        generator = ["-G", "Ninja"] if _which("ninja") else []
        _run([cmake, "-S", str(source), "-B", str(target), *generator, f"-DHeapType_DIR={flags.cmake_dir()}",
              "-DCMAKE_BUILD_TYPE=Release"], f"configuring {source.name}")
        _run([cmake, "--build", str(target)], f"building {source.name}")


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


@pytest.fixture(scope="session")
def budget_programs(tmp_path_factory) -> NativePrograms:
    """The budget tests' native programs (see NativePrograms), shared by xdist workers."""
    from tooling import require_tool

    require_tool("g++")
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "heaptype-budget-programs"
    workdir.mkdir(exist_ok=True)
    programs = NativePrograms(workdir)
    programs.start("workload", "workload_plain")
    yield programs
    programs.close()


def comparable_results(results: Path) -> dict:
    """A --heap-json file without what differs between two runs of the same programs:
    the profiles' and pages' file names (they hold the pid), and the close names of an
    unmatched pattern, a hint each process finds once, in the first test it evaluates
    (as under xdist: a shard's first test is another test)."""
    data = json.loads(results.read_text())
    for entry in data["tests"]:
        entry.pop("profile")
        entry.pop("page")
        for unmatched in entry["unmatched"]:
            unmatched.pop("close")
            unmatched.pop("typed_rows")
        if entry["failure"]:
            entry["failure"] = re.sub(r"\S+\.(htp|html)\b", "FILE", entry["failure"])
    return data
