"""The runtime in hostile programs (issue 15's runtime findings), one test each.

tests/cpp/hostile.cpp runs each scenario by name; each test checks that the program
keeps its exit status and its output, and that the profile holds exactly what the
program allocated, or that the runtime says clearly on stderr why it does not.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import heaptype
from conftest import CXX_STD, profile_chunks, run_preloaded, run_profiled
from heaptype.capture import flags
from tooling import require_tool

CPP = Path(__file__).resolve().parents[1] / "cpp"
HEAPTYPE = [sys.executable, "-m", "heaptype"]  # the CLI of the package under test


def allocations(profile: heaptype.Profile, name: str) -> tuple[int, int] | None:
    row = profile.type_row(name)
    return None if row is None else (row.allocations, row.live_blocks)


@pytest.fixture(scope="module")
def hostile(cpp_programs):
    return cpp_programs.program("hostile")


@pytest.mark.parametrize("callstack", [None, "none"])
@pytest.mark.parametrize("scenario,live", [("signal", "all"), ("signal-free", 1)])
def test_signal_handler_allocating_while_the_thread_is_in_the_runtime(hostile, tmp_path, scenario, live,
                                                                      callstack):
    """A profiling timer's handler allocates (signal-free: and frees the block of the
    time before) whenever it fires, also in the middle of the runtime's own work: no
    deadlock, and every block is counted exactly, the handler's typed too (the thread
    records them as it leaves the runtime)."""
    output = tmp_path / "signal.htp"
    env = {"HEAPTYPE_CALLSTACK": callstack} if callstack else {}
    done = run_profiled(hostile, output, scenario, "2000000", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    signals = int(re.match(r"signals=(\d+) ", done.stdout).group(1))
    assert signals > 0
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    assert allocations(profile, "Main") == (2_000_000, 0)
    assert allocations(profile, "Sig") == (signals, signals if live == "all" else live)
    assert profile.totals.allocations == sum(r.allocations for r in profile.by_type())


@pytest.mark.parametrize("callstack", [None, "none"])
def test_an_allocators_report_in_a_signal_handler_keeps_its_count(hostile, tmp_path, callstack):
    """The handler's block is an allocator's: a header of its own, then 3 Tagged, which it
    reports (heaptype_tag_allocation, as a copy-on-write string's allocator reports its
    characters after its _Rep). Whether the handler interrupted the runtime (its report
    waits for the thread to leave) or not, each block counts 3 objects, not the 5 that
    its 40 bytes would hold."""
    output = tmp_path / "tagged.htp"
    env = {"HEAPTYPE_CALLSTACK": callstack} if callstack else {}
    done = run_profiled(hostile, output, "signal-tagged", "2000000", env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    signals = int(re.match(r"signals=(\d+) ", done.stdout).group(1))
    assert signals > 0
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    tagged = profile.type_row("(anonymous namespace)::Tagged")
    assert (tagged.allocations, tagged.objects, tagged.bytes, tagged.live_blocks) == (signals, 3 * signals,
                                                                                      40 * signals, signals)
    assert allocations(profile, "Main") == (2_000_000, 0)


@pytest.fixture(scope="module")
def hostile_instrumented(tmp_path_factory) -> Path:
    """tests/cpp/hostile.cpp with -finstrument-functions (the runtime's enter and exit hooks)."""
    cxx = require_tool("g++")
    out = tmp_path_factory.mktemp("instrumented") / "hostile"
    command = [cxx, CXX_STD, "-O2", "-g", *flags.compile_flags(callstack="instrument", cxx=cxx),
               str(CPP / "hostile.cpp"), *flags.link_flags(), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return out


@pytest.mark.parametrize("scenario,live", [("signal", "all"), ("signal-free", 1)])
def test_signal_handler_inside_the_instrumentation_hooks(hostile_instrumented, tmp_path, scenario, live):
    """The same in instrument mode, where the handler also interrupts the hooks."""
    output = tmp_path / "signal.htp"
    done = run_profiled(hostile_instrumented, output, scenario, "2000000", timeout=120)
    assert done.returncode == 0, done.stderr
    signals = int(re.match(r"signals=(\d+) ", done.stdout).group(1))
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    assert allocations(profile, "Main") == (2_000_000, 0)
    assert allocations(profile, "Sig") == (signals, signals if live == "all" else live)


def test_forked_child_that_execs_a_profiled_program_keeps_the_parent_profile(hostile, tmp_path):
    """Same HEAPTYPE_OUTPUT without %p in parent and exec'ed child (both built with
    HeapType): the child must not truncate the parent's file; it writes <path>.<pid>
    and says so in the log, not on its stderr (a parent may be reading that)."""
    output = tmp_path / "profiles" / "parent.htp"
    output.parent.mkdir()
    log = tmp_path / "runtime.log"
    done = run_profiled(hostile, output, "fork-exec", "11", env={"HEAPTYPE_LOG": str(log)})
    assert (done.returncode, done.stderr) == (0, "")
    others = [p for p in output.parent.iterdir() if p != output]
    assert len(others) == 1 and re.fullmatch(r"parent\.htp\.\d+", others[0].name)
    assert log.read_text() == f"heaptype: another process writes {output}; this one's profile goes to {others[0]}\n"
    parent = heaptype.load(output)
    assert parent.complete and allocations(parent, "Main") == (11, 0)
    child = heaptype.load(others[0])
    assert child.complete and allocations(child, "Main") == (7, 0)


def test_heaptype_run_with_o_and_a_child_that_execs(hostile, tmp_path):
    output = tmp_path / "run.htp"
    done = subprocess.run([*HEAPTYPE, "run", "-o", str(output), "--", str(hostile), "fork-exec", "5"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert allocations(heaptype.load(output), "Main") == (5, 0)


@pytest.fixture(scope="module")
def plugin(cpp_programs, tmp_path_factory) -> Path:
    """tests/cpp/hostile_plugin.cpp as a shared library with its own copy of the runtime."""
    cxx = require_tool("g++")
    out = tmp_path_factory.mktemp("plugin") / "libhostile_plugin.so"
    command = [cxx, CXX_STD, "-O2", "-g", "-fPIC", "-shared", *flags.compile_flags(),
               str(CPP / "hostile_plugin.cpp"), *flags.link_flags(), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def plugin_without_runtime(cpp_programs, tmp_path_factory) -> Path:
    """The same plugin compiled with `heaptype --cflags` alone: it uses the runtime of
    the executable that loads it (what HEAPTYPE_INSTRUMENT_ALL does to a MODULE library)."""
    cxx = require_tool("g++")
    out = tmp_path_factory.mktemp("plugin") / "libhostile_plugin_bare.so"
    command = [cxx, CXX_STD, "-O2", "-g", "-fPIC", "-shared", *flags.compile_flags(),
               str(CPP / "hostile_plugin.cpp"), "-o", str(out)]
    subprocess.run(command, check=True, capture_output=True)
    return out


MODULES = 2  # the chunk kind of a module map (src/format/profile_format.hpp)


def module_maps(path: Path) -> list[bytes]:
    """The module maps (file-backed lines of /proc/self/maps) a plain profile holds."""
    data = path.read_bytes()
    return [data[offset:offset + size] for offset, kind, _, size in profile_chunks(data) if kind == MODULES]


def test_dlopened_plugin_with_its_own_runtime_reports_to_the_executables(hostile, plugin, tmp_path):
    output = tmp_path / "plugin.htp"
    done = run_profiled(hostile, output, "plugin", str(plugin), "9", env={"HEAPTYPE_COMPRESS": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "made=9\n" and done.stderr == ""
    assert [p.name for p in tmp_path.iterdir()] == ["plugin.htp"]
    profile = heaptype.load(output)
    assert profile.complete
    assert allocations(profile, "PluginObject") == (9, 0)
    assert allocations(profile, "Main") == (9, 0)
    # The map is written at the start and again at the end, the loader having loaded
    # an object since: only the second names the plugin.
    maps = module_maps(output)
    assert [plugin.name.encode() in m for m in maps] == [False, True]


def test_dlopened_plugin_without_a_runtime_uses_the_executables(hostile, plugin_without_runtime, tmp_path):
    """`heaptype --ldflags` exports every symbol a translation unit compiled with
    `heaptype --cflags` refers to (the link check's too): such a plugin loads into the
    executable and reports to its runtime. (Its link check was not exported, and
    dlopen() failed on it.)"""
    output = tmp_path / "bare-plugin.htp"
    done = run_profiled(hostile, output, "plugin", str(plugin_without_runtime), "7")
    assert (done.returncode, done.stdout, done.stderr) == (0, "made=7\n", "")
    assert allocations(heaptype.load(output), "PluginObject") == (7, 0)


def test_a_module_map_is_written_again_only_when_objects_were_loaded(hostile, tmp_path):
    """Reading /proc/self/maps costs a test process ~0.1 ms: a run that loads nothing
    after its start writes one map, at the start, and its types are named from it."""
    output = tmp_path / "one-map.htp"
    done = run_profiled(hostile, output, "alone", "5", env={"HEAPTYPE_COMPRESS": "0"})
    assert done.returncode == 0, done.stderr
    assert len(module_maps(output)) == 1
    profile = heaptype.load(output)
    assert profile.complete and allocations(profile, "Main") == (5, 0)


@pytest.mark.parametrize("how", ["execl", "execlp", "execle", "execv", "execvp", "execvpe", "execve"])
@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_an_image_replaced_by_exec_finishes_its_profile(hostile, tmp_path, how, mode):
    """exec has no exit: the process's profile is finished before its image goes, with
    the blocks live at that moment (a wrapper such as env or a shell that execs its last
    command left a profile without its end, and an aggregated one without counts)."""
    output = tmp_path / "replaced.htp"
    true = shutil.which("true")
    done = run_profiled(hostile, output, "exec", how, "6", true if how in ("execl", "execle", "execv", "execve")
                        else "true", env={"HEAPTYPE_MODE": mode})
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == [] and profile.end_cause == "exec"
    main = profile.type_row("Main")
    assert (main.allocations, main.live_blocks) == (6, 6)
    report = subprocess.run([*HEAPTYPE, "report", str(output)], capture_output=True, text=True, check=True).stdout
    assert "  at exec    " in report and "live at exec" in report


def test_a_program_that_execs_itself_keeps_each_images_profile(hostile, tmp_path):
    """The image an exec starts has the same pid, and here the same name: the path is
    the last image's (as a wrapper script's `exec program` wants), and the profile its
    predecessor finished there moves to "<path>.<pid>"."""
    output = tmp_path / "self.htp"
    log = tmp_path / "runtime.log"
    done = run_profiled(hostile, output, "exec", "execv", "4", str(hostile), "alone", "3",
                        env={"HEAPTYPE_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    [before] = [p for p in tmp_path.iterdir() if p.name.startswith("self.htp.")]
    first, last = heaptype.load(before), heaptype.load(output)
    assert before.name == f"self.htp.{first.pid}" and last.pid == first.pid
    assert log.read_text() == f"heaptype: this process's image before its exec wrote {output}; that profile is now {before}\n"
    assert first.complete and last.complete
    assert (first.end_cause, last.end_cause) == ("exec", "exit")
    assert (first.type_row("Main").allocations, first.type_row("Main").live_blocks) == (4, 4)
    assert allocations(last, "Main") == (3, 0)


def test_free_of_an_array_with_a_cookie_is_said_and_frees_the_block(hostile, tmp_path):
    output = tmp_path / "free.htp"
    log = tmp_path / "runtime.log"
    done = run_profiled(hostile, output, "free-array", "4", env={"HEAPTYPE_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("freed=4\n", "")
    assert log.read_text() == ("heaptype: mismatched free() / delete of an array made with new[]: the pointer "
                               "is past the array's cookie; the block is freed (use delete[])\n")
    profile = heaptype.load(output)
    counted = profile.type_row("Counted")
    assert (counted.allocations, counted.objects, counted.bytes, counted.live_blocks) == (4, 12, 4 * (8 + 3 * 8), 0)
    # ... and each is a finding in the profile (Valgrind's "mismatched free() / delete / delete []")
    assert [(f["kind"], f["allocated"], f["allocated_with"], f["released_with"], f["count"])
            for f in profile.findings] == [("mismatched_free", "Counted", "new[]", "free()", 4)]


def test_block_whose_constructor_throws_is_not_untyped(hostile, tmp_path):
    """The new-expression's type never arrives (its constructor threw, the block was
    freed while the exception propagated): the block counts as constructor_threw."""
    output = tmp_path / "throw.htp"
    done = run_profiled(hostile, output, "throw", "6")
    assert done.returncode == 0 and done.stdout == "caught=6\n", done.stderr
    profile = heaptype.load(output)
    threw = profile.type_row("heaptype::constructor_threw")
    assert (threw.allocations, threw.objects, threw.bytes, threw.live_blocks) == (6, 6, 6 * 16, 0)
    assert profile.type_row("Thrower") is None


@pytest.fixture(scope="module")
def hostile_plain(tmp_path_factory) -> Path:
    """tests/cpp/hostile.cpp built without HeapType, for `heaptype run` to preload the runtime
    (-fno-allocation-dce: GCC would drop make_mains' new and delete, whose block nothing reads
    but its own loop)."""
    exe = tmp_path_factory.mktemp("hostile_plain") / "hostile"
    subprocess.run([require_tool("g++"), CXX_STD, "-O2", "-fno-allocation-dce", str(CPP / "hostile.cpp"), "-o",
                    str(exe), "-ldl"],
                   check=True, capture_output=True, timeout=300)
    return exe


@pytest.fixture(scope="module")
def hostile_plain_debug(tmp_path_factory) -> Path:
    """tests/cpp/hostile.cpp built without HeapType, with debug info: the inferred types of
    <future>'s blocks come from its inlined allocator frames."""
    exe = tmp_path_factory.mktemp("hostile_plain_debug") / "hostile"
    subprocess.run([require_tool("g++"), CXX_STD, "-O2", "-g", str(CPP / "hostile.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=300)
    return exe


def type_rows(profile: heaptype.Profile) -> dict[str, tuple[int, int]]:
    return {row.label: (row.allocations, row.live_blocks) for row in profile.by_type(infer=True)}


def test_blocks_freed_from_other_frames_during_unwinding_keep_their_types(hostile, tmp_path):
    """spdlog's async flush: future::get() throws broken_promise and the promise's shared
    state and result are freed as the exception propagates. Their allocations completed
    (the result's, in <future>, is typed from its allocator frames): not
    heaptype::constructor_threw, which 3,485 of spdlog's results were. A Holder's Main,
    deleted by its destructor during unwinding, stays a Main."""
    done = run_profiled(hostile, tmp_path / "unwind.htp", "unwind-free", "5")
    assert done.returncode == 0 and done.stdout == "caught=10\n", done.stderr
    rows = type_rows(heaptype.load(tmp_path / "unwind.htp"))
    assert "heaptype::constructor_threw" not in rows, rows
    assert rows["std::__future_base::_Result<void> (inferred)"] == (5, 0)
    assert rows["Main"] == (5, 0)


def test_a_plain_program_has_no_constructor_threw_rows(hostile_plain_debug, tmp_path):
    """Preloaded into a plain build no new-expression reports a type, so a block freed
    while an exception propagates cannot be known to be one whose constructor threw:
    the throwing constructors' blocks are untyped, the promises' as inferred."""
    for scenario, n in (("throw", "6"), ("unwind-free", "10")):
        out = tmp_path / f"{scenario}.htp"
        done = run_preloaded(hostile_plain_debug, out, scenario, n)
        assert done.returncode == 0, done.stderr
        rows = type_rows(heaptype.load(out))
        assert "heaptype::constructor_threw" not in rows, (scenario, rows)
    assert rows["std::__future_base::_Result<void> (inferred)"] == (10, 0)


def test_the_programs_stack_at_a_throw_has_no_frame_of_the_runtime(hostile, hostile_plain_debug, tmp_path):
    """The runtime's __cxa_throw (which types the thrown object) jumps to the C++
    runtime's: a terminate handler's backtrace() counts the frames it counts without
    HeapType (kj's death tests print such a trace; it had one frame more, the runtime's
    __cxa_throw), linked and preloaded."""
    alone = subprocess.run([str(hostile_plain_debug), "uncaught", "5"], capture_output=True, text=True)
    assert alone.returncode == 3 and alone.stdout.startswith("frames="), alone
    linked = run_profiled(hostile, tmp_path / "linked.htp", "uncaught", "5")
    preloaded = run_preloaded(hostile_plain_debug, tmp_path / "preloaded.htp", "uncaught", "5")
    assert (linked.returncode, linked.stdout) == (3, alone.stdout), linked.stderr
    assert (preloaded.returncode, preloaded.stdout) == (3, alone.stdout), preloaded.stderr
    assert allocations(heaptype.load(tmp_path / "linked.htp"), "Sig") == (1, 1)  # the thrown object, typed


@pytest.mark.parametrize("compiler", ["g++", "clang++"])
def test_own_operator_new_without_the_fence_names_the_fix(tmp_path, compiler):
    cxx = require_tool(compiler)
    base = [cxx, CXX_STD, "-c", *flags.compile_flags(cxx=cxx), str(CPP / "own_operator_new.cpp")]
    failed = subprocess.run([*base, "-DFENCED=0", "-o", str(tmp_path / "a.o")], capture_output=True, text=True)
    assert failed.returncode != 0
    first_error = next(line for line in failed.stderr.splitlines() if "error" in line)
    assert "heaptype_new_macro__to_declare_an_operator_new_include_heaptype_undef_new_h" in first_error
    fenced = subprocess.run([*base, "-DFENCED=1", "-o", str(tmp_path / "b.o")], capture_output=True, text=True)
    assert fenced.returncode == 0, fenced.stderr


@pytest.mark.parametrize("path,reason", [
    ("missing-dir/out.htp", "No such file or directory"),
    ("a-file/out.htp", "Not a directory"),
])
def test_output_that_cannot_be_created_is_said_once(hostile, tmp_path, path, reason):
    (tmp_path / "a-file").write_text("")
    output = tmp_path / path
    done = run_profiled(hostile, output, "alone", "3")
    assert done.returncode == 0
    assert done.stderr == (f"heaptype: cannot create the profile file {output}: {reason}; "
                           "the program runs unprofiled\n")


@pytest.mark.parametrize("where,reason", [
    ("/proc/out.htp", "cannot write the profile in /proc: No such file or directory"),
    ("{tmp}/a-file/out.htp", "cannot write the profile in {tmp}/a-file: {tmp}/a-file is not a directory"),
])
def test_heaptype_run_with_an_unusable_output_says_so(hostile, tmp_path, where, reason):
    """Not the hint to build with HeapType: the program is fine, its output is not."""
    (tmp_path / "a-file").write_text("")
    done = subprocess.run([*HEAPTYPE, "run", "-o", where.format(tmp=tmp_path), "--", str(hostile), "alone", "3"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"heaptype: error: run: {reason.format(tmp=tmp_path)}\n"


def test_full_disk_is_said_once_and_the_program_keeps_its_status(hostile):
    done = run_profiled(hostile, Path("/dev/full"), "nonsense", "3")
    assert done.returncode == 2  # the program's own status for an unknown scenario
    assert done.stderr == ("heaptype: cannot write the profile file /dev/full: No space left on device; "
                           "the profile ends here, the program runs on\n")


def test_a_forged_seal_gets_nothing_written(cpp_programs, tmp_path):
    """tests/cpp/forged_seal.cpp forges, before objects of its own pool, block headers that
    the seal accepts (it reads the process's secret from the runtime), then places
    objects there by placement new, placement new[] and heaptype::tag. Which blocks are
    the runtime's is known exactly (block_starts.hpp), so the pool keeps every byte the
    program wrote: a seal that matches by chance decides nothing."""
    done = run_profiled(cpp_programs.program("forged_seal"), tmp_path / "forged.htp")
    assert done.stdout.splitlines() == [
        "placement new: pool untouched",
        "placement new[]: pool untouched",
        "heaptype::tag: pool untouched",
    ]
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(tmp_path / "forged.htp")
    assert profile.complete and profile.warnings == []
    # heaptype::tag on memory the runtime did not allocate tracks it as tagged memory
    assert allocations(profile, "PooledNode") == (2, 1)


CLOSE_ALL_WAYS = ["loop", "closefrom", "close_range", "dup2"]
OWN_LINE = b"the program's own line\n"


def own_files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("own*.txt"))}


def close_all(program: Path, tmp_path: Path, how: str, *, preload: bool):
    """Runs the close-all scenario (1000 Main objects before and after), linked or under
    `heaptype run`; returns the finished run, the profile and the program's files."""
    files = tmp_path / "files"
    files.mkdir()
    output = tmp_path / "close.htp"
    if preload:
        done = run_preloaded(program, output, "close-all", how, "1000", str(files))
    else:
        done = run_profiled(program, output, "close-all", how, "1000", str(files))
    return done, heaptype.load(output), own_files(files)


@pytest.mark.parametrize("how", CLOSE_ALL_WAYS)
def test_a_program_that_closes_every_descriptor_keeps_its_files_and_its_profile(hostile, tmp_path, how):
    """A daemon closes every descriptor from 3 up (a close() of each number, closefrom,
    close_range, or /dev/null put over each by dup2) and opens files of its own, which
    take the lowest free numbers: the profile's among them. The runtime went on writing
    its chunks there (the first file of a program run so held 3,155 bytes of profile).
    The program's files hold its lines alone, and the profile every Main object, before
    the closing and after (src/runtime/descriptor_hooks.cpp)."""
    done, profile, files = close_all(hostile, tmp_path, how, preload=False)
    assert done.returncode == 0 and done.stdout == "files intact\n", (done.stdout, done.stderr)
    assert files == {f"own{k}.txt": OWN_LINE for k in range(8)}
    assert profile.complete and profile.warnings == []
    assert allocations(profile, "Main") == (2000, 0)


@pytest.mark.parametrize("how", CLOSE_ALL_WAYS)
def test_a_preloaded_program_that_closes_every_descriptor_keeps_its_files_and_its_profile(hostile_plain, tmp_path,
                                                                                          how):
    """The same under `heaptype run`: the runtime preloaded, the program's close() and
    its kin replaced from the shared library. Main's 24-byte blocks are untyped there:
    the profile holds all 2,000 of them (no other block of that size is allocated)."""
    done, profile, files = close_all(hostile_plain, tmp_path, how, preload=True)
    assert done.returncode == 0 and done.stdout == "files intact\n", (done.stdout, done.stderr)
    assert files == {f"own{k}.txt": OWN_LINE for k in range(8)}
    assert profile.complete and profile.warnings == []
    assert profile.filter(sizes=(24, 24)).selected.allocations == 2000


def test_a_forked_child_that_gives_up_root_writes_its_profile(hostile, tmp_path):
    """A server started as root forks workers that give up root (nginx's become nobody:
    setgroups, setgid, setuid) before they allocate much. A forked child opens its profile
    with its first chunk, and a worker could no longer create it in the directory the
    master writes to: the server's work went unprofiled, said only in its error log. The
    child opens its profile before it gives up root (src/runtime/privilege_hooks.cpp)."""
    if os.geteuid() != 0:
        pytest.skip("the child gives up root: run as root (CI does)")
    directory = tmp_path / "profiles"
    directory.mkdir(mode=0o755)
    done = run_profiled(hostile, directory / "drop.%p.htp", "fork-drop", "300")
    assert (done.returncode, done.stdout, done.stderr) == (0, "dropped\n", "")
    profiles = [heaptype.load(path) for path in sorted(directory.glob("drop.*.htp"))]
    assert len(profiles) == 2
    for profile in profiles:
        assert profile.complete and profile.warnings == []
        assert allocations(profile, "Main") == (300, 0)


def test_a_retitled_programs_forked_child_keeps_its_name(hostile, tmp_path):
    """A server writes its process title over argv[0] ("nginx: master process ...") and
    forks its workers: %e in a worker's profile path was that title, slashes and all, and
    named no file that could be created; the profile named the title as the program. The
    name and the command line are the ones the process started with."""
    done = run_profiled(hostile, tmp_path / "t.%e.%p.htp", "retitle", "200")
    assert (done.returncode, done.stderr) == (0, "")
    paths = sorted(tmp_path.glob("t.*.htp"))
    assert [path.name.split(".")[1] for path in paths] == ["hostile", "hostile"], paths
    for path in paths:
        profile = heaptype.load(path)
        assert profile.complete and allocations(profile, "Main") == (200, 0)
        assert profile.argv == [str(hostile), "retitle", "200"]


def test_heaptype_run_passes_sigterm_on_to_the_program(hostile, tmp_path):
    """A service manager, `timeout` or `kill` stops the process it started: `heaptype
    run`, which ended at once and left the program running on, detached, with no
    summary. The program gets the signal (SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 too),
    stops as it would by itself, and its profile is finished."""
    output = tmp_path / "term.htp"
    run = subprocess.Popen([*HEAPTYPE, "run", "-o", str(output), "--", str(hostile), "wait-term", "500"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout.readline() == "waiting\n"
        run.send_signal(signal.SIGTERM)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    assert (run.returncode, stdout) == (0, "terminated\n"), stderr
    assert f"profile written to {output}" in stderr
    profile = heaptype.load(output)
    assert profile.complete and allocations(profile, "Main") == (500, 0)


def daemon_pid(ready: Path, deadline_s: float = 60) -> int:
    """The pid the daemon scenario writes once it waits for SIGTERM."""
    deadline = time.monotonic() + deadline_s
    while not ready.exists():
        assert time.monotonic() < deadline, f"the daemon never wrote {ready}"
        time.sleep(0.02)
    return int(ready.read_text().split()[0])


def wait_until_gone(pid: int, deadline_s: float = 60) -> None:
    deadline = time.monotonic() + deadline_s
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.02)


def test_heaptype_run_names_the_daemon_a_program_leaves_running(hostile, tmp_path):
    """A daemon's process returns at once and leaves the daemon proper running (nginx's
    `daemon on`): `heaptype run` listed the short first process's profile and said
    nothing of the process doing the work. It names it now, by pid, and says how to wait
    for it; the daemon's profile, finished when it exits, holds its objects exactly."""
    ready = tmp_path / "daemon.pid"
    done = subprocess.run([*HEAPTYPE, "run", "-o", str(tmp_path / "d.%p.htp"), "--", str(hostile), "daemon", "300",
                           str(ready)], capture_output=True, text=True, timeout=120)
    pid = daemon_pid(ready)
    try:
        assert done.returncode == 0, done.stderr
        assert (f"heaptype: 1 process the program started still runs in the background: pid {pid} (hostile); each "
                "profiled one writes its profile as it runs and finishes it when it exits (`heaptype run --wait` "
                "waits for such processes and lists their profiles)") in done.stderr.splitlines(), done.stderr
        assert Path(f"/proc/{pid}").exists()
    finally:
        os.kill(pid, signal.SIGTERM)
    wait_until_gone(pid)
    assert ready.read_text().split() == [str(pid), "terminated"]
    profile = heaptype.load(tmp_path / f"d.{pid}.htp")
    assert profile.complete and allocations(profile, "Main") == (300, 0)


def daemon_run_stopped(hostile: Path, options: list[str], n: int, ready: Path,
                       while_it_serves=lambda pid: None) -> tuple[int, subprocess.Popen, str, str]:
    """`heaptype run --wait OPTIONS` of the daemon scenario: once the daemon serves (and
    `while_it_serves(pid)` returned), SIGTERM to `heaptype run`, which must still be
    waiting. The daemon's pid, the finished run, its stdout and stderr."""
    run = subprocess.Popen([*HEAPTYPE, "run", "--wait", *options, "--", str(hostile), "daemon", str(n), str(ready)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = daemon_pid(ready)
        while_it_serves(pid)
        assert run.poll() is None, "heaptype run --wait returned while the daemon runs"
        run.send_signal(signal.SIGTERM)
        stdout, stderr = run.communicate(timeout=60)
    finally:
        run.kill()
    return pid, run, stdout, stderr


def test_heaptype_run_wait_stays_until_the_daemon_exits_and_passes_sigterm_on(hostile, tmp_path):
    """`heaptype run --wait` waits for what the program left in the background, passes
    SIGTERM on to it (a service manager stops `heaptype run`), and lists its profile."""
    ready = tmp_path / "daemon.pid"
    pid, run, stdout, stderr = daemon_run_stopped(hostile, ["-o", str(tmp_path / "d.%p.htp")], 400, ready)
    assert run.returncode == 0, stderr
    assert ready.read_text().split() == [str(pid), "terminated"]
    assert (f"heaptype: the program exited and left 1 process running in the background (pid {pid} (hostile)): "
            "waiting for it to exit") in stderr, stderr
    assert f"  {tmp_path / f'd.{pid}.htp'}" in stderr.splitlines()
    assert "still runs" not in stderr
    profile = heaptype.load(tmp_path / f"d.{pid}.htp")
    assert profile.complete and profile.end_cause == "exit" and allocations(profile, "Main") == (400, 0)


def test_heaptype_run_wait_watch_shows_what_the_daemon_holds(hostile, tmp_path):
    """`heaptype run --wait --watch`: once the program has gone into the background, the
    live view goes on with the daemon's profile. The process started allocates no Sig:
    the row comes from the daemon, which holds one while it waits."""

    def sig_shown(pid: int) -> None:
        held = tmp_path / f"w.{pid}.htp"
        deadline = time.monotonic() + 30
        while not (held.exists() and allocations(heaptype.load(held), "Sig") == (1, 1)):
            assert time.monotonic() < deadline, "the daemon's profile never showed its Sig"
            time.sleep(0.1)
        time.sleep(1.0)  # a few refreshes of the view after the daemon's profile holds it

    options = ["--watch", "--interval", "0.2", "-o", str(tmp_path / "w.%p.htp")]
    pid, run, stdout, stderr = daemon_run_stopped(hostile, options, 300, tmp_path / "daemon.pid", sig_shown)
    assert run.returncode == 0, stderr
    # │ Sig  │ 40 B │ 1 │ 1 │: live bytes, live blocks, allocations
    sig_rows = re.findall(r"^│ Sig +│ +(\S+ \S+) │ +(\d+) │ +(\d+) │$", stdout, re.MULTILINE)
    assert sig_rows and set(sig_rows) == {("40 B", "1", "1")}, stdout
    held = tmp_path / f"w.{pid}.htp"
    assert f"  {held}" in stderr.splitlines()
    assert allocations(heaptype.load(held), "Sig") == (1, 0)


def mode_line(path) -> str:
    report = subprocess.run([*HEAPTYPE, "report", str(path)], capture_output=True, text=True, check=True).stdout
    return next(line for line in report.splitlines() if line.startswith("  mode"))


def test_a_forked_childs_times_count_from_the_fork(hostile, tmp_path):
    """A child forked a second into the run: its times counted from the parent's start,
    so its profile began with a second of nothing (an nginx worker forked at 3.8 s) and
    its peak came after it. They count from the fork. The block of the parent's that the
    child frees is said in the report's mode line, not left unexplained."""
    done = run_profiled(hostile, tmp_path / "late.%p.htp", "late-fork", "100")
    assert done.returncode == 0, done.stderr
    profiles = [heaptype.load(path) for path in sorted(tmp_path.glob("late.*.htp"))]
    child, parent = sorted(profiles, key=lambda p: allocations(p, "Main"))
    assert allocations(child, "Main") == (100, 0) and allocations(parent, "Main") == (101, 0)
    assert child.totals.peak_time_us < 500_000 and parent.totals.peak_time_us >= 1_000_000
    # The Main, and whatever else of the parent's the C library frees in the child
    inherited = child.runtime_summary["untracked_frees"]
    assert inherited >= 1 and parent.runtime_summary["untracked_frees"] == 0
    mode_lines = [mode_line(profile.path) for profile in (child, parent)]
    assert mode_lines[0].endswith(f"; {inherited} frees of blocks from before the profile began ignored (a forked "
                                  "child's parent's, or allocated before the runtime started)"), mode_lines
    assert "before the profile began" not in mode_lines[1]
