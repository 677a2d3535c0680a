#!/usr/bin/env python3
"""Real programs, as installed, under `heaptype run` beside heaptrack.

The shared benchmark is a program written for the purpose; this one runs programs that
users profile and that nobody built for HeapType: a distribution's or a wheel's binaries,
built without frame pointers and without HeapType, so `heaptype run` preloads its shared
runtime (call paths by frame rules learned from the unwinder, types inferred or read from
thrown objects). Each case runs plain, under `heaptype run` and under heaptrack, interleaved
round by round; medians of the wall time, the peak RSS of the run's largest process (the
program's, or the profiler's own when that is larger: heaptrack's interpreter is), the
profile's size, and the allocation calls each profiler counted (heaptrack_print's "calls to
allocation functions"; HeapType's allocations), with the load average before and after:
figures taken on a busy machine are not figures.

Cases (each skipped, and named, when its program is missing):

  cmake-configure   cmake configuring a generated project of 20 C++ files (compiler checks:
                    the children run unprofiled, as they do by default)
  clang-compile     clang++ -O2 -c of the analysis core's largest source (src/core/analysis.cpp)
  gcc-compile       GCC's C++ compiler proper (cc1plus, as `g++ -O2 -c` runs it) on the same source
  doxygen-docs      doxygen documenting this repository's C++ sources (src/, with source
                    browsing) into HTML, two threads
  clang-tidy        clang-tidy's bugprone and performance checks on src/core/call_paths.cpp
                    (LLVM's libraries: StringMaps, ASTs, matchers)
  qpdf-qdf          qpdf rewriting a PDF as QDF (Debian's libtasn1 manual, if installed; its
                    objects parsed and written back: many small strings and maps)

  --program NAME=COMMAND
                    any other program, run in the current directory (a test binary built
                    elsewhere: --program 'perftest=build/bin/perftest --gtest_filter=...')
  --runtime NAME=PATH
                    also run each case with the shared runtime at PATH preloaded as
                    `heaptype run` preloads the package's (LD_PRELOAD, HEAPTYPE_OUTPUT, the
                    children unprofiled), as a tool of its own: two builds of the runtime
                    side by side in one interleaved run

Besides time, memory and counts, HeapType's row gives the share of allocations whose call
path starts where its thread started ("rooted": main on the main thread, the thread's own
first function on the others): a walk that stops early, or reads a wrong frame, roots its
path elsewhere. (Before the doxygen case it was the share under main alone, which a
program whose threads allocate puts low: doxygen's two workers made 67% of its
allocations.)

Usage:  python bench/real_programs.py [--rounds 5] [--cases cmake-configure,clang-compile,gcc-compile,doxygen-docs,...]
                                      [--program NAME=COMMAND]... [--runtime NAME=PATH]... [--json OUT]
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from footprint_bench import heaptrack_totals  # noqa: E402
from run_bench import RUNNER_SOURCE, BenchError, capture, clean_env, heaptrack_launcher  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cmake_project(work: str) -> str:
    """A CMake project of 20 small C++ files, configured from scratch each round."""
    source = os.path.join(work, "project")
    os.makedirs(source, exist_ok=True)
    files = []
    for i in range(20):
        name = f"part{i}.cpp"
        with open(os.path.join(source, name), "w") as out:
            out.write(f"#include <string>\nstd::string part{i}() {{ return \"{i}\"; }}\n")
        files.append(name)
    with open(os.path.join(source, "CMakeLists.txt"), "w") as out:
        out.write("cmake_minimum_required(VERSION 3.16)\nproject(real_programs CXX)\n"
                  "find_package(Threads)\ninclude(CheckIncludeFileCXX)\n"
                  "check_include_file_cxx(vector HAVE_VECTOR)\n"
                  f"add_library(parts STATIC {' '.join(files)})\n")
    return source


def cases(work: str) -> dict:
    """Each case: (command builder taking a fresh directory, what is missing or None)."""
    found = {}
    cmake = shutil.which("cmake")
    if cmake:
        # A wheel's cmake is a wrapper script: the binary it runs is what gets profiled.
        real = os.path.realpath(cmake)
        with open(real, "rb") as f:
            if f.read(2) == b"#!":
                try:
                    import cmake as cmake_wheel  # noqa: F401

                    real = os.path.join(cmake_wheel.CMAKE_BIN_DIR, "cmake")
                except ImportError:
                    real = None
        source = cmake_project(work)
        if real:
            found["cmake-configure"] = lambda d, real=real, source=source: [real, "-S", source, "-B", d, "-G",
                                                                            "Unix Makefiles"]
    clang = shutil.which("clang++")
    if clang:
        found["clang-compile"] = lambda d, clang=clang: [clang, "-std=c++17", "-O2", f"-I{REPO}/src", "-c",
                                                        os.path.join(REPO, "src/core/analysis.cpp"),
                                                        "-o", os.path.join(d, "analysis.o")]
    cc1plus = gcc_compiler_proper()
    if cc1plus:
        found["gcc-compile"] = lambda d, cc1plus=cc1plus: [*cc1plus, "-O2", "-std=c++17", f"-I{REPO}/src",
                                                          os.path.join(REPO, "src/core/analysis.cpp"),
                                                          "-o", os.path.join(d, "analysis.s")]
    doxygen = shutil.which("doxygen")
    if doxygen:
        found["doxygen-docs"] = lambda d, doxygen=doxygen: doxygen_command(doxygen, d)
    tidy = shutil.which("clang-tidy")
    if tidy:
        found["clang-tidy"] = lambda d, tidy=tidy: [tidy, "-checks=-*,bugprone-*,performance-*",
                                                    os.path.join(REPO, "src/core/call_paths.cpp"), "--",
                                                    "-std=c++17", f"-I{REPO}/src", f"-I{REPO}/src/include"]
    qpdf = shutil.which("qpdf")
    if qpdf and os.path.exists(QPDF_INPUT):
        found["qpdf-qdf"] = lambda d, qpdf=qpdf: [qpdf, "--deterministic-id", "--qdf", "--object-streams=disable",
                                                  QPDF_INPUT, os.path.join(d, "out.pdf")]
    return found


QPDF_INPUT = "/usr/share/doc/libtasn1-doc/libtasn1.pdf"  # libtasn1-doc: a 263 KB manual


DOXYFILE = """INPUT = {src}
RECURSIVE = YES
EXTRACT_ALL = YES
SOURCE_BROWSER = YES
GENERATE_LATEX = NO
HAVE_DOT = NO
HTML_TIMESTAMP = NO
NUM_PROC_THREADS = 2
QUIET = YES
WARNINGS = NO
OUTPUT_DIRECTORY = {out}
"""


def doxygen_command(doxygen: str, directory: str) -> list:
    """doxygen on this repository's sources, its configuration and output in `directory`:
    a C++ program of many allocations (3.1M for this job) and threads."""
    config = os.path.join(directory, "Doxyfile")
    with open(config, "w") as f:
        f.write(DOXYFILE.format(src=os.path.join(REPO, "src"), out=os.path.join(directory, "docs")))
    return [doxygen, config]


def gcc_compiler_proper() -> list | None:
    """cc1plus and the options g++'s driver gives it on its own (multiarch include
    directories): a program of GCC's C++, built without frame pointers, with deep
    recursion. None when g++ is not installed."""
    gxx = shutil.which("g++")
    if not gxx:
        return None
    found = subprocess.run([gxx, "-print-prog-name=cc1plus"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(found) or not os.access(found, os.X_OK):
        return None
    multiarch = subprocess.run([gxx, "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    return [found, "-quiet", "-D_GNU_SOURCE", *(["-imultiarch", multiarch] if multiarch else [])]


def given_programs(specs: list) -> dict:
    """--program NAME=COMMAND: each a case whose command does not depend on the round's
    directory, run where the benchmark was started."""
    found = {}
    for spec in specs:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            raise SystemExit(f"--program {spec!r}: expected NAME=COMMAND")
        found[name] = lambda d, argv=shlex.split(command): argv
    return found


def given_runtimes(specs: list) -> dict:
    """--runtime NAME=PATH: {name: absolute path of the shared runtime}."""
    runtimes = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        if not name or not path or name in ("plain", "heaptype", "heaptrack"):
            raise SystemExit(f"--runtime {spec!r}: expected NAME=PATH, NAME not plain, heaptype or heaptrack")
        if not os.path.isfile(path):
            raise SystemExit(f"--runtime {spec!r}: {path} is no file")
        runtimes[name] = os.path.abspath(path)
    return runtimes


def build_runner(work: str) -> str:
    """run_bench.py's measuring runner: a process forked from this one would report at
    least this Python process's peak RSS as its own (Linux keeps a process's peak across
    exec); forked from the small runner, it reports its own."""
    source = os.path.join(work, "runner.cpp")
    with open(source, "w") as f:
        f.write(RUNNER_SOURCE)
    runner = os.path.join(work, "runner")
    code, out = capture(["g++", "-O2", source, "-o", runner])
    if code != 0:
        raise SystemExit(f"could not build the measuring runner:\n{out[-2000:]}")
    return runner


def run_one(runner: str, tool: str, command: list, work: str, directory: str, runtimes: dict) -> dict:
    """One run of `command` plain, under `heaptype run`, under heaptrack or with one of
    `runtimes` (name: shared runtime) preloaded: wall seconds, the peak RSS of its largest
    process (KiB), the profile written (into `directory`)."""
    out = os.path.join(directory, "profile")
    os.makedirs(out)
    profile = os.path.join(out, "trace" if tool == "heaptrack" else "profile.htp")
    if tool in runtimes:
        # Through env(1), so that the measuring runner does not load the runtime too.
        wrapped = ["env", f"LD_PRELOAD={runtimes[tool]}", f"HEAPTYPE_OUTPUT={profile}",
                   "HEAPTYPE_CHILDREN=unprofiled", *command]
    else:
        wrapped = {"plain": command,
                   "heaptype": [sys.executable, "-m", "heaptype", "run", "-o", profile, "--", *command],
                   "heaptrack": [heaptrack_launcher(), "-o", profile, *command]}[tool]
    result = os.path.join(directory, "rusage")
    process = subprocess.run([runner, result, *wrapped], cwd=work, env=clean_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    # The runner's wait4 covers the process and the descendants it waited for: the peak is
    # the largest of them (the program, or the profiler's own process if that is larger).
    with open(result) as f:
        f.readline()  # the child's pid
        wall, _user, _sys, peak = f.readline().split()
    if process.returncode != 0:
        # A profiler that cannot run the program is a finding, not the end of the run
        # (heaptrack 1.4's interpreter throws std::bad_alloc on GCC's compile below).
        print(f"{tool} failed (exit {process.returncode}): {' '.join(wrapped)}", file=sys.stderr)
        return {"wall": float(wall), "rss_kib": int(peak), "files": [], "failed": process.returncode}
    written = [os.path.join(out, f) for f in os.listdir(out)]
    return {"wall": float(wall), "rss_kib": int(peak), "files": written}


def allocations(tool: str, files: list) -> int | None:
    if tool != "heaptrack" and tool != "plain":
        import heaptype

        return heaptype.load(files[0]).totals.allocations if files else None
    if tool == "heaptrack" and files:
        try:
            return heaptrack_totals(files[0])["allocations"]
        except BenchError:  # heaptrack_print missing or failing: no count, as for a missing trace
            return None
    return None


# Where the main thread's paths start before main: the loader running the libraries'
# static constructors (qpdf: 1.7% of its allocations, GnuTLS's and its own).
LOADER_ROOTS = ("call_init", "_dl_init")


def share_rooted(tool: str, files: list) -> float | None:
    """The share of HeapType's allocations whose call path starts where its thread
    started: at main (or the loader's static constructors) on the main thread, at the
    thread's own first function (the one most of its allocations start at) on the others,
    and on a main thread whose paths never start at main (a main that tail-calls, as
    clang-tidy's `return clangTidyMain(...)`: main is not on the stack)."""
    if tool in ("plain", "heaptrack") or not files:
        return None
    import heaptype

    profile = heaptype.load(files[0])
    total = rooted = 0
    for thread in profile.by_thread():
        roots = profile.filter(threads=[thread.thread]).call_tree().children
        counts = {child.name: child.total.allocations for child in roots}
        total += sum(counts.values())
        if thread.thread == 1 and "main" in counts:
            rooted += counts["main"] + sum(counts.get(name, 0) for name in LOADER_ROOTS)
        else:
            rooted += max(counts.values(), default=0)
    return rooted / total if total else None


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", help="comma-separated case names (default: all found)")
    parser.add_argument("--program", action="append", default=[], metavar="NAME=COMMAND",
                        help="also run this program (in the current directory), as a case of its own")
    parser.add_argument("--runtime", action="append", default=[], metavar="NAME=PATH",
                        help="also run each case with this shared runtime preloaded, as a tool of its own")
    parser.add_argument("--no-heaptrack", action="store_true", help="leave heaptrack out (its figures are known)")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    given = given_programs(args.program)
    runtimes = given_runtimes(args.runtime)
    invoked_in = os.getcwd()
    tools = ["plain", "heaptype", *runtimes] + (["heaptrack"] if shutil.which("heaptrack") and not args.no_heaptrack
                                                else [])
    if "heaptrack" not in tools and not args.no_heaptrack:
        print("heaptrack is not installed (apt-get install heaptrack): HeapType and plain only", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory(prefix="real-programs-") as work:
        found = cases(work) if args.cases or not given else {}
        found.update(given)
        wanted = args.cases.split(",") + list(given) if args.cases else list(found)
        for name in wanted:
            if name not in found:
                print(f"{name}: its program is not installed; skipped", file=sys.stderr)
        before = load_average()
        runner = build_runner(work)
        all_runs = {}
        for name in (n for n in wanted if n in found):
            runs = all_runs[name] = {tool: [] for tool in tools}
            for _ in range(args.rounds):
                for tool in tools:
                    directory = tempfile.mkdtemp(dir=work)
                    runs[tool].append(run_one(runner, tool, found[name](directory),
                                              invoked_in if name in given else work, directory, runtimes))
                    print(f"  {name} {tool}: {runs[tool][-1]['wall']:.2f} s", file=sys.stderr)
        after = load_average()
        for name, runs in all_runs.items():
            plain = statistics.median(r["wall"] for r in runs["plain"])
            for tool in tools:
                failed = [r["failed"] for r in runs[tool] if "failed" in r]
                if failed:
                    results.append({"case": name, "tool": tool, "failed": failed})
                    continue
                last = runs[tool][-1]
                wall = statistics.median(r["wall"] for r in runs[tool])
                rss = [r["rss_kib"] for r in runs[tool]]
                results.append({"case": name, "tool": tool, "wall_s": wall, "ratio": wall / plain,
                                "peak_rss_kib": statistics.median(rss),
                                "profile_bytes": sum(os.path.getsize(f) for f in last["files"]) or None,
                                "allocations": allocations(tool, last["files"]),
                                "rooted": share_rooted(tool, last["files"])})
    print(f"load average before: {before}; after: {after}; {args.rounds} rounds interleaved, medians")
    print(f"{'case':<16} {'tool':<10} {'wall':>8} {'x plain':>8} {'peak RSS':>10} {'profile':>10} {'allocations':>12}"
          f" {'rooted':>7}")
    for r in results:
        if "failed" in r:
            print(f"{r['case']:<16} {r['tool']:<10} failed in {len(r['failed'])} of {args.rounds} rounds "
                  f"(exit {', '.join(map(str, sorted(set(r['failed']))))})")
            continue
        rss = f"{r['peak_rss_kib'] / 1024:.1f} MiB" if r["peak_rss_kib"] else "-"
        size = f"{r['profile_bytes'] / 1e6:.2f} MB" if r["profile_bytes"] else "-"
        rooted = f"{r['rooted']:.2%}" if r["rooted"] is not None else "-"
        print(f"{r['case']:<16} {r['tool']:<10} {r['wall_s']:>7.2f}s {r['ratio']:>7.2f}x {rss:>10} {size:>10} "
              f"{r['allocations'] or '-':>12} {rooted:>7}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"load_before": before, "load_after": after, "rounds": args.rounds, "rows": results}, out,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
