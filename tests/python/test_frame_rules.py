"""Call paths through code built without frame pointers, at the scale of a large program.

A distribution's or a wheel's programs (cmake, compilers, servers) are built without frame
pointers: the walk steps over each of their frames by a rule the runtime learns once per
return address, from the function's call frame information or the unwinder
(src/runtime/frame_rules.hpp). tests/cpp/many_return_sites.cpp meets 4,000 return
addresses, more than the table's first size holds; the program counts the runtime's calls
to _Unwind_Backtrace and to _Unwind_Find_FDE (a CFI read). (A table that stopped taking
rules made every walk past its capacity a whole backtrace: cmake configuring a project ran
50x slower.)
"""

from __future__ import annotations

import os
import re
import subprocess

import heaptype
import pytest
from conftest import CPP_DIR, run_preloaded
from tooling import require_tool

SITES, ROUNDS = 4000, 4


def build_without_frame_pointers(tmp_path):
    exe = tmp_path / "many_return_sites"
    subprocess.run([require_tool("g++"), "-std=c++17", "-O2", "-fomit-frame-pointer", "-rdynamic",
                    str(CPP_DIR / "many_return_sites.cpp"), "-o", str(exe), "-ldl"],
                   check=True, capture_output=True, timeout=600)
    return exe


def paths_to(output, function):
    """{path of function names without their parameters: allocations} of the paths that
    end in `function`."""
    return {tuple(f.split("(")[0] for f in row.path): row.figures.allocations
            for row in heaptype.load(output).call_paths(infer=False) if row.path[-1].startswith(function + "(")}


def test_each_return_address_is_learned_once_and_every_path_is_whole(tmp_path):
    exe = build_without_frame_pointers(tmp_path)
    output = tmp_path / "sites.htp"
    done = run_preloaded(exe, output, str(ROUNDS), timeout=600)
    assert done.returncode == 0, done.stderr
    counts = dict(re.findall(r"(\w+)=(\d+)", done.stdout))
    assert (int(counts["sites"]), int(counts["rounds"])) == (SITES, ROUNDS)
    backtraces, lookups = int(counts["backtraces"]), int(counts["fde_lookups"])
    # Each site's rule read once from its CFI (main's and the C++ runtime's a few more), in
    # the first of the rounds; backtraces only for the frames the thread starts in, where
    # the CFI cannot say that the stack ends (it took one per site, 4,000, when every rule
    # was checked against the unwinder's).
    assert SITES <= lookups <= SITES + 50, lookups
    assert backtraces <= 20, backtraces
    paths = whole_site_paths(output)
    assert len(paths) == SITES and set(paths.values()) == {ROUNDS}


def build_linked(tmp_path, name, *frame_pointer_flags):
    """many_return_sites.cpp compiled with `heaptype --cflags` and the runtime linked in;
    `frame_pointer_flags` after the package's own (-fomit-frame-pointer: a module whose
    functions keep no frame record, as a prebuilt static library's)."""
    from heaptype.capture import flags
    exe = tmp_path / name
    subprocess.run([require_tool("g++"), "-std=c++17", "-O2", *flags.compile_flags(stl_types=False),
                    *frame_pointer_flags, str(CPP_DIR / "many_return_sites.cpp"), *flags.link_flags(), "-ldl",
                    "-o", str(exe)], check=True, capture_output=True, timeout=600)
    return exe


def run_linked(exe, output, *args):
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HEAPTYPE_OUTPUT": str(output)})


def whole_site_paths(output):
    """{site<I>: allocations} of the paths main > site<I>; fails on any other path to a site."""
    paths = {}
    for row in heaptype.load(output).call_paths(infer=False):
        leaf = row.path[-1]
        if re.fullmatch(r"Block\* site<\d+>\(\)", leaf):
            assert row.path[:-1] == ("main",), row.path
            paths[leaf] = row.figures.allocations
    return paths


@pytest.mark.parametrize("built", ["frame-pointers", "without-frame-pointers"])
def test_the_programs_own_call_sites_ask_the_unwinder_only_without_a_frame_record(tmp_path, built):
    """In a program built with `heaptype --cflags` (frame pointers) the first walk through
    each of its call sites reads the site's CFI, which says the function keeps a frame
    record there, and takes no backtrace (yaml-cpp's test suite took 2,469 backtraces, one
    per call site, 19% of its profiling's instructions). The same program built without
    frame pointers (the runtime linked in all the same) still asks the unwinder once per
    call site: its CFI says otherwise. The paths are whole either way."""
    flags = ["-fomit-frame-pointer", "-momit-leaf-frame-pointer"] if built == "without-frame-pointers" else []
    exe = build_linked(tmp_path, f"sites_{built}", *flags)
    output = tmp_path / "sites.htp"
    done = run_linked(exe, output, str(ROUNDS))
    assert done.returncode == 0, done.stderr
    counts = dict(re.findall(r"(\w+)=(\d+)", done.stdout))
    backtraces = int(counts["backtraces"])
    if built == "frame-pointers":
        assert backtraces <= 20, backtraces  # the C++ runtime's and libc's frames, not the sites'
    else:
        assert SITES <= backtraces <= SITES + 20, backtraces
    paths = whole_site_paths(output)
    assert len(paths) == SITES and set(paths.values()) == {ROUNDS}


def test_a_threads_first_function_called_deeper_keeps_its_callers(tmp_path):
    """Under `heaptype run`, every frame of a program built without frame pointers is
    stepped over by its rule, and the frames a thread starts in end the walk. worker()
    starts a thread and is called by main through relay() too: only libc's and
    libstdc++'s frames may be taken for a thread's start, or the rule learned for
    worker's call of helper() on the thread would end the main thread's walks there
    (tests/cpp/thread_helper.cpp)."""
    exe = tmp_path / "thread_helper"
    subprocess.run([require_tool("g++"), "-std=c++17", "-O2", "-fomit-frame-pointer", "-pthread",
                    str(CPP_DIR / "thread_helper.cpp"), "-o", str(exe)], check=True, capture_output=True, timeout=600)
    output = tmp_path / "thread.htp"
    done = run_preloaded(exe, output, timeout=600)
    assert done.returncode == 0, done.stderr
    paths = paths_to(output, "helper")
    assert paths == {("worker", "helper"): 3, ("main", "relay", "worker", "helper"): 3}


def test_a_stripped_programs_main_is_named(tmp_path):
    """A program without a symbol table (a wheel's cmake, a distribution's binaries) has
    its functions named by offset (`cut_walk+0x23a4`); glibc's __libc_start_call_main
    calls main and nothing else, so the frame after it in a walked path is named main.
    The program's other functions keep their offsets (tests/cpp/cut_walk.cpp, built
    with -s)."""
    exe = tmp_path / "cut_walk"
    subprocess.run([require_tool("g++"), "-std=c++17", "-O2", "-s", str(CPP_DIR / "cut_walk.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=600)
    output = tmp_path / "stripped.htp"
    done = run_preloaded(exe, output, "200", timeout=600)
    assert done.returncode == 0, done.stderr
    loop = [row.path for row in heaptype.load(output).call_paths(infer=False) if row.figures.allocations == 200]
    assert loop and all(path[0] == "main" and re.fullmatch(r"cut_walk\+0x[0-9a-f]+", path[1]) for path in loop), loop


def test_a_stripped_programs_static_constructors_are_not_main(tmp_path):
    """glibc's __libc_start_main runs the static constructors too (call_init, inlined
    into it), so only the frame __libc_start_call_main calls is named main: a stripped
    ninja_test had its 4,189 static-constructor allocations under main
    (tests/cpp/static_init.cpp, built with -s)."""
    exe = tmp_path / "static_init"
    subprocess.run([require_tool("g++"), "-O2", "-s", str(CPP_DIR / "static_init.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=600)
    output = tmp_path / "static.htp"
    done = run_preloaded(exe, output, timeout=600)
    assert done.returncode == 0, done.stderr
    roots = {row.figures.bytes: row.path[0] for row in heaptype.load(output).call_paths(infer=False)
             if row.figures.bytes in (1000, 2000)}
    assert roots[2000] == "main" and re.fullmatch(r"static_init\+0x[0-9a-f]+", roots[1000]), roots


def test_a_realigned_frame_is_stepped_over_by_its_call_frame_information(tmp_path):
    """GCC realigns the stack of a function with a local aligned past 16 bytes; its CFI
    gives the CFA as the word at rbp - 8 (DW_CFA_def_cfa_expression) and the caller's
    rbp as the word at rbp (DW_CFA_expression). The rule learned for it ended every
    walk there: the paths of tests/cpp/realigned.cpp, built without frame pointers and
    run under `heaptype run`, were rooted at realigned(long), as 57 of the 70 roots of
    rapidjson's unittest built with -march=native were."""
    exe = tmp_path / "realigned"
    subprocess.run([require_tool("g++"), "-O2", "-fomit-frame-pointer", str(CPP_DIR / "realigned.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=600)
    disassembly = subprocess.run([require_tool("objdump"), "-d", str(exe)], capture_output=True, text=True).stdout
    assert re.search(r"and\s+\$0xffffffffffffffe0,%rsp", disassembly)  # the realignment this is about
    output = tmp_path / "realigned.htp"
    done = run_preloaded(exe, output, timeout=600)
    assert done.returncode == 0, done.stderr
    paths = paths_to(output, "make")
    assert paths == {("main", "near_caller", "realigned", "make"): 3,
                     ("main", "far_caller", "realigned", "make"): 3}, paths


def test_a_replayed_walk_follows_the_stack_where_it_changed(tmp_path):
    """A walk through frames stepped over by their rules replays the last walk's steps from
    the first state both share, each step only where the words it read still hold what
    they held (src/runtime/call_context.cpp). tests/cpp/replayed_walks.cpp makes five
    allocations a round whose walks share the frames of one recursion, at the same stack
    addresses, and part above it: under another caller, through another function mid-way,
    one level less, and deeper than a walk keeps. Every path is its own, exactly; with
    the check of the words left out, 148 of 250 allocations were counted under
    main > from_a > descend x13. The deep one is cut after 96 callers in every round: the
    first cut there, the later ones before the same frame (the thread's anchor)."""
    exe = tmp_path / "replayed_walks"
    subprocess.run([require_tool("g++"), "-std=c++17", "-O2", "-fomit-frame-pointer",
                    str(CPP_DIR / "replayed_walks.cpp"), "-o", str(exe)], check=True, capture_output=True, timeout=600)
    output = tmp_path / "replayed.htp"
    rounds = 50
    done = run_preloaded(exe, output, str(rounds), timeout=600)
    assert done.returncode == 0, done.stderr
    # The recursion's innermost frames lay at one address under both callers: the walks
    # did reach a state the last one was in, below where they part.
    assert f"rounds={rounds} same_stack=1" in done.stdout, done.stdout
    paths = paths_to(output, "descend")
    cut = "(more callers: a walk keeps 64 to 128 frames)".split("(")[0]
    descend = ("descend",)
    assert paths == {
        ("main", "from_a") + descend * 13: rounds,
        ("main", "from_b") + descend * 13: rounds,
        ("main", "from_a") + descend * 6 + ("descend_other",) + descend * 6: rounds,
        ("main", "from_b") + descend * 12: rounds,
        (cut,) + descend * 97: rounds,
    }, {(len(path), path[:3], path[-3:]): n for path, n in paths.items()}


TWO_SITES_CPP = r"""#include <cstdlib>
__attribute__((noinline)) void* two_sites(int n) {
  void* a = std::malloc(100 + n);
  asm volatile("" : : "r"(a) : "memory");
  void* b = std::malloc(200 + n);
  asm volatile("" : : "r"(b) : "memory");
  std::free(a);
  return b;
}
int main() {
  for (int i = 0; i < 10; ++i) std::free(two_sites(i));
  return 0;
}
"""


def test_a_stripped_programs_function_is_one_function_by_its_start(tmp_path):
    """A stripped program's frames were named by their return address (`prog+0x1186`),
    so one function with two call sites was two "functions" in `--by function` (mariadbd:
    1,035 rows for 494 functions, up to 30 for one). They are named by the start of their
    function, from the call frame information the unwinder reads (.eh_frame_hdr): one row,
    at the address `nm` gives the function in the unstripped build."""
    source = tmp_path / "two_sites.cpp"
    source.write_text(TWO_SITES_CPP)
    full, stripped = tmp_path / "two_sites.full", tmp_path / "two_sites"
    subprocess.run([require_tool("g++"), "-O2", str(source), "-o", str(full)], check=True, capture_output=True)
    subprocess.run([require_tool("strip"), "-o", str(stripped), str(full)], check=True, capture_output=True)
    symbols = subprocess.run([require_tool("nm"), "-C", str(full)], capture_output=True, text=True).stdout
    start = next(int(line.split()[0], 16) for line in symbols.splitlines() if line.endswith(" two_sites(int)"))
    output = tmp_path / "two.htp"
    done = run_preloaded(stripped, output, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = {row.function: row.self.allocations for row in heaptype.load(output).by_function()
            if row.function.startswith("two_sites+0x")}
    assert rows == {f"two_sites+{start:#x}": 20}, rows
