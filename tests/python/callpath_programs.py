"""The call-path test programs, built and run once per test session.

test_callpaths.py, test_exports.py and test_functions.py share them through the
``callpath_programs`` fixture (import it into the test module). Programs:

* ``known``: tests/cpp/callpaths_known.cpp, built the default way (calling contexts
  from frame pointers);
* ``known-instrument``: the same with -finstrument-functions (and frame pointers, so
  that the walked-stack modes can run it too);
* ``infer``: tests/cpp/callpaths_infer.cpp, with the flags of
  ``compile_flags(stl_types=False)``: no typed allocator shim;
* ``alloc_bench``, ``alloc_bench-instrument``: the shared benchmark
  (../shared/bench/alloc_bench.cpp) built both ways, run with small counts
  (ALLOC_BENCH_ARGS).

All three compile in parallel at the first request. Under pytest-xdist the
workers share one directory and build and run each program once between them
(an flock and a marker file per step), and so do several test modules.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tooling import require_tool, run_once

REPO = Path(__file__).resolve().parents[2]
CPP_DIR = REPO / "tests" / "cpp"
ALLOC_BENCH = REPO.parent / "shared" / "bench" / "alloc_bench.cpp"
# objects, map nodes, vector rounds (each pushes 1,000,000), strings: small, so that
# a run takes ~0.1 s and phase 1's objects make most of the bytes
ALLOC_BENCH_ARGS = ("30000", "2000", "0", "1000")
DEFAULT = None  # the calling-context mode of compile_flags()' defaults


def _compile_flags(*, stl_types: bool, callstack: str | None) -> list[str]:
    from heaptype.capture import flags

    if callstack is None:
        return flags.compile_flags(stl_types=stl_types)
    return flags.compile_flags(stl_types=stl_types, callstack=callstack)


PROGRAMS = {
    # name: (source, extra compile flags, stl_types, calling-context mode)
    "known": (CPP_DIR / "callpaths_known.cpp", [], True, DEFAULT),
    "known-instrument": (CPP_DIR / "callpaths_known.cpp", ["-fno-omit-frame-pointer"], True, "instrument"),
    "infer": (CPP_DIR / "callpaths_infer.cpp", [], False, DEFAULT),
    "alloc_bench": (ALLOC_BENCH, [], True, DEFAULT),
    "alloc_bench-instrument": (ALLOC_BENCH, [], True, "instrument"),
    "lifetimes": (CPP_DIR / "lifetimes.cpp", ["-fno-omit-frame-pointer"], True, "instrument"),
    "deep": (CPP_DIR / "deep_recursion.cpp", ["-fno-omit-frame-pointer"], True, "instrument"),
    "deep-frame-pointer": (CPP_DIR / "deep_recursion.cpp", [], True, DEFAULT),
    "many_paths": (CPP_DIR / "many_paths.cpp", [], True, DEFAULT),
    "many_paths-instrument": (CPP_DIR / "many_paths.cpp", ["-fno-omit-frame-pointer"], True, "instrument"),
    "leaks_merged": (CPP_DIR / "leaks_merged.cpp", [], True, DEFAULT),
    "untracked_live": (CPP_DIR / "untracked_live.cpp", [], True, DEFAULT),
}


class CallpathPrograms:
    def __init__(self, workdir: Path, cxx: str):
        self.workdir = workdir
        self.cxx = cxx
        self._pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
        self._builds: dict[str, Future] = {name: self._pool.submit(self._build, name) for name in PROGRAMS}

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def program(self, name: str) -> Path:
        error = self._builds[name].exception()
        if error is not None:
            pytest.fail(str(error), pytrace=False)
        return self._builds[name].result()

    def _build(self, name: str) -> Path:
        source, extra, stl_types, callstack = PROGRAMS[name]
        if not source.exists():
            raise FileNotFoundError(f"{source} is missing (the shared benchmark lives beside the repository)")
        exe = self.workdir / name

        def make() -> None:
            from heaptype.capture import flags

            command = [self.cxx, "-std=c++17", "-O2", "-g", *_compile_flags(stl_types=stl_types, callstack=callstack), *extra,
                       str(source), *flags.link_flags(), "-o", str(exe)]
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"building {source.name} failed:\n$ {' '.join(command)}\n{done.stderr[-4000:]}")

        run_once(exe.with_suffix(".built"), make)
        return exe

    def profile_path(self, name: str, mode: str = "auto", args: tuple[str, ...] = (), addresses: bool = False) -> Path:
        """Runs the program once (per mode) with HEAPTYPE_CALLSTACK=mode (and
        HEAPTYPE_ADDRESSES=1 with ``addresses``); the profile path."""
        program = self.program(name)
        if name.startswith("alloc_bench") and not args:
            args = ALLOC_BENCH_ARGS
        output = self.workdir / (f"{name}.{mode}" + "".join(f".{a}" for a in args if not name.startswith("alloc_bench"))
                                 + (".addresses" if addresses else "") + ".htp")

        def make() -> None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
            env.update(HEAPTYPE_OUTPUT=str(output), HEAPTYPE_CALLSTACK=mode, HEAPTYPE_ADDRESSES="1" if addresses else "0")
            done = subprocess.run([str(program), *args], capture_output=True, text=True, env=env, timeout=120)
            if done.returncode != 0:
                pytest.fail(f"{program} {' '.join(args)} (HEAPTYPE_CALLSTACK={mode}) exited "
                            f"{done.returncode}: {done.stderr[-2000:]}", pytrace=False)
            output.with_suffix(".stderr").write_text(done.stderr)

        run_once(output.with_suffix(".ran"), make)
        return output

    def stderr(self, name: str, mode: str = "auto") -> str:
        return (self.workdir / f"{name}.{mode}.stderr").read_text()

    def load(self, name: str, mode: str = "auto", args: tuple[str, ...] = ()):
        import heaptype

        return heaptype.load(self.profile_path(name, mode, args))


@pytest.fixture(scope="session")
def callpath_programs(tmp_path_factory):
    cxx = require_tool("g++")
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "heaptype-callpaths"
    workdir.mkdir(exist_ok=True)
    # Symbol caches of this session stay in it (tests that study the cache use their own).
    os.environ.setdefault("HEAPTYPE_CACHE_DIR", str(workdir / "symbol-cache"))
    programs = CallpathPrograms(workdir, cxx)
    yield programs
    programs.close()
