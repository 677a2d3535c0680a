"""`heaptype run` profiles the process it starts and nothing else (issue 22): the
programs a build tool execs run without the runtime, print nothing of it and write no
profile, so CMake configures and g++ compiles exactly as without HeapType.
``--follow-children`` profiles each of them into a profile of its own and lists them.
The runtime writes nothing into a program's output; HEAPTYPE_LOG takes its messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import heaptype
from heaptype.capture import flags
from heaptype.run.runner import profiles_of_a_run_like, profiles_of_processes
from conftest import run_profiled
from tooling import missing, require_tool

HEAPTYPE = [sys.executable, "-m", "heaptype"]  # the CLI of the package under test


def elf_tool(name: str) -> str:
    """The first `name` on PATH that is an ELF program: `heaptype run` preloads only
    those (a shim script, as pyenv's, would be left alone)."""
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = Path(directory or ".") / name
        try:
            with open(candidate, "rb") as f:
                if f.read(4) == b"\x7fELF" and os.access(candidate, os.X_OK):
                    return str(candidate)
        except OSError:
            continue
    missing(f"no ELF program named {name} on PATH (Debian's {name})")


def heaptype_run(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    return subprocess.run([*HEAPTYPE, "run", *args], capture_output=True, text=True, cwd=cwd,
                          env={**environment, **(env or {})}, timeout=600)


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# --- CMake: compiler checks, try_run, execute_process ---------------------------------

CMAKE_PROJECT = r"""
cmake_minimum_required(VERSION 3.13)
project(probe CXX)
include(CheckCXXSourceCompiles)
include(CheckIncludeFileCXX)
check_cxx_source_compiles("#include <map>
int main() { std::map<int, int> m; m[1] = 2; return m.size() == 1 ? 0 : 1; }" HAVE_STD_MAP)
check_cxx_source_compiles("int main() { this does not compile; }" HAVE_NONSENSE)
check_include_file_cxx(vector HAVE_VECTOR_HEADER)
try_run(PROBE_RUNS PROBE_COMPILES ${CMAKE_BINARY_DIR}/probe ${CMAKE_SOURCE_DIR}/probe.cpp
        RUN_OUTPUT_VARIABLE PROBE_OUTPUT)
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -dumpversion OUTPUT_VARIABLE CXX_DUMPVERSION
                ERROR_VARIABLE CXX_DUMPVERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND uname -s OUTPUT_VARIABLE UNAME ERROR_VARIABLE UNAME)
execute_process(COMMAND sh -c "echo to-stdout; echo to-stderr 1>&2; ls ${CMAKE_SOURCE_DIR}"
                OUTPUT_VARIABLE CHILD_OUTPUT ERROR_VARIABLE CHILD_OUTPUT RESULT_VARIABLE CHILD_STATUS)
file(WRITE ${CMAKE_BINARY_DIR}/captured.cmake "set(UNAME [[${UNAME}]])\n")
include(${CMAKE_BINARY_DIR}/captured.cmake)  # the include that broke on a runtime message
file(WRITE ${CMAKE_BINARY_DIR}/captured.txt
     "probe: ${PROBE_COMPILES} ${PROBE_RUNS} [${PROBE_OUTPUT}]\ncxx: [${CXX_DUMPVERSION}]\n"
     "uname: [${UNAME}]\nchild ${CHILD_STATUS}: [${CHILD_OUTPUT}]\n")
configure_file(${CMAKE_SOURCE_DIR}/config.h.in ${CMAKE_BINARY_DIR}/config.h)
"""

CONFIG_H_IN = """#cmakedefine HAVE_STD_MAP 1
#cmakedefine HAVE_NONSENSE 1
#cmakedefine HAVE_VECTOR_HEADER 1
#define PROBE_RUNS @PROBE_RUNS@
"""

PROBE_CPP = """#include <cstdio>
#include <string>
#include <vector>
int main() {
  std::vector<std::string> words{"alpha", "beta", "gamma"};
  std::printf("%zu words\\n", words.size());
  std::fflush(stdout);
  std::fprintf(stderr, "probe on stderr\\n");
  return 3;
}
"""

GENERATED = ["config.h", "captured.txt", "captured.cmake"]


@pytest.fixture(scope="module")
def cmake_project(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("cmake-project")
    (source / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    (source / "config.h.in").write_text(CONFIG_H_IN)
    (source / "probe.cpp").write_text(PROBE_CPP)
    return source


def test_cmake_configures_under_run_as_without_it(cmake_project, tmp_path):
    """Debian's cmake preloaded: its compiler probes, try_run and execute_process
    children see nothing of the runtime; the generated files are the plain run's, byte
    for byte, and the run leaves exactly one profile, cmake's own."""
    cmake = elf_tool("cmake")
    plain_build, profiled_build, profiles = tmp_path / "plain", tmp_path / "profiled", tmp_path / "profiles"
    plain = subprocess.run([cmake, "-S", str(cmake_project), "-B", str(plain_build)], capture_output=True,
                           text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr
    profiled = heaptype_run("-o", str(profiles / "cm.htp"), "--", cmake, "-S", str(cmake_project),
                            "-B", str(profiled_build))
    assert profiled.returncode == 0, profiled.stderr
    captured = (plain_build / "captured.txt").read_text()
    assert "probe: TRUE 3 [3 words\nprobe on stderr\n]" in captured and "to-stderr" in captured
    for name in GENERATED:
        assert (profiled_build / name).read_bytes() == (plain_build / name).read_bytes(), name
    assert profiled.stderr.splitlines() == [
        f"heaptype: profile written to {profiles / 'cm.htp'} (runtime preloaded: the program does not link it)"]
    assert [p.name for p in profiles.iterdir()] == ["cm.htp"]
    profile = heaptype.load(profiles / "cm.htp")
    assert profile.complete and Path(profile.executable).name == "cmake" and profile.totals.allocations > 1000


# --- g++: the driver execs cc1plus and as ----------------------------------------------


def big_source(count: int = 120) -> str:
    """A few hundred lines of templates and containers: real work for cc1plus."""
    parts = ["#include <map>", "#include <string>", "#include <vector>", "#include <algorithm>",
             "template <int N> struct Fib { static constexpr long value = Fib<N - 1>::value + Fib<N - 2>::value; };",
             "template <> struct Fib<1> { static constexpr long value = 1; };",
             "template <> struct Fib<0> { static constexpr long value = 0; };",
             "template <class T, int N> struct Holder {",
             "  std::vector<T> items;",
             "  std::map<std::string, T> named;",
             "  T sum() const { T s{}; for (const T& x : items) s = s + x; return s; }",
             "  void add(const std::string& name, T v) { items.push_back(v); named[name] = v; }",
             "};"]
    for i in range(count):
        parts += [f"long work_{i}(int n) {{",
                  f"  Holder<long, {i}> h;",
                  f"  for (int k = 0; k < n; ++k) h.add(std::to_string(k * {i + 1}), k + Fib<{i % 40}>::value);",
                  "  std::sort(h.items.begin(), h.items.end());",
                  "  return h.sum() + static_cast<long>(h.named.size());",
                  "}"]
    parts.append("long all_work(int n) { long s = 0;")
    parts += [f"  s += work_{i}(n);" for i in range(count)]
    parts.append("  return s; }")
    return "\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def big_cpp(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.cpp"
    path.write_text(big_source())
    return path


def test_gxx_writes_the_same_object_file_under_run(big_cpp, tmp_path):
    cxx = elf_tool("g++")
    assert len(big_cpp.read_text().splitlines()) > 700
    plain = subprocess.run([cxx, "-O2", "-c", str(big_cpp), "-o", str(tmp_path / "plain.o")], capture_output=True,
                           text=True, timeout=600)
    assert plain.returncode == 0, plain.stderr
    out = tmp_path / "profiles"
    profiled = heaptype_run("-o", str(out / "gxx.htp"), "--", cxx, "-O2", "-c", str(big_cpp),
                            "-o", str(tmp_path / "profiled.o"))
    assert profiled.returncode == 0, profiled.stderr
    assert (tmp_path / "profiled.o").read_bytes() == (tmp_path / "plain.o").read_bytes()
    assert [p.name for p in out.iterdir()] == ["gxx.htp"]


SMALL_CPP = "#include <string>\nstd::string greet(int n) { return std::string(n, 'x') + \" and more text\"; }\n"


def test_follow_children_profiles_each_child_and_lists_them(tmp_path):
    """g++ -c execs cc1plus and as: a profile each, named <path>.<pid>, listed after
    the driver's own, each loading in `heaptype report`."""
    cxx = elf_tool("g++")
    (tmp_path / "small.cpp").write_text(SMALL_CPP)
    out = tmp_path / "profiles"
    done = heaptype_run("--follow-children", "-o", str(out / "cc.htp"), "--", cxx, "-O2", "-c", "small.cpp",
                        cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    children = sorted(p for p in out.iterdir() if p.name != "cc.htp")
    assert [p.name.rsplit(".", 1)[0] for p in children] == ["cc.htp", "cc.htp"]
    executables = [Path(heaptype.load(p).executable).name for p in children]  # as: x86_64-linux-gnu-as
    assert sorted(name.rsplit("-", 1)[-1] for name in executables) == ["as", "cc1plus"]
    assert done.stderr.splitlines() == [
        f"heaptype: profile written to {out / 'cc.htp'} (runtime preloaded: the program does not link it)",
        "heaptype: 2 more profiles, of the processes it started:",
        *[f"  {p}" for p in children]]
    for path in children:
        report = subprocess.run([*HEAPTYPE, "report", str(path)], capture_output=True, text=True)
        assert report.returncode == 0 and "allocations" in report.stdout, report.stderr


# --- fork without exec, and exec, of a plain program ------------------------------------

FORKS_CPP = r"""#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static long make(int n) {
  std::vector<std::string*> made;
  for (int i = 0; i < n; ++i) made.push_back(new std::string(100, 'x'));
  long size = 0;
  for (std::string* s : made) { size += s->size(); delete s; }
  return size;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "alone") == 0) return make(7) == 700 ? 0 : 1;
  if (argc > 2 && std::strcmp(argv[1], "many") == 0) {  // N forks that do not exec
    for (int i = 0, n = std::atoi(argv[2]); i < n; ++i)
      if (fork() == 0) _exit(make(3) == 300 ? 0 : 1);
    while (wait(nullptr) > 0) {
    }
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "printenv") == 0) {
    make(1);
    execlp("env", "env", static_cast<char*>(nullptr));
    return 127;
  }
  pid_t forked = fork();
  if (forked == 0) _exit(make(5) == 500 ? 0 : 1);  // a fork that does not exec
  int status = 0;
  waitpid(forked, &status, 0);
  pid_t execed = fork();
  if (execed == 0) {
    execl(argv[0], argv[0], "alone", static_cast<char*>(nullptr));
    _exit(127);
  }
  int exec_status = 0;
  waitpid(execed, &exec_status, 0);
  std::printf("children %d %d\n", WEXITSTATUS(status), WEXITSTATUS(exec_status));
  return static_cast<int>(make(3) / 300) - 1;
}
"""


@pytest.fixture(scope="module")
def forks(tmp_path_factory) -> Path:
    """A program built without HeapType that forks a child (no exec) and execs itself."""
    cxx = require_tool("g++")
    directory = tmp_path_factory.mktemp("forks")
    (directory / "forks.cpp").write_text(FORKS_CPP)
    subprocess.run([cxx, "-O2", "-g", str(directory / "forks.cpp"), "-o", str(directory / "forks")], check=True)
    return directory / "forks"


@pytest.mark.parametrize("follow", [False, True])
def test_a_fork_keeps_its_profile_and_an_exec_is_followed_only_when_asked(forks, tmp_path, follow):
    out = tmp_path / "profiles"
    done = heaptype_run(*(["--follow-children"] if follow else []), "-o", str(out / "f.htp"), "--", str(forks))
    assert done.returncode == 0 and done.stdout == "children 0 0\n", done.stderr
    others = sorted(p for p in out.iterdir() if p.name != "f.htp")
    assert len(others) == (2 if follow else 1)
    assert sorted(heaptype.load(p).argv[1:] for p in others) == ([[], ["alone"]] if follow else [[]])
    assert all(p.name.startswith("f.htp.") for p in others)
    assert f"heaptype: {len(others)} more profile{'s' if follow else ''}, of the processes it started:" \
        in done.stderr.splitlines()


def test_a_shell_that_execs_the_program_leaves_both_profiles_listed(forks, tmp_path):
    """`bash -c 'exec program'` under --follow-children with a %p pattern: the shell and
    the program it execs have one pid, so one name; the shell's profile, finished at the
    exec, moves to <path>.<pid> (docs/modes.md, "Exec") and is listed after the
    program's (gdb starting its inferior did this, and the shell's went unlisted)."""
    bash = elf_tool("bash")
    done = heaptype_run("--follow-children", "-o", str(tmp_path / "w.%p.htp"), "--", bash, "-c", f"exec {forks} alone")
    assert done.returncode == 0, done.stderr
    [program] = tmp_path.glob("w.*.htp")
    [shell] = tmp_path.glob("w.*.htp.*")
    assert shell.name == f"{program.name}.{heaptype.load(program).pid}"
    assert heaptype.load(program).argv == [str(forks), "alone"]
    assert Path(heaptype.load(shell).executable).name == "bash" and heaptype.load(shell).end_cause == "exec"
    assert done.stderr.splitlines() == [
        f"heaptype: profile written to {program} (runtime preloaded: the program does not link it)",
        "heaptype: 1 more profile, of the processes it started:",
        f"  {shell}"]


def test_follow_children_on_a_wrapper_script_profiles_what_it_starts(forks, tmp_path):
    """A server's wrapper script (mariadbd-safe) under `--follow-children`: the runtime went
    into programs only, so the script and what it started ran unprofiled, said only when
    the server had exited. Following a script's children preloads the runtime into its
    interpreter, which passes it on."""
    wrapper = tmp_path / "wrapper.sh"
    wrapper.write_text(f"#!/bin/sh\n{forks} alone\nexec {forks} alone\n")
    wrapper.chmod(0o755)
    done = heaptype_run("--follow-children", "-o", str(tmp_path / "w.%p.htp"), "--", str(wrapper))
    assert done.returncode == 0, done.stderr
    runs = [heaptype.load(path) for path in tmp_path.glob("w.*.htp*")]
    assert sorted(p.argv for p in runs if Path(p.executable) == forks) == [[str(forks), "alone"]] * 2
    assert all(p.complete for p in runs)
    assert "(runtime preloaded: the program does not link it)" in done.stderr


def test_a_run_of_many_processes_lists_their_profiles_by_name(forks, tmp_path):
    """A build starts hundreds of processes: past ten profiles, `heaptype run` lists
    each name with its pid as `*` (a glob for `heaptype report`) and how many."""
    out = tmp_path / "profiles"
    done = heaptype_run("-o", str(out / "f.%p.htp"), "--", str(forks), "many", "12")
    assert done.returncode == 0, done.stderr
    assert len(list(out.iterdir())) == 13
    lines = done.stderr.splitlines()
    assert lines[1:] == ["heaptype: 12 more profiles, of the processes it started (1 name, the pids as *):",
                         f"     12  {out / 'f.*.htp'}"]


def preload_variables(env_output: str) -> list[str]:
    return [line for line in env_output.splitlines() if line.startswith(("LD_PRELOAD=", "HEAPTYPE_CHILDREN="))]


@pytest.mark.parametrize("follow", [False, True])
def test_children_inherit_the_other_preloads_only(forks, tmp_path, follow):
    """The runtime's entry leaves LD_PRELOAD; the user's own entries stay, in order,
    with their separators."""
    done = heaptype_run(*(["--follow-children"] if follow else []), "-o", str(tmp_path / "p.htp"), "--",
                        str(forks), "printenv", env={"LD_PRELOAD": "libm.so.6 libdl.so.2"})
    assert done.returncode == 0, done.stderr
    runtime = Path(flags.lib_dir()) / "libheaptype.so"
    expected = ([f"LD_PRELOAD={runtime}:libm.so.6 libdl.so.2", "HEAPTYPE_CHILDREN=profiled"] if follow else
                ["LD_PRELOAD=libm.so.6 libdl.so.2"])
    assert sorted(preload_variables(done.stdout)) == sorted(expected)


def test_a_program_run_without_ld_preload_has_none_set(forks, tmp_path):
    """`heaptype run` puts the runtime into LD_PRELOAD, and the runtime takes itself out:
    where the variable was unset, the program (and what it execs) finds it unset, not
    set and empty (a program that refuses to be preloaded into asks getenv()), and
    HEAPTYPE_CHILDREN is gone too."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_") and k != "LD_PRELOAD"}
    done = subprocess.run([*HEAPTYPE, "run", "-o", str(tmp_path / "u.htp"), "--", str(forks), "printenv"],
                          capture_output=True, text=True, env=environment, timeout=600)
    assert done.returncode == 0, done.stderr
    assert preload_variables(done.stdout) == [], done.stdout


# --- the runtime's messages ------------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(cpp_programs):
    return cpp_programs.program("hostile")


def test_heaptype_log_takes_the_runtimes_messages(hostile, tmp_path):
    """A program built with HeapType: its messages (a mismatched free, a setting not
    understood) go to HEAPTYPE_LOG's file, none to its stderr; without HEAPTYPE_LOG
    they go nowhere."""
    log = tmp_path / "runtime.log"
    env = {"HEAPTYPE_LOG": str(log), "HEAPTYPE_CALLSTACK": "sideways"}
    done = run_profiled(hostile, tmp_path / "free.htp", "free-array", "4", env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "freed=4\n", "")
    assert log.read_text() == (
        "heaptype: HEAPTYPE_CALLSTACK=sideways: unknown mode (auto, instrument, frame-pointer, unwind, none); "
        "using auto\n"
        "heaptype: mismatched free() / delete of an array made with new[]: the pointer is past the array's "
        "cookie; the block is freed (use delete[])\n")
    quiet = run_profiled(hostile, tmp_path / "quiet.htp", "free-array", "4", env={"HEAPTYPE_CALLSTACK": "sideways"})
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "freed=4\n", "")


def test_heaptype_run_shows_the_runtimes_messages_after_the_run(hostile, tmp_path):
    output = tmp_path / "free.htp"
    done = heaptype_run("-o", str(output), "--", str(hostile), "free-array", "2")
    assert (done.returncode, done.stdout) == (0, "freed=2\n")
    assert done.stderr.splitlines() == [
        "heaptype: mismatched free() / delete of an array made with new[]: the pointer is past the array's "
        "cookie; the block is freed (use delete[])",
        f"heaptype: profile written to {output}"]
    assert list(tmp_path.iterdir()) == [output]


def test_a_profile_that_cannot_be_created_goes_to_the_log_when_there_is_one(hostile, tmp_path):
    log = tmp_path / "runtime.log"
    output = tmp_path / "missing-dir" / "out.htp"
    done = run_profiled(hostile, output, "alone", "3", env={"HEAPTYPE_LOG": str(log)})
    assert (done.returncode, done.stderr) == (0, "")
    assert log.read_text() == (f"heaptype: cannot create the profile file {output}: No such file or directory; "
                               "the program runs unprofiled\n")


def test_profile_names_with_glob_characters_match_only_themselves(tmp_path):
    # `-o` is a path, not a glob: its `[1]` is literal; only %p and %e stand for a part.
    for name in ["run[1].7.htp", "run[1].8.htp", "run1.7.htp", "run[1].htp", "run[1].htp.9", "x%p.htp", "x7.htp"]:
        (tmp_path / name).write_bytes(b"")
    assert profiles_of_processes(str(tmp_path / "run[1].%p.htp"), [7]) == [tmp_path / "run[1].7.htp"]
    assert profiles_of_a_run_like(str(tmp_path / "run[1].%p.htp")) == {tmp_path / "run[1].7.htp",
                                                                      tmp_path / "run[1].8.htp"}
    assert profiles_of_processes(str(tmp_path / "run[1].htp"), [9]) == [tmp_path / "run[1].htp.9"]
    # "%%p" is a percent sign and a p, read from the left as the runtime reads it.
    assert profiles_of_a_run_like(str(tmp_path / "x%%p.htp")) == {tmp_path / "x%p.htp"}
    assert profiles_of_processes(str(tmp_path / "x%%p.htp"), [7]) == []
