"""Shared helpers for the Python tests."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest


from tooling import require_tool, run_once  # noqa: F401  (require_tool re-exported for the tests here)


# --- C++ test programs (tests/cpp) -----------------------------------------------------
#
# Each program under tests/cpp is built once per test session, the way a user builds
# one: g++ -std=c++17 -O2 -g $(heaptype --cflags) prog.cpp $(heaptype --ldflags).
# The compile (-c) and the link are separate steps, so that a test can link the same
# object file differently (e.g. without the runtime). Builds run in parallel, on a
# thread pool as wide as the machine; under pytest-xdist the workers share one build
# directory and build each program once between them (an flock per program).

CPP_DIR = Path(__file__).resolve().parents[1] / "cpp"
CXX_STD = "-std=c++17"


class CppBuildError(Exception):
    pass


class CppPrograms:
    """Compiles tests/cpp/<name>.cpp on demand; ``start`` begins builds early."""

    def __init__(self, workdir: Path, cxx: str):
        from heaptype.capture import flags

        self.workdir = workdir
        self.cxx = cxx
        self._flags = flags
        self._pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self._builds: dict[tuple, Future] = {}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def compile_flags(self, stl_types: bool = True) -> list[str]:
        return self._flags.compile_flags(stl_types=stl_types)

    def link_flags(self) -> list[str]:
        return self._flags.link_flags()

    def start(self, name: str, *, stl_types: bool = True) -> None:
        key = (name, stl_types)
        if key not in self._builds:
            self._builds[key] = self._pool.submit(self._build, name, stl_types)

    def object_file(self, name: str, *, stl_types: bool = True) -> Path:
        """The compiled (unlinked) object of tests/cpp/<name>.cpp."""
        return self.program(name, stl_types=stl_types).with_suffix(".o")

    def program(self, name: str, *, stl_types: bool = True) -> Path:
        """The linked executable; fails the calling test if it does not build."""
        self.start(name, stl_types=stl_types)
        error = self._builds[(name, stl_types)].exception()
        if error is not None:
            pytest.fail(str(error), pytrace=False)
        return self._builds[(name, stl_types)].result()

    def _run(self, command: list[str], what: str) -> None:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise CppBuildError(f"{what} failed (exit {done.returncode}):\n$ {' '.join(command)}\n"
                                f"{done.stderr[-6000:]}")

    def _build(self, name: str, stl_types: bool) -> Path:
        stem = name if stl_types else f"{name}_nostl"
        exe = self.workdir / stem
        obj = exe.with_suffix(".o")
        source = CPP_DIR / f"{name}.cpp"

        def make() -> None:
            self._run([self.cxx, CXX_STD, "-O2", "-g", *self.compile_flags(stl_types), "-c", str(source),
                       "-o", str(obj)], f"compiling {source.name}")
            self._run([self.cxx, CXX_STD, "-O2", "-g", str(obj), *self.link_flags(), "-o", str(exe)],
                      f"linking {source.name}")

        run_once(exe.with_suffix(".built"), make)
        return exe


@pytest.fixture(scope="session")
def cpp_programs(tmp_path_factory):
    """Builds the C++ test programs of tests/cpp once per session (see CppPrograms)."""
    cxx = require_tool("g++")
    # Under xdist every worker has its own basetemp; their parent is shared.
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "heaptype-cpp"
    workdir.mkdir(exist_ok=True)
    programs = CppPrograms(workdir, cxx)
    yield programs
    programs.close()


def run_profiled(program: Path, output: Path, *args: str, env: dict | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs a test program with HEAPTYPE_OUTPUT=output and a clean HeapType environment."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    environment["HEAPTYPE_OUTPUT"] = str(output)
    environment.update(env or {})
    return subprocess.run([str(program), *args], capture_output=True, text=True, env=environment,
                          timeout=timeout)


def run_preloaded(program: Path, output: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """`heaptype run -o output -- program args...` (the runtime preloaded into a plain
    program) with a clean HeapType environment."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    return subprocess.run([sys.executable, "-m", "heaptype", "run", "-o", str(output), "--", str(program), *args],
                          capture_output=True, text=True, env=environment, timeout=timeout)


def profile_chunks(data: bytes):
    """(offset of the payload, kind, thread, size) of each chunk of a plain profile."""
    import struct

    offset = struct.unpack_from("<I", data, 12)[0]  # FileHeader::header_size
    while offset + 16 <= len(data):
        magic, kind, thread, size = struct.unpack_from("<IB3xII", data, offset)
        assert magic == 0x4B435448
        yield offset + 16, kind, thread, size
        offset += 16 + size
