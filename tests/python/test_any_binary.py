"""Programs built without HeapType: preloaded by ``heaptype run``, read while they run,
watched live, attached to and detached from.

tests/cpp/held_blocks.cpp is compiled plain (g++ -O2 -g, no HeapType flags) and makes
exactly the allocations its header lists, each step on a line of stdin, so every test
here knows the truth to the block: 32 ``Held`` of 256 B from make_held(int), 16 of
them freed at the "free" step.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import heaptype
from heaptype.run.linkage import Linkage, runtime_linkage
from heaptype.run.live_view import read_live_state
from tooling import require_tool

SOURCE = Path(__file__).resolve().parents[1] / "cpp" / "held_blocks.cpp"
CLI = [sys.executable, "-m", "heaptype"]
HELD = 256


@pytest.fixture(scope="module")
def held(tmp_path_factory) -> Path:
    cxx = require_tool("g++")
    exe = tmp_path_factory.mktemp("plain") / "held_blocks"
    subprocess.run([cxx, "-O2", "-g", str(SOURCE), "-o", str(exe)], check=True, capture_output=True)
    return exe


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_") and k != "LD_PRELOAD"}
    return {**env, **extra}


class Stepper:
    """Drives held_blocks through its steps, reading its answers from ``stdout``."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.seen: list[str] = []

    def expect(self, word: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                break
            self.seen.append(line)
            if line.startswith(word):
                return line
        raise AssertionError(f"no {word!r} from the program; it said: {''.join(self.seen)[-3000:]}")

    def step(self, command: str, answer: str) -> str:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.expect(answer)

    def finish(self) -> str:
        self.step("end", "done")
        rest, _ = self.process.communicate(timeout=120)
        return "".join(self.seen) + rest


def start(command: list[str], **env: str) -> Stepper:
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=clean_env(**env))
    return Stepper(process)


def function_row(profile: heaptype.Profile, name: str):
    return next(g for g in profile.by_function() if g.function == name)


def report_json(path: Path, *args: str) -> tuple[dict, str]:
    done = subprocess.run([*CLI, "report", str(path), "--format", "json", *args], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout), done.stderr


def held_live(path: Path) -> tuple[int, int] | None:
    """make_held's live bytes and blocks as the file says now."""
    try:
        report, _ = report_json(path, "--by", "function")
    except subprocess.CalledProcessError:
        return None  # the file has no whole chunk yet
    rows = [r for r in report["functions"] if r["function"] == "make_held(int)"]
    return (rows[0]["self"]["live_bytes"], rows[0]["self"]["live_blocks"]) if rows else None


def wait_for(check, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    return check()


# --- preloading ------------------------------------------------------------------------


def test_linkage_tells_plain_from_linked(held, cpp_programs, tmp_path):
    script = tmp_path / "wrapper.sh"
    script.write_text("#!/bin/sh\nexec true\n")
    assert runtime_linkage(str(held)) is Linkage.PLAIN
    assert runtime_linkage(str(cpp_programs.program("objects"))) is Linkage.LINKED  # static runtime
    assert runtime_linkage(str(script)) is Linkage.UNKNOWN


def test_plain_program_is_preloaded_and_the_header_says_so(held, tmp_path):
    out = tmp_path / "held.htp"
    stepper = start([*CLI, "run", "-o", str(out), "--", str(held)])
    stepper.expect("ready")
    stepper.step("alloc", "allocated")
    stepper.step("free", "freed")
    assert "done" in stepper.finish()
    assert stepper.process.returncode == 0
    profile = heaptype.load(out)
    assert profile.mode == "preloaded" and profile.complete
    made = function_row(profile, "make_held(int)")
    assert (made.self.allocations, made.self.bytes, made.self.live_bytes) == (32, 32 * HELD, 0)
    main = function_row(profile, "main")
    assert (main.self.allocations, main.self.bytes) == (5 + 100, 5 * 1000 + 100 * 64)
    text = subprocess.run([*CLI, "report", str(out)], capture_output=True, text=True, check=True).stdout
    assert "  mode       preloaded (the program does not link the runtime): call paths by stack walking" in text


def test_no_preload_keeps_the_old_refusal(held, tmp_path):
    done = subprocess.run([*CLI, "run", "--no-preload", "-o", str(tmp_path / "x.htp"), "--", str(held)],
                          input="\n\n\n", capture_output=True, text=True, env=clean_env())
    assert done.returncode == 2
    assert "wrote no profile" in done.stderr and "build it with HeapType" in done.stderr


def test_a_script_is_named_with_the_command_that_profiles_what_it_runs(held, tmp_path):
    """A wrapper script (a pyenv or asdf shim, a launcher) gets no runtime by default: the
    refusal says it is a script and gives the command that profiles the program it runs."""
    wrapper = tmp_path / "launch-held"
    wrapper.write_text(f"#!/bin/sh\nexec {held} \"$@\"\n")
    wrapper.chmod(0o755)
    out = tmp_path / "held.%p.htp"
    done = subprocess.run([*CLI, "run", "-o", str(out), "--", str(wrapper)], input="\n\n\n",
                          capture_output=True, text=True, env=clean_env())
    assert done.returncode == 2 and not list(tmp_path.glob("held.*.htp"))
    assert f"{wrapper} wrote no profile: it is a script ({wrapper})" in done.stderr
    fix = f"heaptype run --preload --follow-children -- {wrapper}"
    assert fix in done.stderr
    done = subprocess.run([*CLI, "run", "--preload", "--follow-children", "-o", str(out), "--", str(wrapper)],
                          input="\n\n\n", capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0, done.stderr
    profiles = [heaptype.load(path) for path in tmp_path.glob("held.*.htp")]
    # The shell execs the program: one process, its profile named after the program.
    assert [Path(p.executable).name for p in profiles] == ["held_blocks"]
    made = function_row(profiles[0], "make_held(int)")
    assert (made.self.allocations, made.self.bytes) == (32, 32 * HELD)


def test_a_program_with_its_own_allocator_is_named_as_such(tmp_path):
    """A program that defines malloc, free and operator new itself (a statically linked
    mimalloc or jemalloc: Debian's mold) comes before the preloaded runtime in the lookup
    order: nothing reaches it, and the refusal said the program "ended before its first
    allocation, or it is linked statically". The runtime says so as it is loaded, once,
    in the log (not in the program's output), for the program and for any child a
    --follow-children run starts; programs whose malloc is the runtime's hear nothing."""
    exe = tmp_path / "own_allocator"
    subprocess.run([require_tool("g++"), "-O2", str(Path(__file__).resolve().parents[1] / "cpp" / "own_allocator.cpp"),
                    "-o", str(exe)], check=True, capture_output=True)
    done = subprocess.run([*CLI, "run", "-o", str(tmp_path / "own.htp"), "--", str(exe)],
                          capture_output=True, text=True, env=clean_env())
    assert done.returncode == 2 and done.stdout == "served 109\n", (done.stdout, done.stderr)
    said = [line for line in done.stderr.splitlines() if "ahead of the preloaded runtime" in line]
    assert len(said) == 1 and f"the program's malloc is {exe}'s" in said[0], done.stderr
    assert f"{exe} wrote no profile: its allocations never reached the preloaded runtime" in done.stderr
    # Followed from a shell: the child says it too.
    done = subprocess.run([*CLI, "run", "--preload", "--follow-children", "-o", str(tmp_path / "sh.%p.htp"), "--",
                           "sh", "-c", f"{exe}; true"], capture_output=True, text=True, env=clean_env())
    assert done.returncode == 0 and "served 109" in done.stdout, done.stderr
    said = [line for line in done.stderr.splitlines() if "ahead of the preloaded runtime" in line]
    assert len(said) == 1 and f"{exe}'s" in said[0], done.stderr
    assert len(list(tmp_path.glob("sh.*.htp"))) == 1  # the shell's; none of the program's


def test_own_allocator_ahead_of_the_runtime_it_links(tmp_path):
    """The same program linked with the shared runtime (`heaptype --ldflags --shared`):
    libheaptype.so is one of its libraries, not preloaded, and the line says so, naming
    the library; `heaptype run` (which preloads nothing here) names the cause too."""
    exe = tmp_path / "own_allocator_linked"
    ldflags = subprocess.run([*CLI, "--ldflags", "--shared"], capture_output=True, text=True, check=True).stdout.split()
    subprocess.run([require_tool("g++"), "-O2", str(Path(__file__).resolve().parents[1] / "cpp" / "own_allocator.cpp"),
                    *ldflags, "-Wl,--no-as-needed", "-o", str(exe)], check=True, capture_output=True)
    done = subprocess.run([*CLI, "run", "-o", str(tmp_path / "linked.htp"), "--", str(exe)],
                          capture_output=True, text=True, env=clean_env())
    assert done.returncode == 2 and done.stdout == "served 109\n", (done.stdout, done.stderr)
    said = [line for line in done.stderr.splitlines() if "the program's malloc is" in line]
    assert len(said) == 1, done.stderr
    assert f"{exe}'s, ahead of HeapType's runtime in " in said[0] and "libheaptype.so (" in said[0], said[0]
    assert "the preloaded runtime" not in said[0], said[0]
    assert f"{exe} wrote no profile: its allocations never reached HeapType's runtime, which it links" in done.stderr


C_PROGRAM = r"""
#include <stdlib.h>
#include <unistd.h>
int library_answer(void);
int main(void) {
  void* kept[8];
  for (int i = 0; i < 8; ++i) kept[i] = malloc(100 + i);
  for (int i = 0; i < 6; ++i) free(kept[i]);
  char line[16] = "answer  \n";
  line[7] = (char)('0' + library_answer());
  return write(1, line, 9) == 9 ? 0 : 1;
}
"""

C_LIBRARY = "int library_answer(void) { return 4; }\n"
C_LIBRARY_IN_CXX = '#include <string>\nextern "C" int library_answer() { return static_cast<int>(std::string("four").size()); }\n'
# (its string is folded away: the library links libstdc++ for the loader's sake, as one that
# used it would; --no-as-needed keeps a linker that drops unused libraries from dropping it)


@pytest.mark.parametrize("library", ["c", "c++"])
def test_a_c_program_counts_the_emergency_pool_only_when_it_loads_libstdcxx(tmp_path, library):
    """The preloaded runtime is C++ and loads libstdc++.so, whose start-up allocates its
    emergency exception pool (72,704 B with GCC 12) before the program runs. In a C
    program, which would not load libstdc++ alone, that block is the profiler's: not
    counted. A C program that links a C++ library loads libstdc++ itself: the pool is
    its own, counted as before (and as heaptrack counts it)."""
    source = tmp_path / "answer.c"
    source.write_text(C_PROGRAM)
    library_source = tmp_path / ("answer_library.cpp" if library == "c++" else "answer_library.c")
    library_source.write_text(C_LIBRARY_IN_CXX if library == "c++" else C_LIBRARY)
    library_file = tmp_path / "libanswer.so"
    compiler = require_tool("g++" if library == "c++" else "gcc")
    subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-Wl,--no-as-needed", str(library_source), "-o",
                    str(library_file)], check=True, capture_output=True)
    needs = subprocess.run(["readelf", "-d", str(library_file)], capture_output=True, text=True, check=True).stdout
    assert ("libstdc++.so" in needs) == (library == "c++"), needs
    exe = tmp_path / "answer"
    subprocess.run([require_tool("gcc"), "-O1", str(source), str(library_file), f"-Wl,-rpath,{tmp_path}", "-o",
                    str(exe)], check=True, capture_output=True)
    out = tmp_path / "answer.htp"
    done = subprocess.run([*CLI, "run", "-o", str(out), "--", str(exe)], capture_output=True, text=True,
                          env=clean_env())
    assert done.returncode == 0 and done.stdout == "answer 4\n", (done.stdout, done.stderr)
    profile = heaptype.load(out)
    assert profile.complete and profile.warnings == []
    own_bytes = sum(100 + i for i in range(8))
    pool = [t for t in profile.by_type(infer=True) if t.label == "libstdc++: emergency exception pool"]
    if library == "c":
        assert pool == []
        assert (profile.totals.allocations, profile.totals.bytes, profile.totals.peak_bytes) == (8, own_bytes, own_bytes)
        assert profile.totals.live_blocks == 2
    else:
        [pool] = pool
        assert (pool.allocations, pool.bytes) == (1, 72_704)
        assert (profile.totals.allocations, profile.totals.bytes) == (9, own_bytes + 72_704)


@pytest.mark.parametrize("build", ["plain", "instrument"])
def test_untyped_callers_pass_over_allocation_wrappers(tmp_path, build):
    """alloc_wrappers.cpp: its blocks come through xmalloc and xcalloc (which calls
    xmalloc), as GCC's, gdb's and Squid's do. The untyped blocks' callers are the
    functions that called the wrappers, each named with the wrapper it called; a direct
    malloc keeps its caller. Built without HeapType (`heaptype run`: walked paths), and
    with it in instrument mode (paths from the hooks)."""
    exe = tmp_path / "alloc_wrappers"
    flags = {opt: subprocess.run([*CLI, opt, "--callstack", "instrument"], capture_output=True, text=True,
                                 check=True).stdout.split() if build == "instrument" else []
             for opt in ("--cflags", "--ldflags")}
    subprocess.run([require_tool("g++"), "-O2", "-g", "-fno-optimize-sibling-calls", *flags["--cflags"],
                    str(Path(__file__).resolve().parents[1] / "cpp" / "alloc_wrappers.cpp"), *flags["--ldflags"],
                    "-o", str(exe)], check=True, capture_output=True)
    out = tmp_path / "wrappers.htp"
    done = subprocess.run([*CLI, "run", "-o", str(out), "--", str(exe)], capture_output=True, text=True,
                          env=clean_env())
    assert done.returncode == 0 and done.stdout == "kept 31\n", done.stderr
    report = subprocess.run([*CLI, "report", str(out), "--format", "json"], capture_output=True, text=True,
                            check=True, env=clean_env())
    callers = {c["function"]: (c["allocations"], c["bytes"]) for c in json.loads(report.stdout)["untyped_callers"]}
    assert callers["parse_words() (through xcalloc)"] == (20, 20_000), callers
    assert callers["read_table() (through xmalloc)"] == (10, 10_000), callers
    assert callers["main"] == (1, 500), callers
    assert not any(name.startswith(("xmalloc", "xcalloc")) for name in callers), callers


# --- a running program's file ----------------------------------------------------------


def test_report_reads_a_running_program(held, tmp_path):
    out = tmp_path / "running.htp"
    stepper = start([*CLI, "run", "-o", str(out), "--", str(held)])
    stepper.expect("ready")
    stepper.step("alloc", "allocated")
    # The runtime writes the file out about once a second, signal or not.
    assert wait_for(lambda: held_live(out), timeout=5) == (32 * HELD, 32)
    report, warnings = report_json(out)
    assert not report["complete"] and "not finished" in warnings
    # The live view's rows, from the same growing file.
    paths = {row.label: row for row in read_live_state(out, by="callpath").rows}
    row = paths["main > make_held(int) [(untyped)]"]
    assert (row.live_bytes, row.live_blocks, row.allocations) == (32 * HELD, 32, 32)
    stepper.step("free", "freed")
    assert wait_for(lambda: held_live(out) == (16 * HELD, 16), timeout=5)
    stepper.finish()
    assert heaptype.load(out).complete


def test_snapshot_signal_flushes_at_once(held, tmp_path):
    out = tmp_path / "signal.htp"
    stepper = start([str(held)], LD_PRELOAD=preloaded_runtime(), HEAPTYPE_OUTPUT=str(out), HEAPTYPE_SIGNAL="USR2")
    stepper.expect("ready")
    stepper.step("alloc", "allocated")
    os.kill(stepper.process.pid, signal.SIGUSR2)
    # The periodic flush comes once a second; the snapshot well before.
    assert wait_for(lambda: out.exists() and heaptype.load(out).snapshot_times_us, timeout=0.5)
    assert held_live(out) == (32 * HELD, 32)
    stepper.step("free", "freed")
    stepper.finish()
    assert len(heaptype.load(out).snapshot_times_us) == 1


@pytest.mark.parametrize("setting, kills", [(None, True), ("0", True), ("USR1", False)])
def test_snapshot_signal_is_configurable(held, tmp_path, setting, kills):
    """Only a HEAPTYPE_SIGNAL that names a signal installs a handler: unset (or 0), SIGUSR2
    keeps its default action (GoogleTest's death tests raise it and expect death)."""
    out = tmp_path / "configured.htp"
    settings = {} if setting is None else {"HEAPTYPE_SIGNAL": setting}
    stepper = start([str(held)], LD_PRELOAD=preloaded_runtime(), HEAPTYPE_OUTPUT=str(out), **settings)
    stepper.expect("ready")
    stepper.step("alloc", "allocated")
    os.kill(stepper.process.pid, signal.SIGUSR1 if setting == "USR1" else signal.SIGUSR2)
    if kills:  # no handler: SIGUSR2 does what it always does
        assert stepper.process.wait(timeout=30) == -signal.SIGUSR2
        return
    assert wait_for(lambda: out.exists() and heaptype.load(out).snapshot_times_us, timeout=0.5)
    stepper.step("free", "freed")
    stepper.finish()
    assert stepper.process.returncode == 0


def preloaded_runtime() -> str:
    from heaptype.capture import flags

    return str(Path(flags.lib_dir()) / "libheaptype.so")


# --- the live view ---------------------------------------------------------------------


def watch_command(out: Path, held: Path) -> list[str]:
    return [*CLI, "run", "--watch", "--interval", "0.2", "--by", "function", "-o", str(out), "--", str(held)]


def test_watch_prints_plain_tables_without_a_terminal(held, tmp_path):
    stepper = start(watch_command(tmp_path / "watch.htp", held))
    stepper.expect("ready")
    stepper.step("alloc", "allocated")
    held_row = stepper.expect("│ make_held(int)")
    assert cells(held_row) == ["make_held(int)", "8 KiB", "32", "32"]
    stepper.step("free", "freed")
    while cells(stepper.expect("│ make_held(int)")) != ["make_held(int)", "4 KiB", "16", "32"]:
        pass
    output = stepper.finish()
    assert "\x1b[" not in output  # no terminal: plain text
    assert "Functions, by bytes allocated" in output  # the report at exit
    assert stepper.process.returncode == 0


def cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("│").split("│")]


def test_watch_redraws_in_place_on_a_terminal(held, tmp_path):
    leader, follower = pty.openpty()
    env = clean_env(COLUMNS="120", LINES="40", TERM="xterm")
    process = subprocess.Popen(watch_command(tmp_path / "tty.htp", held), stdin=subprocess.PIPE, stdout=follower,
                               stderr=follower, env=env)
    os.close(follower)
    seen = read_until(leader, b"ready", 60)
    process.stdin.write(b"alloc\n")
    process.stdin.flush()
    seen += read_until(leader, b"8 KiB", 30)
    process.stdin.write(b"free\n")
    process.stdin.flush()
    seen += read_until(leader, b"4 KiB", 30)
    process.stdin.write(b"end\n")
    process.stdin.flush()
    process.stdin.close()
    seen += read_until(leader, None, 60)
    assert process.wait(timeout=60) == 0
    os.close(leader)
    text = seen.decode(errors="replace")
    assert "\x1b[" in text  # drawn by rich as a live display: cursor moves
    assert text.count("make_held(int)") >= 2  # redrawn
    assert "Functions, by bytes allocated" in text


def read_until(fd: int, marker: bytes | None, timeout: float) -> bytes:
    """Bytes from ``fd`` until ``marker`` (None: until the other end closes)."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if marker is not None and marker in data:
            return data
    if marker is not None:
        raise AssertionError(f"{marker!r} never came: {data[-2000:]!r}")
    return data


# --- attach and detach -----------------------------------------------------------------


def test_attach_records_what_follows_and_detach_lets_the_program_go_on(held, tmp_path):
    require_tool("gdb")
    out = tmp_path / "attached.htp"
    stepper = start([str(held)])
    pid = int(stepper.expect("ready").split()[1])
    done = subprocess.run([*CLI, "attach", str(pid), "-o", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    stepper.step("alloc", "allocated")
    stepper.step("free", "freed")
    done = subprocess.run([*CLI, "detach", str(pid)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # After the detach the program frees blocks allocated while attached, and allocates
    # and frees more: it must go on unaffected, and the profile must not change.
    size = out.stat().st_size
    assert "done" in stepper.finish() and stepper.process.returncode == 0
    assert out.stat().st_size == size
    profile = heaptype.load(out)
    assert profile.mode == "attached" and profile.complete
    t = profile.totals
    assert (t.allocations, t.frees, t.live_blocks, t.live_bytes) == (32, 16, 16, 16 * HELD)
    assert profile.runtime_summary["untracked_frees"] == 3  # the blocks from before the attach
    made = function_row(profile, "make_held(int)")
    assert (made.self.allocations, made.self.live_blocks) == (32, 16)
    text = subprocess.run([*CLI, "report", str(out)], capture_output=True, text=True, check=True).stdout
    assert "attached to the running process: only what happened after the attach; 3 frees of older blocks " \
           "ignored" in text


def test_detach_without_attach_is_an_error(held):
    require_tool("gdb")
    stepper = start([str(held)])
    pid = int(stepper.expect("ready").split()[1])
    done = subprocess.run([*CLI, "detach", str(pid)], capture_output=True, text=True)
    assert done.returncode == 2 and "heaptype: error: detach:" in done.stderr
    stepper.step("alloc", "allocated")
    stepper.step("free", "freed")
    assert "done" in stepper.finish()


# --- mixed programs ----------------------------------------------------------------------


def test_mixed_program_gets_types_and_walked_stacks(tmp_path):
    """A plain executable using a library built with HeapType: the library needs the
    runtime, but loads it after libc, so `heaptype run` preloads it (the library's need
    is met by the same file); its new-expressions are typed, and the plain code's
    allocations get their call paths from stack walks."""
    from heaptype.capture import flags

    cxx = require_tool("g++")
    cpp = SOURCE.parent
    lib = tmp_path / "libmixed.so"
    subprocess.run([cxx, "-O2", "-g", "-fPIC", "-shared", *flags.compile_flags(cxx=cxx), str(cpp / "mixed_lib.cpp"),
                    *flags.link_flags(shared=True), "-o", str(lib)], check=True, capture_output=True)
    exe = tmp_path / "mixed"
    subprocess.run([cxx, "-O2", "-g", str(cpp / "mixed_main.cpp"), f"-L{tmp_path}", "-lmixed",
                    f"-Wl,-rpath,{tmp_path}", "-o", str(exe)], check=True, capture_output=True)
    assert runtime_linkage(str(exe)) is Linkage.PLAIN
    out = tmp_path / "mixed.htp"
    done = subprocess.run([*CLI, "run", "-o", str(out), "--", str(exe)], capture_output=True, text=True,
                          env=clean_env())
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(out)
    assert profile.mode == "preloaded"
    widget = profile.type_row("Widget")
    assert (widget.allocations, widget.bytes, widget.live_bytes) == (10, 320, 0)
    plain = function_row(profile, "make_plain()")
    assert (plain.self.allocations, plain.self.bytes) == (7, 7 * 48)
    assert function_row(profile, "main").total.allocations == 17



def test_the_installed_runtime_names_its_own_types():
    """The preloaded runtime counts some blocks as types of its own (a block whose
    constructor threw before its type was known: heaptype::constructor_threw, seen 28
    times in yaml-cpp's test suite run under `heaptype run`). A report names them from
    the installed libheaptype.so's symbol table, so the package must not strip it."""
    library = Path(heaptype.__file__).parent / "lib" / "libheaptype.so"
    assert "heaptype::constructor_threw" in heaptype._core.elf_type_tags(str(library)).values()
