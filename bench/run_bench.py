#!/usr/bin/env python3
"""HeapType side by side with other heap profilers on three allocation workloads.

For each workload (../shared/bench/alloc_bench.cpp, the call-heavy bench/dom_parser.cpp
and bench/live_blocks.cpp, which holds 3,000 live 64 KiB blocks) it builds the program
plain and with HeapType in three calling-context modes (none, frame pointers, the
default, and -finstrument-functions), then times, interleaved round by round, the plain
program, each HeapType build, heaptrack and (with --all) valgrind massif and gperftools'
heap profiler, each on the default arguments and on the empty run's arguments (a
tool's fixed start-up cost).

Everything is reported relative to the plain run of the same invocation: the absolute
times on these machines are noisy, the ratios taken in one run much less so. There are
no pass/fail thresholds.

Standard library only.  Usage:  python bench/run_bench.py [--rounds 5] [--all] [--json OUT]
"""

import argparse
import atexit
import datetime
import functools
import glob
import json
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.join(REPO, "..", "shared", "bench", "alloc_bench.cpp")

# name: (source, the empty run's arguments, what it stresses). Each workload prints its
# own truth on stderr: checksum, program_new_calls (the operator-new calls its own code
# issues, the divisor of ns/alloc) and VmHWM_kB; each runs on its default arguments.
WORKLOADS = {
    "alloc_bench": (DEFAULT_SOURCE, ["0", "0", "0", "0"],
                    "2.3M small blocks of three types, a map, vectors, strings (../shared/bench)"),
    "dom_parser": (os.path.join(BENCH_DIR, "dom_parser.cpp"), ["0", "0"],
                   "call-heavy: a DOM-style parser of small inline member functions, 2.6M allocations"),
    "live_blocks": (os.path.join(BENCH_DIR, "live_blocks.cpp"), ["0", "0"],
                    "3,000 live 64 KiB blocks (188 MiB), 200,000 of them replaced one by one"),
}
DEFAULT_ARGS = []

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"

# Which Debian package provides what, for the "missing tool" messages.
DEBIAN_PACKAGE = {
    "g++": "g++",
    "heaptrack": "heaptrack",
    "heaptrack_print": "heaptrack",
    "valgrind": "valgrind",
    "ms_print": "valgrind",
    "libtcmalloc.so.4": "libgoogle-perftools4",
    "zstd": "zstd",
}

# The runs are measured through this small program, not by wait4 from Python: on Linux a
# process's peak RSS survives exec, so a child spawned by this (tens of MiB) Python
# process would report at least Python's own peak as its ru_maxrss. Forked from a 1-2 MiB
# runner instead, the child's ru_maxrss is its own. The runner also takes the wall time
# from fork to wait4, without Python's spawn overhead.
RUNNER_SOURCE = r"""
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cstdio>
// usage: runner RESULT_FILE PROGRAM ARGS...   runs PROGRAM; writes its pid, then
// "wall_s user_s sys_s maxrss_kb" of it (and of the children it waited for) to RESULT_FILE
int main(int argc, char** argv) {
  if (argc < 3) return 125;
  std::FILE* out = std::fopen(argv[1], "we");
  if (!out) { std::perror(argv[1]); return 125; }
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  if (pid < 0) { std::perror("fork"); return 125; }
  if (pid == 0) { execvp(argv[2], argv + 2); std::perror(argv[2]); _exit(127); }
  std::fprintf(out, "%ld\n", (long)pid);  // first line: the child's pid
  std::fflush(out);
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) < 0) { std::perror("wait4"); return 125; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  std::fprintf(out, "%.9f %ld.%06ld %ld.%06ld %ld\n",
               (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9,
               (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
               (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, ru.ru_maxrss);
  std::fclose(out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
"""

WORKLOAD_RE = re.compile(r"checksum=(\d+) program_new_calls=(\d+) .*?VmHWM_kB=(-?\d+)")


class BenchError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def clean_env(**extra):
    """The caller's environment without anything that would change what a run profiles."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("HEAPTYPE_") or k in ("LD_PRELOAD", "HEAPPROFILE", "HEAPCHECK"))}
    env.update(extra)
    return env


def missing(tool, what="not found on PATH"):
    pkg = DEBIAN_PACKAGE.get(tool)
    hint = f"it comes with the Debian package {pkg} (apt-get install {pkg})" if pkg else ""
    return f"{tool}: {what}" + (f"; {hint}" if hint else "")


def require(prog):
    path = shutil.which(prog)
    if not path:
        raise BenchError(missing(prog))
    return path


@functools.lru_cache(maxsize=None)
def heaptrack_launcher():
    """heaptrack's script as the benchmarks run it: a copy beside a link to its libraries,
    without heaptrack_gui next to it. The installed script opens its data in heaptrack_gui
    when that is installed (CI installs it for the export's test): without a display the
    GUI aborts after ~0.14 s, which the script's wall time then counted against heaptrack.
    The copy finds its interpreter and preload library through the link, as the original
    finds them beside itself, and no GUI. Raises BenchError when heaptrack is missing."""
    script = os.path.realpath(require("heaptrack"))
    root = tempfile.mkdtemp(prefix="heaptrack-launcher-")
    atexit.register(shutil.rmtree, root, True)
    os.mkdir(os.path.join(root, "bin"))
    os.symlink(os.path.join(os.path.dirname(os.path.dirname(script)), "lib"), os.path.join(root, "lib"))
    launcher = os.path.join(root, "bin", "heaptrack")
    shutil.copy2(script, launcher)
    return launcher


def capture(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    return r.returncode, r.stdout


def first_line(cmd):
    try:
        return capture(cmd)[1].strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------
# one measured run

def run_measured(runner, cmd, env, out_path, err_path, timeout, after_kill=None):
    """Run cmd under the runner; return its wall time and rusage (waited-for children included)."""
    res_path = out_path + ".rusage"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([runner, res_path] + cmd, env=env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, start_new_session=True)
        timed_out = []
        timer = threading.Timer(timeout, lambda: (timed_out.append(1), _kill_group(p.pid)))
        timer.start()
        try:
            p.wait()
            outer = time.perf_counter() - t0
        finally:
            timer.cancel()
    if timed_out:
        if after_kill:
            try:
                with open(res_path) as f:
                    after_kill(int(f.readline()))
            except (OSError, ValueError):
                pass
        raise BenchError(f"killed after --timeout {timeout:g} s: {shlex.join(cmd)}")
    if p.returncode != 0:
        raise BenchError(f"command failed (exit {p.returncode}): {shlex.join(cmd)}\n"
                         f"{tail(err_path)}{tail(out_path)}")
    with open(res_path) as f:
        _pid, wall, user, sys_, maxrss = f.read().split()
    os.remove(res_path)
    # ru_maxrss (kB on Linux) of a wait4 result is the largest of the child and of the
    # descendants it waited for: the profiled process itself when the child *is* the
    # profiled process, the largest process of the tool otherwise (heaptrack's script).
    return {"wall_s": float(wall), "cpu_s": float(user) + float(sys_), "user_s": float(user),
            "sys_s": float(sys_), "maxrss_kb": int(maxrss), "wall_from_python_s": outer}


def _kill_group(pid):
    """SIGTERM first (heaptrack's script then removes its fifo), SIGKILL 5 s later."""
    for sig, delay in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 0)):
        try:
            os.killpg(pid, sig)
        except OSError:
            return
        time.sleep(delay)


def parse_workload(err_path):
    with open(err_path, errors="replace") as f:
        m = WORKLOAD_RE.search(f.read())
    if not m:
        raise BenchError(f"the workload did not print its summary line; stderr ends:\n{tail(err_path)}")
    return {"checksum": int(m.group(1)), "program_new_calls": int(m.group(2)),
            "vmhwm_kb": int(m.group(3))}


def timed(cmd, out_path, env=None):
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, env=env)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise BenchError(f"command failed (exit {r.returncode}): {shlex.join(cmd)}\n"
                         f"{r.stderr.decode(errors='replace')[-2000:]}")
    return wall


# ---------------------------------------------------------------------------------------
# the tools

class Tool:
    """One profiler: how to run it, where its output goes, how to analyse that output."""
    key = name = ""
    optional = False

    def __init__(self, ctx):
        self.ctx = ctx
        self.version = ""

    def check(self):
        """Return None when usable, else the reason it is not."""
        return None

    def command(self, args, out):
        raise NotImplementedError

    def env(self, out):
        return clean_env()

    def outputs(self, out):
        return []

    def analyse(self, files, scratch):
        """Time the tool's own analysis of a default-args output; return dict or None."""
        return None

    def profiled_rss_kb(self, meas, workload):
        return meas["maxrss_kb"]

    def after_kill(self, pid):
        """Clean up after a run killed by --timeout; pid is the command's process."""


class Plain(Tool):
    key, name = "plain", "plain (glibc)"

    def command(self, args, out):
        return [self.ctx.plain_bin] + args


class HeapType(Tool):
    """HeapType's default build: types and calling contexts from frame pointers."""
    key, name = "heaptype", "HeapType"

    def check(self):
        self.version = first_line([self.ctx.heaptype_cli, "--version"])
        self.name = f"HeapType {self.version.split()[-1]} default"

    def command(self, args, out):
        return [self.ctx.heaptype_bin] + args

    def env(self, out):
        return clean_env(HEAPTYPE_OUTPUT=out + ".htp")

    def outputs(self, out):
        return glob.glob(glob.escape(out) + ".htp*")

    def analyse(self, files, scratch):
        cmd = [self.ctx.heaptype_cli, "report", files[0], "--format", "json"]
        wall = timed(cmd, scratch)
        with open(scratch) as f:
            rep = json.load(f)
        t = rep.get("totals", {})
        return {"command": cmd, "wall_s": wall, "allocations": t.get("allocations"),
                "peak_bytes": t.get("peak_bytes"), "live_bytes": t.get("live_bytes"),
                "complete": rep.get("complete"), "warnings": rep.get("warnings", [])}


class HeapTypeTypesOnly(HeapType):
    """HeapType without calling contexts (heaptype --cflags --callstack none)."""
    key = "heaptype_types"

    def check(self):
        super().check()
        self.name = self.name.replace(" default", " types only")

    def command(self, args, out):
        return [self.ctx.heaptype_types_bin] + args


class HeapTypeInstrument(HeapType):
    """HeapType with calling contexts from -finstrument-functions (--callstack instrument)."""
    key = "heaptype_instrument"

    def check(self):
        super().check()
        self.name = self.name.replace(" default", " instrument")

    def command(self, args, out):
        return [self.ctx.heaptype_instrument_bin] + args


class Heaptrack(Tool):
    key, name = "heaptrack", "heaptrack"

    def check(self):
        self.exe = heaptrack_launcher()
        self.printer = require("heaptrack_print")
        self.version = first_line([self.exe, "--version"])
        self.name = self.version  # "heaptrack 1.4.0"

    def command(self, args, out):
        # heaptrack appends .zst (or .gz when zstd is not installed) to the -o name
        return [self.exe, "-o", out + ".heaptrack", self.ctx.plain_bin] + args

    def outputs(self, out):
        return glob.glob(glob.escape(out) + ".heaptrack.*")

    def after_kill(self, pid):
        # the script removes its fifo only on a normal exit
        for f in (f"/tmp/heaptrack_fifo{pid}", f"/tmp/heaptrack_fifo{pid}.lock"):
            if os.path.exists(f):
                os.remove(f)

    def profiled_rss_kb(self, meas, workload):
        # wait4 sees the heaptrack script, whose largest process is its interpreter;
        # the profiled program's own peak is the VmHWM it prints.
        return workload["vmhwm_kb"]

    def analyse(self, files, scratch):
        cmd = [self.printer, files[0]]
        wall = timed(cmd, scratch)
        with open(scratch, errors="replace") as f:
            text = f.read()
        calls = re.search(r"^calls to allocation functions: (\d+)", text, re.M)
        temp = re.search(r"^temporary memory allocations: (\d+)", text, re.M)
        peak = re.search(r"^peak heap memory consumption: (\S+)", text, re.M)
        leak = re.search(r"^total memory leaked: (\S+)", text, re.M)
        if not (calls and peak):
            raise BenchError(f"could not parse heaptrack_print's summary of {files[0]}")
        return {"command": cmd, "wall_s": wall, "allocations": int(calls.group(1)),
                "temporary_allocations": int(temp.group(1)) if temp else None,
                "peak_text": peak.group(1), "peak_bytes": si_bytes(peak.group(1)),
                "leaked_text": leak.group(1) if leak else None}


class Massif(Tool):
    key, name, optional = "massif", "valgrind massif", True

    def check(self):
        self.exe = shutil.which("valgrind")
        if not self.exe:
            return missing("valgrind")
        self.printer = shutil.which("ms_print")
        self.version = first_line([self.exe, "--version"])
        self.name = "valgrind massif " + self.version.replace("valgrind-", "")

    def command(self, args, out):
        return [self.exe, "--tool=massif", f"--massif-out-file={out}.massif",
                self.ctx.plain_bin] + args

    def outputs(self, out):
        return glob.glob(glob.escape(out) + ".massif")

    def analyse(self, files, scratch):
        with open(files[0]) as f:
            peak = max(int(x) for x in re.findall(r"mem_heap_B=(\d+)", f.read()))
        res = {"peak_bytes": peak}
        if self.printer:
            res["command"] = [self.printer, files[0]]
            res["wall_s"] = timed(res["command"], scratch)
        return res


class Gperftools(Tool):
    key, name, optional = "gperftools", "gperftools HEAPPROFILE", True

    def check(self):
        if not os.path.exists(TCMALLOC):
            return missing("libtcmalloc.so.4", f"{TCMALLOC} not found")
        try:
            r = capture(["dpkg-query", "-W", "-f", "${Version}", "libgoogle-perftools4"])
            if r[0] == 0 and r[1].strip():
                self.version = r[1].strip().split("-")[0]
                self.name = f"gperftools {self.version} HEAPPROFILE"
        except OSError:
            pass

    def command(self, args, out):
        return [self.ctx.plain_bin] + args

    def env(self, out):
        return clean_env(LD_PRELOAD=TCMALLOC, HEAPPROFILE=out + ".gperf")

    def outputs(self, out):
        return sorted(glob.glob(glob.escape(out) + ".gperf.*.heap"))


# ---------------------------------------------------------------------------------------
# helpers

def si_bytes(text):
    """heaptrack_print's sizes: '12.66M', '72.70K', '0B' (decimal units)."""
    m = re.fullmatch(r"([\d.]+)([KMGT]?)B?", text)
    if not m:
        return None
    return round(float(m.group(1)) * 1000 ** " KMGT".index(m.group(2) or " "))


def med(xs):
    return statistics.median(xs) if xs else None


def fmt_s(x):
    return "-" if x is None else (f"{x:.3f} s" if x < 10 else f"{x:.2f} s")


def fmt_mib(kb):
    return "-" if kb is None else f"{kb / 1024:.1f} MiB"


def fmt_size(n):
    if n is None:
        return "-"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.3g} {unit}" if n / div < 100 else f"{n / div:.0f} {unit}"
    return f"{n} B"


def rel_diff(a, b):
    if a is None or b in (None, 0):
        return None
    return (a - b) / b * 100.0


def table(headers, rows, right=()):
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    def line(cells):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


# ---------------------------------------------------------------------------------------
# the benchmark

class Context:
    pass


def build(ctx, cxx, cxx_name, workload, source, work):
    # Prefer the console script beside this interpreter: a pyenv shim on PATH adds ~0.1 s
    # of bash to every `heaptype report`.
    beside = os.path.join(os.path.dirname(sys.executable), "heaptype")
    ctx.heaptype_cli = beside if os.access(beside, os.X_OK) else shutil.which("heaptype")
    if not ctx.heaptype_cli:
        raise BenchError("heaptype: not found on PATH; install the package with `pip install .` "
                         "from the repository root")
    # build key -> the `heaptype --cflags` options of that build (None: plain)
    variants = {"plain": None, "heaptype": "", "heaptype_types": " --callstack none",
                "heaptype_instrument": " --callstack instrument"}
    flags = {}
    for opt in ["--ldflags"] + [f"--cflags{v}" for v in variants.values() if v is not None]:
        # The flags are on stdout; stderr says which capture mode was chosen.
        done = subprocess.run([ctx.heaptype_cli, *opt.split(), "--cxx", cxx], capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError(f"`heaptype {opt}` failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
        flags[opt] = shlex.split(done.stdout)
    ldflags = flags["--ldflags"]
    # The instrumentation flags alone, for the hook-cost builds.
    hook_flags = [f for f in flags["--cflags --callstack instrument"] if f.startswith("-finstrument-functions")]
    ctx.installed = [ctx.heaptype_cli] + [f for f in ldflags if f.endswith((".a", ".so"))]
    builds, shown = {}, {}
    for key, variant in variants.items():
        binary = os.path.join(work, f"{workload}_{key}")
        setattr(ctx, f"{key}_bin", binary)
        if variant is None:
            builds[key] = [cxx, "-O2", "-g", source, "-o", binary]
            shown[key] = f"{cxx_name} -O2 -g {shlex.quote(source)} -o {workload}_{key}"
        else:
            builds[key] = [cxx, "-O2", "-g"] + flags[f"--cflags{variant}"] + [source] + ldflags + ["-o", binary]
            shown[key] = (f"{cxx_name} -O2 -g $(heaptype --cflags{variant}) {shlex.quote(source)} "
                          f"$(heaptype --ldflags) -o {workload}_{key}")
    ctx.hook_flags, ctx.ldflags, ctx.cxx = hook_flags, ldflags, cxx
    ctx.flags = {"cflags": shlex.join(flags["--cflags"]), "ldflags": shlex.join(ldflags)}
    runner_src = os.path.join(work, "runner.cpp")
    with open(runner_src, "w") as f:
        f.write(RUNNER_SOURCE)
    ctx.runner = os.path.join(work, "runner")
    rc, out = capture([cxx, "-O2", runner_src, "-o", ctx.runner])
    if rc != 0:
        raise BenchError(f"could not build the measuring runner with {cxx}:\n{out[-3000:]}")
    info = {}
    for key, cmd in builds.items():
        log(f"build {key}: {shlex.join(cmd)}")
        t0 = time.perf_counter()
        rc, out = capture(cmd)
        if rc != 0:
            raise BenchError(f"build failed ({key}): {shlex.join(cmd)}\n{out[-3000:]}")
        info[key] = {"command": cmd, "shown": shown[key], "seconds": time.perf_counter() - t0,
                     "binary_bytes": os.path.getsize(cmd[-1])}
    return info


def cpu_account():
    """Machine-wide busy CPU time (/proc/stat) and this process tree's own CPU time."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)   # idle + iowait
    guest = sum(fields[8:10]) if len(fields) > 9 else 0        # already counted in user
    busy = (sum(fields) - idle - guest) / hz
    own = sum(getattr(resource.getrusage(w), f) for w in
              (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
    return {"busy_s": busy, "own_s": own, "t": time.monotonic()}


def other_cpu_usage(a, b):
    """CPU time spent by everything but this benchmark between two cpu_account() calls."""
    if not a or not b:
        return None
    wall = b["t"] - a["t"]
    other = max(0.0, (b["busy_s"] - a["busy_s"]) - (b["own_s"] - a["own_s"]))
    return {"cpu_s": other, "wall_s": wall, "cores_busy": other / wall if wall > 0 else None}


def describe_heaptype(ctx):
    """Which HeapType was measured: the version string says too little while it is developed."""
    lib = next((f for f in ctx.installed[1:]), None)
    built = None
    if lib and os.path.exists(lib):
        built = datetime.datetime.fromtimestamp(os.path.getmtime(lib)).astimezone()
    rc, head = capture(["git", "-C", REPO, "log", "-1", "--format=%h %s"])
    rc2, dirty = capture(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"])
    repo = head.strip() if rc == 0 else None
    if repo and rc2 == 0 and dirty.strip():
        repo += " (+ uncommitted changes)"
    cflags = ctx.flags["cflags"]
    parts = [first_line([ctx.heaptype_cli, "--version"])]
    if built:
        parts.append(f"runtime installed {built.strftime('%Y-%m-%d %H:%M')}")
    parts.append("call stacks (-finstrument-functions) on" if "-finstrument-functions" in cflags
                 else "no -finstrument-functions")
    if repo:
        parts.append(f"repo at {repo} (the installed package may differ)")
    return {"summary": "; ".join(parts), "runtime": lib,
            "runtime_mtime": built.isoformat(timespec="seconds") if built else None,
            "repo_head": repo, "cflags": cflags}


def fingerprint(paths):
    out = {}
    for f in paths:
        try:
            st = os.stat(f)
            out[f] = [st.st_size, st.st_mtime_ns]
        except OSError:
            out[f] = None
    return out


def raw_size(path):
    """Uncompressed size of heaptrack's trace, when its decompressor is installed."""
    tool = {"zst": "zstd", "gz": "gzip"}.get(path.rsplit(".", 1)[-1])
    if not tool or not shutil.which(tool):
        return None
    with subprocess.Popen([tool, "-dc", path], stdout=subprocess.PIPE) as p:
        n = 0
        while True:
            chunk = p.stdout.read(1 << 20)
            if not chunk:
                break
            n += len(chunk)
    return n if p.returncode == 0 else None


HOOK_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hook_cost.cpp")


def measure_hook_cost(ctx, work, runs=5):
    """ns per enter/exit pair: bench/hook_cost.cpp with glibc's empty hooks and with HeapType's."""
    binaries = {}
    for key, hooks, extra in (("none", [], []), ("empty", ctx.hook_flags, []),
                              ("heaptype", ctx.hook_flags, ctx.ldflags)):
        out = os.path.join(work, f"hook_cost_{key}")
        cmd = [ctx.cxx, "-O2", *hooks, HOOK_SOURCE, *extra, "-o", out]
        rc, text = capture(cmd)
        if rc != 0:
            raise BenchError(f"build failed (hook_cost {key}): {shlex.join(cmd)}\n{text[-3000:]}")
        binaries[key] = out
    best = {}
    for _ in range(runs):
        for key, binary in binaries.items():
            rc, text = capture([binary], env=clean_env(HEAPTYPE_OUTPUT=os.path.join(work, "hooks.htp")))
            if rc != 0:
                raise BenchError(f"hook_cost {key} failed:\n{text[-2000:]}")
            ns, pairs = re.search(r"([0-9.]+) ns per call \((\d+)", text).groups()
            best[key] = min(best.get(key, float("inf")), float(ns))
    return {"plain_call_ns": best["none"], "empty_ns": best["empty"], "heaptype_ns": best["heaptype"],
            "pairs": int(pairs), "runs": runs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=DEFAULT_SOURCE,
                    help="alloc_bench's source (default: <repo>/../shared/bench/alloc_bench.cpp)")
    ap.add_argument("--workload", action="append", choices=sorted(WORKLOADS),
                    help="run only this workload (repeatable; default: all three)")
    ap.add_argument("--cxx", default="g++", help="C++ compiler (default: g++)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds; medians are taken (default 5)")
    ap.add_argument("--all", action="store_true",
                    help="also valgrind massif and gperftools HEAPPROFILE (slow)")
    ap.add_argument("--json", metavar="OUT", help="write every measurement to OUT as JSON")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (binaries, last round's profiles)")
    ap.add_argument("--timeout", type=float, default=900.0,
                    help="seconds before a single run is killed (default 900)")
    opts = ap.parse_args(argv)
    try:
        return bench(opts)
    except BenchError as e:
        log(f"run_bench: error: {e}")
        return 2


def bench(opts):
    if opts.rounds < 1:
        raise BenchError("--rounds must be at least 1")
    cxx = shutil.which(opts.cxx)
    if not cxx:
        raise BenchError(missing(opts.cxx) if opts.cxx in DEBIAN_PACKAGE
                         else f"{opts.cxx}: compiler not found on PATH")
    workloads = {name: WORKLOADS[name] for name in (opts.workload or WORKLOADS)}
    if "alloc_bench" in workloads:
        workloads["alloc_bench"] = (os.path.abspath(opts.source),) + workloads["alloc_bench"][1:]
    for name, (source, _, _) in workloads.items():
        if not os.path.isfile(source):
            raise BenchError(f"{name}: workload source not found: {source}")
    docs, hook_cost = {}, None
    for name, workload in workloads.items():
        log(f"=== workload {name}")
        docs[name] = bench_workload(opts, cxx, name, workload, measure_hooks=hook_cost is None)
        hook_cost = hook_cost or docs[name]["summary"].get("hook_cost")
    print_overview(docs)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(docs, f, indent=2)
        log(f"measurements written to {opts.json}")
    return 0


def bench_workload(opts, cxx, workload, spec, measure_hooks):
    """Builds, runs and reports one workload; returns its measurements."""
    source, empty_args, what = spec
    ctx = Context()
    tools, skipped = [], []
    classes = [Plain, HeapTypeTypesOnly, HeapType, HeapTypeInstrument, Heaptrack] + (
        [Massif, Gperftools] if opts.all else [])
    for cls in classes:
        t = cls(ctx)
        reason = t.check() if not issubclass(cls, HeapType) else None
        if reason:
            if not t.optional:
                raise BenchError(reason)
            skipped.append({"tool": t.name, "reason": reason})
            log(f"skipping {t.name}: {reason}")
        else:
            tools.append(t)

    work = tempfile.mkdtemp(prefix="heaptype-bench-")
    started = datetime.datetime.now().astimezone()
    load_start = os.getloadavg()
    cpu_start = cpu_account()
    hook_cost = None
    try:
        builds = build(ctx, cxx, opts.cxx, workload, source, work)
        installed_start = fingerprint(ctx.installed)
        heaptype_build = describe_heaptype(ctx)
        for t in tools:
            if isinstance(t, HeapType):
                t.check()
        results, round_loads = run_rounds(opts, tools, work, empty_args)
        if measure_hooks:
            log("enter/exit hook cost ...")
            hook_cost = measure_hook_cost(ctx, work)
    finally:
        if opts.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    load_end = os.getloadavg()
    other_cpu = other_cpu_usage(cpu_start, cpu_account())
    reinstalled = [f for f, st in installed_start.items() if fingerprint([f]).get(f) != st]
    finished = datetime.datetime.now().astimezone()

    summary = summarise(tools, results)
    summary["hook_cost"] = hook_cost
    meta = {
        "workload": workload, "what": what,
        "date": started.strftime("%Y-%m-%d"), "started": started.isoformat(timespec="seconds"),
        "finished": finished.isoformat(timespec="seconds"),
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(),
                 "kernel": platform.release(),
                 "loadavg_start": load_start, "loadavg_end": load_end,
                 "loadavg_1min_after_each_round": round_loads, "other_cpu": other_cpu},
        "compiler": first_line([cxx, "--version"]), "source": source,
        "rounds": opts.rounds, "builds": builds, "heaptype_flags": ctx.flags,
        "args": {"default": "(none: the workload's defaults)", "empty": " ".join(empty_args)},
        "heaptype_cli": ctx.heaptype_cli, "heaptype_build": heaptype_build,
        "heaptype_reinstalled_during_run": reinstalled,
    }
    print_report(meta, tools, summary, skipped)
    return {"meta": meta, "skipped": skipped, "summary": summary, "runs": results}


def run_rounds(opts, tools, work, empty_args):
    results = {t.key: {"name": t.name, "version": t.version, "default": [], "empty": [],
                       "analysis": [], "commands": {}} for t in tools}
    # One untimed start-up of every tool first, so that no tool pays for a cold page cache.
    log("warm-up: one empty run of each tool (not counted)")
    for t in tools:
        one_run(t, empty_args, os.path.join(work, f"warmup.{t.key}"), opts.timeout)
        for f in t.outputs(os.path.join(work, f"warmup.{t.key}")):
            os.remove(f)

    last = opts.rounds
    loads = []
    for r in range(1, opts.rounds + 1):
        # rotate the order every round so that no tool always runs right after another
        order = tools[(r - 1) % len(tools):] + tools[:(r - 1) % len(tools)]
        for t in order:
            for kind, args in (("default", DEFAULT_ARGS), ("empty", empty_args)):
                label = "default args" if kind == "default" else " ".join(empty_args)
                out = os.path.join(work, f"r{r}.{t.key}.{kind}")
                log(f"round {r}/{opts.rounds}: {t.key} ({label}) ...")
                rec = one_run(t, args, out, opts.timeout)
                rec["round"] = r
                results[t.key][kind].append(rec)
                results[t.key]["commands"][kind] = rec["command"]
                log(f"round {r}/{opts.rounds}: {t.key} ({label}) {rec['wall_s']:.3f} s")
                files = t.outputs(out)
                if kind == "default":
                    if files:
                        log(f"round {r}/{opts.rounds}: {t.key} analysis ...")
                        an = t.analyse(files, out + ".analysis.txt")
                        if an:
                            an["round"] = r
                            an["file"] = files[0]
                            results[t.key]["analysis"].append(an)
                        if r == last and isinstance(t, Heaptrack):
                            rec["output_raw_bytes"] = raw_size(files[0])
                if not (opts.keep and r == last):
                    for f in files + glob.glob(glob.escape(out) + ".analysis.txt"):
                        os.remove(f)
        loads.append(os.getloadavg()[0])
    return results, loads


def one_run(t, args, out, timeout):
    cmd = t.command(args, out)
    env = t.env(out)
    meas = run_measured(t.ctx.runner, cmd, env, out + ".stdout", out + ".stderr", timeout,
                        after_kill=t.after_kill)
    wl = parse_workload(out + ".stderr")
    files = t.outputs(out)
    env_shown = {k: v for k, v in env.items() if os.environ.get(k) != v}
    rec = dict(meas, **wl, command=cmd, env=env_shown,
               profiled_rss_kb=t.profiled_rss_kb(meas, wl),
               output_files=[os.path.basename(f) for f in files],
               output_bytes=sum(os.path.getsize(f) for f in files) if files else None)
    os.remove(out + ".stdout")
    os.remove(out + ".stderr")
    return rec


def summarise(tools, results):
    s = {}
    plain = results["plain"]
    p_wall, p_empty = med([x["wall_s"] for x in plain["default"]]), \
        med([x["wall_s"] for x in plain["empty"]])
    checksums = {x["checksum"] for t in results.values() for x in t["default"]}
    # The workload's own operator-new calls (the divisor of ns/alloc), and the allocations
    # a profiler records (HeapType's report: the C++ runtime's own ones included).
    calls = med([x["program_new_calls"] for x in plain["default"]])
    recorded = next((a["allocations"] for a in reversed(results.get("heaptype", {}).get("analysis", []))
                     if a.get("allocations")), calls)
    p_rss = med([x["profiled_rss_kb"] for x in plain["default"]])
    for t in tools:
        r = results[t.key]
        wall = [x["wall_s"] for x in r["default"]]
        empty = [x["wall_s"] for x in r["empty"]]
        w, e = med(wall), med(empty)
        net = ((w - e) - (p_wall - p_empty)) / calls * 1e9 if t.key != "plain" and calls else None
        out_bytes = med([x["output_bytes"] for x in r["default"] if x["output_bytes"] is not None])
        raw = [x.get("output_raw_bytes") for x in r["default"] if x.get("output_raw_bytes")]
        s[t.key] = {
            "name": t.name,
            "wall_s": w, "wall_min_s": min(wall), "wall_max_s": max(wall),
            "x_plain": w / p_wall,
            "empty_wall_s": e, "empty_x_plain": e / p_empty,
            "cpu_s": med([x["cpu_s"] for x in r["default"]]),
            "cpu_x_plain": med([x["cpu_s"] for x in r["default"]])
            / med([x["cpu_s"] for x in plain["default"]]),
            "net_ns_per_alloc": net,
            "profiled_rss_kb": med([x["profiled_rss_kb"] for x in r["default"]]),
            "rss_x_plain": med([x["profiled_rss_kb"] for x in r["default"]]) / p_rss if p_rss else None,
            "tool_tree_maxrss_kb": med([x["maxrss_kb"] for x in r["default"]]),
            "workload_vmhwm_kb": med([x["vmhwm_kb"] for x in r["default"]]),
            "output_bytes": out_bytes,
            "output_bytes_per_alloc": out_bytes / recorded if out_bytes else None,
            "output_raw_bytes": raw[-1] if raw else None,
            "output_raw_bytes_per_alloc": raw[-1] / recorded if raw else None,
            "empty_output_bytes": med([x["output_bytes"] for x in r["empty"]
                                       if x["output_bytes"] is not None]),
            "program_new_calls": sorted({x["program_new_calls"] for x in r["default"]}),
        }
        an = r["analysis"]
        if an and any("wall_s" in a for a in an):
            s[t.key]["analysis_wall_s"] = med([a["wall_s"] for a in an if "wall_s" in a])
            a = next(a for a in an if "command" in a)
            s[t.key]["analysis_command"] = [os.path.basename(a["command"][0])] + [
                "FILE" if x == a["file"] else x for x in a["command"][1:]]
    s["checksums_agree"] = len(checksums) == 1
    s["program_new_calls"], s["recorded_allocations"] = calls, recorded

    # cross-check: HeapType's report against heaptrack_print (and massif's peak)
    def last(key, field):
        an = results.get(key, {}).get("analysis") or []
        vals = {a.get(field) for a in an}
        return an[-1].get(field) if an else None, len(vals) <= 1
    ht_alloc, ok1 = last("heaptype", "allocations")
    ht_peak, ok2 = last("heaptype", "peak_bytes")
    hk_alloc, ok3 = last("heaptrack", "allocations")
    hk_peak, ok4 = last("heaptrack", "peak_bytes")
    hk_peak_text, _ = last("heaptrack", "peak_text")
    hk_temp, _ = last("heaptrack", "temporary_allocations")
    ms_peak, _ = last("massif", "peak_bytes")
    s["cross_check"] = {
        "heaptype_allocations": ht_alloc, "heaptrack_allocations": hk_alloc,
        "allocations_diff_pct": rel_diff(ht_alloc, hk_alloc),
        "heaptype_peak_bytes": ht_peak, "heaptrack_peak_text": hk_peak_text,
        "heaptrack_peak_bytes": hk_peak, "peak_diff_pct": rel_diff(ht_peak, hk_peak),
        "heaptrack_temporary_allocations": hk_temp,
        "massif_peak_bytes": ms_peak, "massif_peak_diff_pct": rel_diff(ht_peak, ms_peak),
        "workload_program_new_calls": calls,
        "same_in_every_round": ok1 and ok2 and ok3 and ok4,
    }
    return s


def print_report(meta, tools, s, skipped):
    h = meta["host"]
    print(f"== {meta['workload']}: {meta['what']}")
    print(f"{meta['date']}, {meta['compiler']} -O2 -g, {h['cpus']} cores, "
          f"{meta['rounds']} rounds interleaved, medians")
    print(f"HeapType: {meta['heaptype_build']['summary']}")
    loads = h["loadavg_1min_after_each_round"]
    print(f"machine load: 1-min load average {h['loadavg_start'][0]:.2f} at start, "
          f"{min(loads):.2f}-{max(loads):.2f} after the rounds (this benchmark accounts for ~1)")
    other = h.get("other_cpu")
    if other:
        print(f"other processes used {other['cpu_s']:.1f} CPU-s during the run's "
              f"{other['wall_s']:.0f} s: {other['cores_busy']:.2f} of {h['cpus']} cores on average")
    print()
    headers = ["tool", "wall", "x plain", "spread", "cpu x plain", "empty run", "x plain",
               "net ns/alloc", "peak RSS", "largest process", "output", "B/alloc"]
    rows = []
    for t in tools:
        r = s[t.key]
        bpa = "-"
        if r["output_bytes_per_alloc"] is not None:
            x = r["output_bytes_per_alloc"]
            bpa = f"{x:.2f}" if x >= 0.1 else f"{x:.2g}"
            if r["output_raw_bytes_per_alloc"]:
                bpa += f" (raw {r['output_raw_bytes_per_alloc']:.1f})"
        out = fmt_size(r["output_bytes"])
        rows.append([
            r["name"], fmt_s(r["wall_s"]), f"{r['x_plain']:.2f}",
            f"{(r['wall_max_s'] - r['wall_min_s']) / r['wall_s'] * 100:.0f}%",
            f"{r['cpu_x_plain']:.2f}",
            fmt_s(r["empty_wall_s"]), f"{r['empty_x_plain']:.1f}",
            "-" if r["net_ns_per_alloc"] is None else f"{r['net_ns_per_alloc']:.0f}",
            fmt_mib(r["profiled_rss_kb"]), fmt_mib(r["tool_tree_maxrss_kb"]), out, bpa])
    for sk in skipped:
        rows.append([sk["tool"], "skipped"] + [""] * (len(headers) - 2))
    print(table(headers, rows, right={1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}))
    for sk in skipped:
        print(f"  skipped {sk['tool']}: {sk['reason']}")

    print()
    arows = []
    base = s.get("heaptype", {}).get("analysis_wall_s")
    for t in tools:
        r = s[t.key]
        if "analysis_wall_s" in r:
            arows.append([shlex.join(r["analysis_command"]),
                          fmt_s(r["analysis_wall_s"]),
                          f"{r['analysis_wall_s'] / base:.2f}" if base else "-",
                          f"{r['analysis_wall_s'] / r['wall_s']:.2f}"])
    if arows:
        print(table(["analysis of the default-args output", "wall", "x heaptype report",
                     "x its profiled run"], arows, right={1, 2, 3}))
        print()

    hooks = s.get("hook_cost")
    if hooks:
        base = hooks["plain_call_ns"]
        print(f"enter/exit hooks (bench/hook_cost.cpp, {hooks['pairs']:,} calls, best of {hooks['runs']}): "
              f"a call without instrumentation {base:.2f} ns; added per enter/exit pair: "
              f"glibc's empty hooks {hooks['empty_ns'] - base:+.2f} ns, HeapType's {hooks['heaptype_ns'] - base:+.2f} ns")
        print()

    c = s["cross_check"]
    def pct(x):
        return "n/a" if x is None else f"{x:+.2f}%"
    def num(x):
        return "n/a" if x is None else f"{x:,}"
    print(f"cross-check: allocations  HeapType {num(c['heaptype_allocations'])}  "
          f"heaptrack_print {num(c['heaptrack_allocations'])}  "
          f"diff {pct(c['allocations_diff_pct'])}   "
          f"(workload's own operator-new calls: {num(c['workload_program_new_calls'])})")
    line = (f"cross-check: peak heap    HeapType {num(c['heaptype_peak_bytes'])} B  "
            f"heaptrack_print {c['heaptrack_peak_text'] or 'n/a'} (= {num(c['heaptrack_peak_bytes'])} B)  "
            f"diff {pct(c['peak_diff_pct'])}")
    if c["massif_peak_bytes"] is not None:
        line += f"   massif {num(c['massif_peak_bytes'])} B, diff {pct(c['massif_peak_diff_pct'])}"
    print(line)
    print("             (heaptrack_print rounds its peak to 4 significant digits; "
          "|diff| < 0.05% is that rounding)")
    if not c["same_in_every_round"]:
        print("             note: these totals differed between rounds; the last round is shown")
    if meta["heaptype_reinstalled_during_run"]:
        print("WARNING: the heaptype package changed during the run ("
              + ", ".join(meta["heaptype_reinstalled_during_run"]) + "): "
              "the analysis timings may mix two versions")
    if not s["checksums_agree"]:
        print("WARNING: the workload's checksum differed between tools")
    calls = {n for t in tools for n in s[t.key]["program_new_calls"]}
    if len(calls) != 1:
        print(f"WARNING: the builds reported different operator-new counts {sorted(calls)}")

    print()
    print(f"commands (FILE = a temporary path; each also run with `{meta['args']['empty']}` appended):")
    for key, b in meta["builds"].items():
        print(f"  build {key}: {b['shown']}")
    print(f"    (heaptype --cflags: {meta['heaptype_flags']['cflags']})")
    print(f"    (heaptype --ldflags: {meta['heaptype_flags']['ldflags']})")
    for t in tools:
        r = s[t.key]
        print(f"  {t.key}: {show_command(t)}")
        if "analysis_command" in r:
            print(f"  {t.key} analysis: {shlex.join(r['analysis_command'])}")


def print_overview(docs):
    """One table over every workload: the figures issue 13's acceptance names."""
    print()
    print("overview: medians; x plain = wall time / plain's; peak RSS of the profiled process; "
          "B/alloc = profile bytes per recorded allocation")
    headers = ["workload", "tool", "x plain", "net ns/alloc", "peak RSS", "RSS x plain", "B/alloc", "load avg"]
    rows = []
    for name, doc in docs.items():
        s, h = doc["summary"], doc["meta"]["host"]
        loads = h["loadavg_1min_after_each_round"] or [h["loadavg_start"][0]]
        for key, r in s.items():
            if not isinstance(r, dict) or "x_plain" not in r:
                continue
            bpa = r["output_bytes_per_alloc"]
            rows.append([name, r["name"], f"{r['x_plain']:.2f}",
                         "-" if r["net_ns_per_alloc"] is None else f"{r['net_ns_per_alloc']:.0f}",
                         fmt_mib(r["profiled_rss_kb"]),
                         "-" if r["rss_x_plain"] is None else f"{r['rss_x_plain']:.2f}",
                         "-" if bpa is None else f"{bpa:.2f}",
                         f"{min(loads):.1f}-{max(loads):.1f}"])
    print(table(headers, rows, right={2, 3, 4, 5, 6}))


def show_command(t):
    out = "FILE"
    binaries = (t.ctx.plain_bin, t.ctx.heaptype_bin, t.ctx.heaptype_types_bin, t.ctx.heaptype_instrument_bin)
    cmd = ["./" + os.path.basename(a) if a in binaries
           else os.path.basename(a) if os.path.isabs(a) and a == shutil.which(os.path.basename(a))
           else a for a in t.command([], out)]
    env = {k: v for k, v in t.env(out).items() if os.environ.get(k) != v}
    return " ".join([f"{k}={shlex.quote(v)}" for k, v in env.items()] + [shlex.join(cmd)])


if __name__ == "__main__":
    sys.exit(main())
