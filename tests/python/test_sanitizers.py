"""The runtime and the truth programs under AddressSanitizer + UndefinedBehaviorSanitizer,
and the threaded programs under ThreadSanitizer: no report, and every per-type figure
the same as in the plain build (test_runtime_truth.py's tables).

Built with g++, whose sanitizer runtimes are shared libraries (libasan, libtsan) and so
leave the executable's replaced malloc and operator new in place, and ASan also with
clang++ -shared-libsan (Clang's static runtime defines them too, and Clang's ASan
poisons array cookies, which the runtime reads); the runtime then takes its blocks
from the sanitizer's allocator (src/runtime/sanitizer.hpp). Clang's TSan runtime
(Debian's clang 14) crashes at start with the runtime in the process: not tested.

- ASan + UBSan: the runtime is instrumented, except allocation_hooks.cpp (UBSan only):
  the sanitizer's own start-up calls malloc before its shadow memory exists.
- TSan: the programs are instrumented; the runtime is not, because TSan calls realloc
  in every new thread before that thread can run instrumented code
  (pthread_getattr_np in its thread start). The runtime's blocks are TSan's, so the
  programs' hand-offs through it (a block freed by another thread) are checked.

Leak checking is on for the programs that free everything, off for those that keep
blocks live at exit on purpose (that is what their "live at exit" figures count).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import heaptype
from conftest import CPP_DIR, CXX_STD, run_profiled
from heaptype.capture import flags
from test_runtime_truth import CONTAINERS, FIELDS, OBJECTS, THREADS
from test_strings import THROWN, check_thrown_program_ran, expected_thrown_rows, thrown_rows_of
from tooling import require_tool, run_once

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = sorted((ROOT / "src" / "runtime").glob("*.cpp"))
HOOKS = "allocation_hooks.cpp"
# As CMakeLists.txt builds the runtime (less -fno-instrument-functions, which clang++ lacks).
RUNTIME_FLAGS = [CXX_STD, "-O2", "-g", "-fPIC", "-fno-omit-frame-pointer",
                 "-fvisibility=hidden", "-fvisibility-inlines-hidden", f"-I{ROOT / 'src' / 'include'}",
                 "-DHEAPTYPE_SANITIZER=1"]
UBSAN = ["-fsanitize=undefined", "-fno-sanitize-recover=all"]
SANITIZERS = {
    # name: (compiler, program flags, runtime flags, flags of allocation_hooks.cpp)
    "asan": ("g++", ["-fsanitize=address", *UBSAN], ["-fsanitize=address", *UBSAN], UBSAN),
    "tsan": ("g++", ["-fsanitize=thread"], [], []),
    # Clang links its sanitizer runtime statically unless told: that one defines
    # operator new and malloc too, beside the runtime's.
    "clang-asan": ("clang++", ["-fsanitize=address", *UBSAN, "-shared-libsan"], ["-fsanitize=address", *UBSAN],
                   UBSAN),
}
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer",
           "ERROR: ThreadSanitizer")


class SanitizedBuild:
    def __init__(self, workdir: Path, sanitizer: str):
        compiler, self.program_flags, self.runtime_flags, self.hooks_flags = SANITIZERS[sanitizer]
        self.workdir, self.cxx, self.sanitizer = workdir, require_tool(compiler), sanitizer
        self.link_flags = []
        if "-shared-libsan" in self.program_flags:  # where clang's shared sanitizer runtimes are
            runtime_dir = subprocess.run([self.cxx, "--print-runtime-dir"], capture_output=True, text=True,
                                         timeout=60).stdout.strip()
            self.link_flags = [f"-Wl,-rpath,{runtime_dir}"]

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-4000:]}"

    def runtime(self) -> list[Path]:
        """The runtime's object files, built with the sanitizer (two at a time)."""
        objects = [self.workdir / f"{source.stem}.o" for source in RUNTIME]

        def compile_one(source: Path) -> None:
            extra = self.hooks_flags if source.name == HOOKS else self.runtime_flags
            self._run([self.cxx, *RUNTIME_FLAGS, *extra, "-c", str(source), "-o",
                       str(self.workdir / f"{source.stem}.o")])

        def make() -> None:
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(compile_one, RUNTIME))

        run_once(self.workdir / "runtime.built", make)
        return objects

    def program(self, name: str) -> Path:
        """tests/cpp/<name>.cpp, built as the truth tests build it, plus the sanitizer."""
        objects = self.runtime()
        exe = self.workdir / name

        def make() -> None:
            self._run([self.cxx, CXX_STD, "-O2", "-g", *self.program_flags, *flags.compile_flags(cxx=self.cxx),
                       str(CPP_DIR / f"{name}.cpp"), *map(str, objects), *flags.link_flags()[1:], *self.link_flags,
                       "-lzstd", "-o", str(exe)])  # the installed runtime carries its own zstd; these objects do not

        run_once(exe.with_suffix(".built"), make)
        return exe


def build_for(tmp_path_factory, sanitizer: str) -> SanitizedBuild:
    base = tmp_path_factory.getbasetemp()
    workdir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / f"heaptype-{sanitizer}"
    workdir.mkdir(exist_ok=True)
    return SanitizedBuild(workdir, sanitizer)


@pytest.fixture(scope="session", params=["asan", "clang-asan"])
def asan(request, tmp_path_factory) -> SanitizedBuild:
    return build_for(tmp_path_factory, request.param)


@pytest.fixture(scope="session")
def tsan(tmp_path_factory) -> SanitizedBuild:
    return build_for(tmp_path_factory, "tsan")


def run_clean(program: Path, output: Path, *args: str, leaks: bool = True, signal_unsafe: bool = True,
              timeout: float = 300, mode: str = "full") -> heaptype.Profile:
    """Runs a sanitized program: exit status 0, no sanitizer report; its profile."""
    run_sanitized(program, output, *args, leaks=leaks, signal_unsafe=signal_unsafe, timeout=timeout, mode=mode)
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    return profile


def run_sanitized(program: Path, output: Path, *args: str, leaks: bool = True, signal_unsafe: bool = True,
                  timeout: float = 300, mode: str = "full") -> subprocess.CompletedProcess:
    """Runs a sanitized program: exit status 0, no sanitizer report. `mode`: HEAPTYPE_MODE."""
    halt = "halt_on_error=1:exitcode=66"
    env = {
        "HEAPTYPE_MODE": mode,
        "ASAN_OPTIONS": f"{halt}:detect_leaks={int(leaks)}",
        "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
        "TSAN_OPTIONS": f"{halt}:report_signal_unsafe={int(signal_unsafe)}",
    }
    done = run_profiled(program, output, *args, env=env, timeout=timeout)
    report = done.stderr[-6000:]
    assert done.returncode == 0, f"{program.name} {' '.join(args)} exited {done.returncode}:\n{report}"
    assert not any(marker in done.stderr for marker in REPORTS), report
    return done


def typed_rows(profile: heaptype.Profile) -> dict:
    return {r.type: {field: getattr(r, field) for field in FIELDS} for r in profile.by_type() if r.type}


def threads_rows(profile: heaptype.Profile) -> dict:
    """As test_threads_exact_counts: peaks that depend on the interleaving are None."""
    return {name: {**row, "peak_bytes": None if THREADS.get(name, {}).get("peak_bytes") is None
                   else row["peak_bytes"]} for name, row in typed_rows(profile).items()}


# --- AddressSanitizer + UndefinedBehaviorSanitizer ---------------------------------------

def test_objects_under_asan_and_ubsan(asan, tmp_path):
    # objects.cpp keeps blocks live at exit on purpose: no leak check.
    profile = run_clean(asan.program("objects"), tmp_path / "objects.htp", leaks=False)
    assert typed_rows(profile) == {name: row for name, row in OBJECTS.items() if row is not None}


def test_containers_under_asan_and_ubsan(asan, tmp_path):
    profile = run_clean(asan.program("containers"), tmp_path / "containers.htp", leaks=False)
    assert typed_rows(profile) == {name: row for name, row in CONTAINERS.items() if row is not None}


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_threads_under_asan_and_ubsan_with_leak_check(asan, tmp_path, mode):
    # Kept blocks stay reachable from the program's globals: the leak check runs.
    profile = run_clean(asan.program("threads"), tmp_path / "threads.htp", mode=mode)
    assert threads_rows(profile) == THREADS


@pytest.mark.parametrize("scenario,expected", [
    (("throw", "6"), {"heaptype::constructor_threw": (6, 6, 96, 0)}),
    (("free-array", "4"), {"Counted": (4, 12, 4 * (8 + 3 * 8), 0)}),
])
# Not the signal scenarios: their handler allocates, and ASan's allocator is not
# async-signal-safe. A handler that interrupts its thread inside ASan's malloc or free
# (which takes ASan's locks far more often than glibc's per-thread cache does) waits on a
# lock its own thread holds: `hostile signal-free 300000` hung a CI run that way under
# clang's ASan. The runtime's side of a signal handler is tested without sanitizers
# (test_runtime_hostile.py) and under TSan, which delivers signals outside its allocator.
def test_hostile_programs_under_asan_and_ubsan(asan, tmp_path, scenario, expected):
    profile = run_clean(asan.program("hostile"), tmp_path / "hostile.htp", *scenario, leaks=False)
    rows = {name: profile.type_row(name) for name in expected}
    assert {name: (r.allocations, r.objects, r.bytes, r.live_blocks) for name, r in rows.items() if r} == expected


def test_thrown_objects_under_asan_and_ubsan(asan, tmp_path):
    """ASan intercepts __cxa_throw as well: the runtime's comes first (the executable's),
    types the thrown object and goes on to ASan's, which goes on to libstdc++'s (see
    test_strings.py::test_thrown_objects_are_typed_by_the_thrown_type)."""
    output = tmp_path / "thrown.htp"
    truth = check_thrown_program_ran(run_sanitized(asan.program("thrown_types"), output, str(THROWN)))
    expected = expected_thrown_rows(truth)
    assert thrown_rows_of(heaptype.load(output), expected) == expected


# --- ThreadSanitizer ----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_threads_under_tsan(tsan, tmp_path, mode):
    profile = run_clean(tsan.program("threads"), tmp_path / "threads.htp", mode=mode)
    assert threads_rows(profile) == THREADS


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_handoff_under_tsan(tsan, tmp_path, mode):
    # 8 producers, 8 consumers: every Parcel is freed by another thread than its own.
    profile = run_clean(tsan.program("handoff"), tmp_path / "handoff.htp", "8", "8", "20000", mode=mode)
    parcel = profile.type_row("Parcel")
    assert (parcel.allocations, parcel.bytes, parcel.live_blocks) == (160_000, 160_000 * 1000, 0)
    assert 1000 <= parcel.peak_bytes <= 48 * 1000


def test_phases_under_tsan(tsan, tmp_path):
    # The runtime's clock thread runs beside the program's sleeps.
    profile = run_clean(tsan.program("phases"), tmp_path / "phases.htp")
    assert {name: (r["allocations"], r["live_blocks"]) for name, r in typed_rows(profile).items()} == {
        "Alpha": (100, 0), "Beta": (50, 0), "Gamma": (20, 0)}


@pytest.mark.parametrize("scenario", ["signal", "signal-free"])
def test_signal_handler_under_tsan(tsan, tmp_path, scenario):
    # The handler allocates on purpose, which TSan calls signal-unsafe: that report
    # is off; any other (a race with the runtime's clock thread) is not.
    profile = run_clean(tsan.program("hostile"), tmp_path / "signal.htp", scenario, "300000",
                        signal_unsafe=False)
    main = profile.type_row("Main")
    assert (main.allocations, main.live_blocks) == (300_000, 0)


def test_call_paths_of_four_threads_under_tsan(tsan, tmp_path):
    # callpaths_known.cpp: four threads, each with its own type (and exception unwinding).
    profile = run_clean(tsan.program("callpaths_known"), tmp_path / "callpaths.htp")
    rows = typed_rows(profile)
    assert {name: rows[name]["allocations"] for name in ("ThreadA", "ThreadB", "ThreadC", "ThreadD")} == {
        "ThreadA": 10, "ThreadB": 20, "ThreadC": 30, "ThreadD": 40}
