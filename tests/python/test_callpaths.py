"""Call paths against exactly known truth (issue 3, acceptance points 1 and 2).

* tests/cpp/callpaths_known.cpp: direct and recursive calls, an exception thrown
  through three instrumented frames, a longjmp over three, a function inlined into
  its caller, four threads with different paths; every allocation must be on its
  path, with exact counts (the table in the program's header comment), built both
  ways: the default (frame pointers walked at each allocation) and with
  -finstrument-functions. The truth is the same; one difference in how it shows:
  GCC inlines make_and_free<T> and inline_helper(). The hooks still run for them
  (GCC instruments inlined functions), so the instrumented build has them as
  frames named by their symbol; a walked stack has only real frames, and the
  symbolizer recovers the inlined ones from DWARF at the return address
  (``inlined=True``), named as DWARF names them (``make_and_free<Direct>``, without
  return type and parameters). Paths are compared with names reduced to that;
* alloc_bench (../shared/bench): make_deep<T> (9 recursive frames) and make_obj<T>
  (called directly) are distinct paths, with the counts the program's own PRNG
  implies, replayed here;
* tests/cpp/callpaths_infer.cpp: untyped allocations from the standard library get
  a type inferred from the allocator frames at their call site, marked inferred in
  every report.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

import heaptype

from callpath_programs import ALLOC_BENCH_ARGS, callpath_programs  # noqa: F401 (fixture)
from heaptype import _core
from heaptype.analyze.patterns import matches_any

MAKE = "void make_and_free<{}>()"

# type -> {path: allocations}: the header comment of callpaths_known.cpp.
KNOWN = {
    "Direct": {("main", "direct_outer()", "direct_inner()", MAKE.format("Direct")): 5,
               ("main", "direct_inner()", MAKE.format("Direct")): 3},
    "Recursed": {("main", *["recurse(int)"] * k, MAKE.format("Recursed")): 2 for k in range(1, 6)},
    "BeforeThrow": {("main", "catcher()", "thrower1()", "thrower2()", "thrower3()",
                     MAKE.format("BeforeThrow")): 2},
    "AfterCatch": {("main", "catcher()", MAKE.format("AfterCatch")): 2},
    "AfterCatchCall": {("main", "catcher()", "after_catch_call()", MAKE.format("AfterCatchCall")): 2},
    "BeforeJump": {("main", "jumper()", "jump1()", "jump2()", "jump3()", MAKE.format("BeforeJump")): 2},
    "AfterJump": {("main", "jumper()", MAKE.format("AfterJump")): 2},
    "AfterJumpCall": {("main", "jumper()", "after_jump_call()", MAKE.format("AfterJumpCall")): 2},
    "Inlined": {("main", "inline_caller()", "inline_helper()", MAKE.format("Inlined")): 4},
    "ThreadA": {("worker_a()", "a_leaf()", MAKE.format("ThreadA")): 10},
    "ThreadB": {("worker_b()", "b_mid()", "b_leaf()", MAKE.format("ThreadB")): 20},
    "ThreadC": {("worker_c()", "c_rec(int)", "c_rec(int)", "c_rec(int)", MAKE.format("ThreadC")): 30},
    "ThreadD": {("worker_d()", MAKE.format("ThreadD")): 40},
}
SIZES = {"Direct": 16, "Recursed": 24, "BeforeThrow": 40, "AfterCatch": 48, "AfterCatchCall": 56,
         "BeforeJump": 64, "AfterJump": 72, "AfterJumpCall": 80, "Inlined": 88, "ThreadA": 96,
         "ThreadB": 104, "ThreadC": 112, "ThreadD": 120}


def heaptype_command() -> list[str]:
    path = shutil.which("heaptype")
    return [path] if path else [sys.executable, "-m", "heaptype"]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([*heaptype_command(), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def paths_by_type(profile, **options) -> dict[str, dict[tuple, int]]:
    out: dict[str, dict[tuple, int]] = {}
    for row in profile.call_paths(**options):
        out.setdefault(row.type_label, {})[row.path] = row.allocations
    return out


# The builds of callpaths_known.cpp, and the options under which their paths show
# the frames of KNOWN (see the top).
BUILDS = {"known": {"inlined": True}, "known-instrument": {}}
MAKE_FRAME = {"known": "make_and_free<{}>", "known-instrument": MAKE}


def canonical(paths: dict[tuple, int]) -> dict[tuple, int]:
    """Paths with every frame's name reduced to DWARF's form of inlined functions."""
    return {tuple(_core.strip_parameters(f) for f in path): n for path, n in paths.items()}


@pytest.fixture(scope="module", params=list(BUILDS), ids=["frame-pointer", "instrument"])
def known_build(request, callpath_programs):
    return request.param, callpath_programs.load(request.param)


@pytest.fixture(scope="module")
def known(known_build):
    return known_build[1]


@pytest.fixture(scope="module")
def known_options(known_build):
    return BUILDS[known_build[0]]


@pytest.fixture(scope="module")
def make_frame(known_build):
    """The name of make_and_free<T>'s frame in this build's trees."""
    return MAKE_FRAME[known_build[0]]


# --- 1. exactly known call paths -----------------------------------------------------

def test_every_allocation_is_on_its_path(known, known_options):
    paths = paths_by_type(known, **known_options)
    assert {t: canonical(paths.get(t, {})) for t in KNOWN} == {t: canonical(p) for t, p in KNOWN.items()}
    for row in known.call_paths(types=list(KNOWN)):
        assert row.bytes == row.allocations * SIZES[row.type], row
        assert row.objects == row.allocations and row.live_bytes == 0


def test_exception_object_is_allocated_below_the_throwing_frames(known, known_options):
    # __cxa_allocate_exception (libstdc++.so, built without frame pointers and not
    # instrumented) is the frame that calls malloc: the call site adds it below the
    # hooks' frames, and a walk steps over it by its unwind rule to find thrower3().
    # The throw types the block (Oops): the retyping keeps the allocation's path.
    paths = paths_by_type(known, **known_options)["Oops"]
    path = ("main", "catcher()", "thrower1()", "thrower2()", "thrower3()", "__cxa_allocate_exception")
    assert paths.get(path) == 2, paths


def test_start_up_allocation_keeps_its_call_site(callpath_programs):
    # libstdc++ allocates its emergency exception pool from ld.so's _dl_init, before
    # main and before any hook: a walked stack wholly in ld.so and libstdc++.so, that
    # reaches no entry function (_start, start_thread): every frame found stays.
    profile = callpath_programs.load("known")
    assert all(row.path and row.path != ("(no call site)",) for row in profile.call_paths())
    pool = [row for row in profile.call_paths() if row.type_label == "libstdc++: emergency exception pool"]
    assert len(pool) == 1 and pool[0].path[-1].startswith("libstdc++")


def test_a_walk_goes_through_a_runtime_library_without_frame_pointers(cpp_programs, tmp_path):
    """A stack that leaves the program for libstdc++'s compiled code (built without frame
    pointers, tests/cpp/cut_walk.cpp: std::put_time into an ostringstream, which grows the
    stream's string) and comes back: the frame-pointer walk steps over libstdc++'s frames
    by their rules and goes on to main. It used to stop in std::time_put<...>::do_put,
    which then showed as "(no call site)" (fmt's chrono-test: 84% of its bytes)."""
    from conftest import run_profiled

    output = tmp_path / "cut.htp"
    done = run_profiled(cpp_programs.program("cut_walk"), output, "200")
    assert done.returncode == 0, done.stderr
    rows = {row.path: row.figures.allocations for row in heaptype.load(output).call_paths()
            if row.type_label == "char[] of std::string"}
    through = [path for path in rows if any("time_put" in f and "::do_put(" in f for f in path)]
    assert len(through) == 1 and rows[through[0]] == 200
    path = through[0]
    assert path[0] == "main" and path[1].startswith("long_date") and "::put(" in path[2] and "::do_put(" in path[3]


def build_with_stale_slot_lib(cpp_programs, tmp_path, name: str):
    """tests/cpp/<name>.cpp built with HeapType against tests/cpp/stale_slot_lib.S, a
    shared library outside the program's module (its frames are stepped over by rules)."""
    from conftest import CPP_DIR

    cxx = cpp_programs.cxx
    subprocess.run([cxx, "-shared", "-fPIC", str(CPP_DIR / "stale_slot_lib.S"), "-o", str(tmp_path / "libstale.so")],
                   check=True, capture_output=True)
    program = tmp_path / name
    subprocess.run([cxx, "-O2", "-g", *cpp_programs.compile_flags(), str(CPP_DIR / f"{name}.cpp"),
                    f"-L{tmp_path}", "-lstale", f"-Wl,-rpath,{tmp_path}", *cpp_programs.link_flags(),
                    "-o", str(program)], check=True, capture_output=True)
    return program


def test_a_saved_frame_pointer_is_read_where_the_call_frame_information_puts_it(cpp_programs, tmp_path):
    """A function outside the program's module that saved its caller's rbp and reused the
    register (tests/cpp/stale_slot_lib.S), whose frame also holds a copy of that rbp in a
    local slot at the first call only. The rule learned at that call used to take the
    first slot holding the value, the stale one: every later walk read a wrong frame
    pointer there and lost main and relay() (fmt's chrono-test: 20,784 tzset allocations
    under glibc's __tz_convert rooted at the test body). The call frame information
    names the pushed slot."""
    from conftest import run_profiled

    program = build_with_stale_slot_lib(cpp_programs, tmp_path, "stale_slot")
    output = tmp_path / "stale.htp"
    done = run_profiled(program, output, "100")
    assert done.returncode == 0 and done.stdout.strip() == "101", done.stderr
    paths = {row.path: row.figures.allocations for row in heaptype.load(output).call_paths()
             if row.type_label == "Item"}
    assert paths == {("main", "relay(long)", "call_with_stale_slot", "allocate()"): 101}, paths


def test_a_walk_deeper_than_its_buffer_stops_at_its_end(cpp_programs, tmp_path):
    """Recursions deeper than a walk keeps (128 return addresses) whose frames alternate
    between the program's functions and a library function stepped over by its frame
    rule (tests/cpp/deep_mixed.cpp): at some depth the rule steps fill the buffer right
    before a frame with a frame pointer, and the frame-pointer loop wrote on past it,
    over the runtime's saved registers (GCC's cc1plus crashed so under `heaptype run`).
    Every depth runs to the end. A path that fits in 128 callers is whole; one cut keeps
    64 to 127 of its innermost callers and starts with a frame that says so (else it would
    look like a path that starts there). Cut paths end where the last one ended, before
    the same frame (the thread's anchor): as the stack grows or shrinks by a level (two
    frames) or by the one frame further, the window grows or shrinks with it, from 96
    callers at the first cut to 127 (up) or 64 (down). With a window of a fixed size,
    every cut path of a recursion was a new path, 129 tree lookups each."""
    from conftest import run_profiled

    cut = "(more callers: a walk keeps 64 to 128 frames)"
    program = build_with_stale_slot_lib(cpp_programs, tmp_path, "deep_mixed")
    windows = {("50", "80"): range(98, 130), ("80", "50"): range(66, 99), ("80", "50", "further"): range(66, 99)}
    for order, lengths in windows.items():
        output = tmp_path / f"deep-{'-'.join(order)}.htp"
        done = run_profiled(program, output, *order)
        assert done.returncode == 0 and done.stdout.strip() == str(31 * 2), (done.returncode, done.stderr[-2000:])
        paths = [row.path for row in heaptype.load(output).call_paths() if row.type_label == "Leaf"]
        whole = [path for path in paths if path[0] == "main"]
        assert whole and max(len(path) for path in whole) == 128  # the shallow ones reach main
        # Cut, or whole. Deepest first, the unwinder's backtrace (160 frames) ended in the
        # recursion: a rule guessed for its last frame ended later walks there.
        assert all(path[0] in ("main", cut) for path in paths), sorted({p[:2] for p in paths})
        # The marker, 64 to 127 callers, the allocating function.
        cut_lengths = {len(path) for path in paths if path[0] == cut}
        assert set(lengths) <= cut_lengths and min(cut_lengths) >= 66 and max(cut_lengths) <= 129, sorted(cut_lengths)


def test_a_thread_started_with_a_lambda_is_rooted_where_the_lambda_runs(cpp_programs, tmp_path):
    """std::thread's machinery (libstdc++'s execute_native_thread_routine, the program's
    _State_impl::_M_run and what is inlined into it) is left out of a thread's paths, so
    that a thread started with a function is rooted at that function. A lambda is
    inlined into _M_run: leaving that frame out rooted the thread's paths at what the
    lambda called (spdlog's thread pool: 40% of its bytes under flush_() and
    process_next_msg_() as if they had no caller). tests/cpp/thread_lambda.cpp."""
    from conftest import run_profiled

    output = tmp_path / "lambda.htp"
    done = run_profiled(cpp_programs.program("thread_lambda"), output)
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(output)
    paths = {row.path: row.figures.allocations for row in profile.call_paths() if row.type_label == "Job"}
    lambda_run = "std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#1}> > >::_M_run()"
    assert paths == {(lambda_run, "work(int)"): 7, ("work(int)",): 5, ("main", "work(int)"): 3}, paths
    inlined = {row.path: row.figures.allocations for row in profile.call_paths(inlined=True) if row.type_label == "Job"}
    assert {path[0]: n for path, n in inlined.items()} == {lambda_run: 7, "work(int)": 5, "main": 3}
    # Each thread's state, allocated by main and deleted by the thread as it ends, while
    # on probation in main (its type comes from its call site, not a new-expression):
    # main releases it at exit. It was "live at exit" in every program starting threads.
    state = [row.figures for row in profile.call_paths() if row.type_label == "libstdc++: std::thread state"]
    assert (sum(f.allocations for f in state), sum(f.live_bytes for f in state)) == (2, 0)


def test_threads_are_merged_by_frame_not_by_thread(known):
    root = known.call_tree(types=["Thread*"])
    assert sorted(c.name for c in root.children) == ["worker_a()", "worker_b()", "worker_c()", "worker_d()"]
    assert {c.name: c.total.allocations for c in root.children} == {
        "worker_a()": 10, "worker_b()": 20, "worker_c()": 30, "worker_d()": 40}
    # Each thread had its own tree in the profile.
    threads = {g.thread: g.allocations for g in known.filter(types="Thread*").by_thread() if g.allocations}
    assert sorted(threads.values()) == [10, 20, 30, 40]


def test_top_down_tree_totals_and_types(known, known_options, make_frame):
    main = known.call_tree(types=["Direct", "Recursed"], **known_options).child("main")
    assert main.total.allocations == 8 + 10
    outer = main.find("direct_outer()", "direct_inner()", make_frame.format("Direct"))
    assert outer.self.allocations == 5
    assert [(c.kind, c.name, c.total.allocations) for c in outer.children] == [("type", "Direct", 5)]
    chain = main
    for depth in range(1, 6):
        chain = chain.child("recurse(int)")
        assert chain.total.allocations == 2 * (6 - depth)  # this level and every deeper one
        assert chain.child(make_frame.format("Recursed")).self.allocations == 2


def test_bottom_up_tree(known, known_options, make_frame):
    root = known.call_tree(types="Direct", bottom_up=True, **known_options)
    assert [c.name for c in root.children] == [make_frame.format("Direct")]
    leaf = root.child(make_frame.format("Direct"))
    inner = leaf.child("direct_inner()")
    assert leaf.total.allocations == inner.total.allocations == 8
    assert {c.name: c.total.allocations for c in inner.children} == {"direct_outer()": 5, "main": 3}
    assert inner.find("direct_outer()", "main").total.allocations == 5


def test_by_function_self_and_total(known, make_frame):
    rows = {r.function: r for r in known.by_function(types=["Direct", "Recursed"])}
    assert rows[make_frame.format("Direct")].self.allocations == 8
    assert rows["direct_inner()"].self.allocations == 0 and rows["direct_inner()"].total.allocations == 8
    assert rows["direct_outer()"].total.allocations == 5
    # Recursion: each allocation counts once in the function's total however deep it is.
    assert rows["recurse(int)"].total.allocations == 10
    assert rows["main"].total.allocations == 18


def test_type_patterns(known):
    assert {r.type for r in known.call_paths(types="Thread?")} == {"ThreadA", "ThreadB", "ThreadC", "ThreadD"}
    # One glob dialect with budget files: brackets stand for themselves (type names hold them).
    assert known.call_paths(types="Thread[AB]") == []
    assert {r.type for r in known.call_paths(types=["After*", "Direct"])} == {
        "AfterCatch", "AfterCatchCall", "AfterJump", "AfterJumpCall", "Direct"}
    assert all(r.type is None for r in known.call_paths(types="(untyped)"))
    assert known.call_paths(types="NoSuchType") == []


def test_walked_stacks_give_the_same_paths(callpath_programs):
    """HEAPTYPE_CALLSTACK=frame-pointer: the instrumented program, paths from the
    frame pointer chain instead of the hooks (shown from main on)."""
    profile = callpath_programs.load("known-instrument", "frame-pointer")

    def without_helper(paths):
        # make_and_free<T> is inlined or not as the compiler sees fit (without the
        # hooks GCC keeps it out of line on the cold path before a throw): only the
        # frames the program forces count.
        out = Counter()
        for path, n in paths.items():
            out[tuple(f for f in path if "make_and_free<" not in f)] += n
        return dict(out)

    paths = paths_by_type(profile)
    for type_name in ("Direct", "Recursed", "BeforeThrow", "AfterCatch", "BeforeJump", "AfterJump"):
        expected = {path[:-1]: n for path, n in KNOWN[type_name].items()}
        assert without_helper(paths.get(type_name, {})) == expected, type_name
    inlined = paths_by_type(profile, inlined=True)
    assert inlined["Direct"] == {("main", "direct_outer()", "direct_inner()", "make_and_free<Direct>"): 5,
                                 ("main", "direct_inner()", "make_and_free<Direct>"): 3}


# --- 2. alloc_bench: make_deep<T> and make_obj<T> ------------------------------------

def alloc_bench_truth(n: int) -> Counter:
    """(type, deep) -> allocations, by the benchmark's own xorshift64 sequence."""
    mask = (1 << 64) - 1
    state = 0x9E3779B97F4A7C15
    counts: Counter = Counter()
    for _ in range(n):
        state ^= (state << 13) & mask
        state ^= state >> 7
        state ^= (state << 17) & mask
        counts[(("Small", "Medium", "Large")[state % 3], bool((state >> 8) & 1))] += 1
    return counts


# make_deep<T>(8, i) recurses down to make_deep<T>(0, i), which tail-calls
# make_obj<T>: the default build jumps, so its stack holds eight make_deep frames;
# -finstrument-functions keeps the call (the exit hook runs after it): nine.
DEEP_FRAMES = {"alloc_bench": 8, "alloc_bench-instrument": 9}
ALLOC_BENCH_BUILDS = pytest.mark.parametrize("build", list(DEEP_FRAMES), ids=["frame-pointer", "instrument"])


@ALLOC_BENCH_BUILDS
def test_alloc_bench_deep_and_direct_paths(callpath_programs, build):
    profile = callpath_programs.load(build)
    truth = alloc_bench_truth(int(ALLOC_BENCH_ARGS[0]))
    stderr = callpath_programs.stderr(build)
    for name in ("Small", "Medium", "Large"):  # the program's own counts agree with the replay
        assert f"{name}={truth[(name, True)] + truth[(name, False)]}" in stderr
    paths = paths_by_type(profile)
    for name in ("Small", "Medium", "Large"):
        obj = f"{name}* make_obj<{name}>(unsigned long)"
        deep = f"{name}* make_deep<{name}>(int, unsigned long)"
        expected = {
            ("main", "phase_objects(unsigned long)", obj): truth[(name, False)],
            ("main", "phase_objects(unsigned long)", *[deep] * DEEP_FRAMES[build], obj): truth[(name, True)],
        }
        assert paths[name] == expected


@ALLOC_BENCH_BUILDS
def test_alloc_bench_report_json(callpath_programs, build):
    path = str(callpath_programs.profile_path(build))
    truth = alloc_bench_truth(int(ALLOC_BENCH_ARGS[0]))
    report = json.loads(run_cli("report", path, "--by", "callpath", "--type", "Small", "--format", "json").stdout)
    assert report["direction"] == "top-down"
    (main,) = report["tree"]
    (phase,) = main["children"]
    assert (main["frame"], phase["frame"]) == ("main", "phase_objects(unsigned long)")
    assert phase["allocations"] == truth[("Small", False)] + truth[("Small", True)]
    # The paths' leaves are the type: one directly under make_obj, one under nine make_deep frames.
    leaves, stack = [], [(node, 0) for node in phase["children"]]
    while stack:
        node, depth = stack.pop()
        if "type" in node:
            leaves.append((depth, node["type"], node["allocations"], node["peak_bytes"] <= node["bytes"]))
        stack += [(child, depth + 1) for child in node["children"]]
    deep = DEEP_FRAMES[build] + 1
    assert sorted(leaves) == [(1, "Small", truth[("Small", False)], True), (deep, "Small", truth[("Small", True)], True)]


@ALLOC_BENCH_BUILDS
def test_report_text_views(callpath_programs, build):
    path = str(callpath_programs.profile_path(build))
    tree = run_cli("report", path, "--by", "callpath", "--type", "Medium").stdout
    assert f"Medium* make_deep<Medium>(int, unsigned long) (x{DEEP_FRAMES[build]}, recursive)" in tree
    assert "[Medium]" in tree and "[Small]" not in tree
    bottom = run_cli("report", path, "--by", "callpath", "--bottom-up", "--type", "Large", "--top", "1").stdout
    lines = [line for line in bottom.splitlines() if "make_obj<Large>" in line]
    assert lines and lines[0].split()[-3:] == ["Large*", "make_obj<Large>(unsigned", "long)"]
    functions = run_cli("report", path, "--by", "function", "--top", "3").stdout
    assert "self bytes" in functions and "total bytes" in functions
    assert "Large* make_obj<Large>(unsigned long)" in functions
    types = run_cli("report", path, "--type", "S*").stdout
    rows = [line.split()[0] for line in types.splitlines()[types.splitlines().index("") + 1:] if line.strip()]
    assert rows[0] == "type" and "Small" in rows and "Medium" not in rows
    wrong = subprocess.run([*heaptype_command(), "report", path, "--bottom-up"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "--by callpath" in wrong.stderr


# --- inferred types ----------------------------------------------------------------------

INFERRED = {
    # type: (allocations, objects, bytes)
    "Foo": (4, 15, 300),
    "Bar": (4, 7, 168),
    "std::_Sp_counted_ptr_inplace<Bar, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>": (1, 1, 40),
    "std::_Rb_tree_node<std::pair<int const, Bar>>": (3, 3, 192),
    "char[] of std::string": (1, 41, 41),
}


@pytest.fixture(scope="module")
def inferred(callpath_programs):
    return callpath_programs.load("infer")


def test_inferred_types_by_type(inferred):
    rows = {(r.type, r.inferred): (r.allocations, r.objects, r.bytes) for r in inferred.by_type(infer=True)}
    assert {name: rows.get((name, True)) for name in INFERRED} == INFERRED
    assert rows[("Plain", False)] == (1, 1, 24)
    assert not any(inferred_flag for (name, inferred_flag) in rows if name not in INFERRED)
    # Without inference the same allocations are one untyped row; nothing is lost. With
    # it, what the C and C++ runtimes allocate in their own code has rows of its own
    # (no type tag, not inferred: "libstdc++: emergency exception pool" ...).
    library = [r for r in inferred.by_type(infer=True) if r.type and not r.type_tag and not r.inferred]
    assert library and all(r.type.split(":")[0] in ("glibc", "libstdc++", "C++ runtime") for r in library)
    plain = {r.type: r for r in inferred.by_type()}
    untyped = rows.get((None, False), (0, 0, 0))
    assert plain[None].allocations == untyped[0] + sum(v[0] for v in INFERRED.values()) + sum(
        r.allocations for r in library)
    assert plain[None].bytes == untyped[2] + sum(v[2] for v in INFERRED.values()) + sum(r.bytes for r in library)


def test_inferred_types_in_call_paths(inferred):
    paths = paths_by_type(inferred)
    assert paths["Foo (inferred)"] == {("main", "grow_vector()", "void std::vector<Foo, std::allocator<Foo> >::"
                                        "_M_realloc_insert<Foo>(__gnu_cxx::__normal_iterator<Foo*, "
                                        "std::vector<Foo, std::allocator<Foo> > >, Foo&&)"): 4}
    assert sum(paths["Bar (inferred)"].values()) == 4
    assert all(path[:2] == ("main", "unique_bars()") for path in paths["Bar (inferred)"])
    assert list(paths["char[] of std::string (inferred)"].values()) == [1]
    assert paths_by_type(inferred, infer=False).get("Foo (inferred)") is None


def test_inferred_types_in_cli_reports(callpath_programs):
    path = str(callpath_programs.profile_path("infer"))
    text = run_cli("report", path).stdout
    assert any(line.startswith("Foo (inferred) ") for line in text.splitlines()), text
    assert "(inferred): untyped allocations" in text
    assert "Foo (inferred)" not in run_cli("report", path, "--no-infer").stdout
    rows = json.loads(run_cli("report", path, "--format", "json").stdout)["rows"]
    assert {"type": "Foo", "inferred": True} == {k: v for k, v in next(r for r in rows if r["type"] == "Foo").items()
                                                 if k in ("type", "inferred")}
    tree = run_cli("report", path, "--by", "callpath", "--type", "Foo").stdout
    assert "[Foo (inferred)]" in tree
    functions = json.loads(run_cli("report", path, "--by", "function", "--format", "json").stdout)
    types = [t for f in functions["functions"] for t in f["types"] if t["type"] == "Foo"]
    assert types and all(t["inferred"] for t in types) and sum(t["objects"] for t in types) == 15


@pytest.mark.parametrize("name, expected", [
    ("std::__new_allocator<Foo>::allocate(unsigned long, void const*)", "Foo"),
    ("__gnu_cxx::new_allocator<std::_Rb_tree_node<std::pair<int const, Foo> > >::allocate(unsigned long, "
     "void const*)", "std::_Rb_tree_node<std::pair<int const, Foo>>"),
    ("std::allocator_traits<std::allocator<Bar> >::allocate(std::allocator<Bar>&, unsigned long)", "Bar"),
    ("std::__detail::_MakeUniq<Bar>::__single_object std::make_unique<Bar>()", "Bar"),
    ("std::__detail::_MakeUniq<Bar []>::__array std::make_unique<Bar []>(unsigned long)", "Bar"),
    ("std::shared_ptr<std::enable_if<!std::is_array<Bar>::value, Bar>::type> std::make_shared<Bar>()", "Bar"),
    ("std::__cxx11::basic_string<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::_M_create("
     "unsigned long&, unsigned long)", "wchar_t[] of std::wstring"),
    ("void std::_Function_base::_Base_manager<main::{lambda()#1}>::_M_create<main::{lambda()#1}>(std::_Any_data&, "
     "main::{lambda()#1}&&, std::integral_constant<bool, false>)", "main::{lambda()#1}"),
    ("double* std::__valarray_get_storage<double>(unsigned long)", "double"),
    ("void std::any::_Manager_external<Record>::_S_create<Record>(std::any::_Storage&, Record&&)", "Record"),
    ("std::__1::locale::facet** std::__1::__libcpp_allocate[abi:nie220108]<std::__1::locale::facet*>("
     "std::__1::__element_count, unsigned long)", "std::__1::locale::facet*"),
    # What the C and C++ runtimes allocate in their own code: rows that say so.
    ("_IO_file_doallocate", "glibc: stdio buffer"),
    ("__new_exitfn", "glibc: exit handler list"),
    ("__cxa_allocate_exception", "C++ runtime: exception object"),
    ("__cxxabiv1::__aligned_malloc_with_fallback(unsigned long)", "C++ runtime: exception object"),
    ("std::basic_filebuf<char, std::char_traits<char> >::_M_allocate_internal_buffer()",
     "libstdc++: std::basic_filebuf buffer"),
    ("std::locale::_Impl::_Impl(std::locale::_Impl const&, unsigned long)", "libstdc++: std::locale"),
    ("std::__1::locale::__install_ctor(std::__1::locale const&, std::__1::locale::facet*, long)",
     "libc++: std::locale"),
    ("std::__cxx11::collate<char>::do_transform(char const*, char const*) const",
     "libstdc++: std::collate::transform buffer"),
    ("std::__1::__thread_struct::__thread_struct()", "libc++: std::thread state"),
    ("std::thread::thread<main::{lambda()#1}>(main::{lambda()#1}&&)", "libstdc++: std::thread state"),
    ("std::threadlike::make()", None),
    ("std::__shared_count<(__gnu_cxx::_Lock_policy)2>::__shared_count<testing::Expectation*>(testing::Expectation*)",
     "std::_Sp_counted_ptr<testing::Expectation*, (__gnu_cxx::_Lock_policy)2>"),
    ("std::pair<Foo**, long> std::get_temporary_buffer<Foo*>(long)", "Foo*"),
    ("std::promise<void>::promise()", "std::__future_base::_Result<void>"),
    ("std::promise<Foo&>::promise()", "std::__future_base::_Result<Foo&>"),
    ("std::unique_ptr<std::__future_base::_Result<int>, std::__future_base::_Result_base::_Deleter> "
     "std::__future_base::_S_allocate_result<int, int>(std::allocator<int> const&)", "std::__future_base::_Result<int>"),
    # libstdc++'s copy-on-write strings (the old ABI; a std::runtime_error's message):
    # one block holds the _Rep and the characters after it.
    ("std::string::_Rep::_S_create(unsigned long, unsigned long, std::allocator<char> const&)", "char[] of std::string"),
    ("char* std::string::_S_construct<char const*>(char const*, char const*, std::allocator<char> const&, "
     "std::forward_iterator_tag)", "char[] of std::string"),
    ("std::basic_string<wchar_t, std::char_traits<wchar_t>, std::allocator<wchar_t> >::_Rep::_S_create(unsigned long, "
     "unsigned long, std::allocator<wchar_t> const&)", "wchar_t[] of std::wstring"),
    ("std::stringstream::str() const", None),
    ("void std::vector<Foo, std::allocator<Foo> >::_M_realloc_insert<Foo>(Foo&&)", None),
    ("std::allocator<Foo>::~allocator()", None),
    ("main", None),
])
def test_infer_type_from_frame_names(name, expected):
    found = _core.infer_type([(name, "alloc.h", 1, False, 0)], name)  # a frame of the debug info
    assert (found[0] if found else None) == expected


def test_a_call_site_in_a_stripped_standard_library_names_the_library():
    assert _core.infer_type([], "", "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30") == (
        "libstdc++: function without a symbol", 0)
    assert _core.infer_type([], "", "/usr/lib/x86_64-linux-gnu/libc.so.6")[0] == "glibc: function without a symbol"
    assert _core.infer_type([], "", "/opt/app/libstdcxx_like.so") is None
    assert _core.infer_type([], "") is None


def test_a_promise_constructor_without_inlined_frames_infers_nothing():
    # Built without debug info, std::promise's constructor is the call site of both its
    # result and the shared state its inlined make_shared allocates: neither is named.
    constructor = "std::promise<void>::promise()"
    assert _core.infer_type([(constructor, "", 0, False, 0)], constructor) is None  # the symbol table's frame
    assert _core.infer_type([], constructor) is None
    assert _core.infer_type([(constructor, "future", 1483, False, 0)], constructor)[0] == \
        "std::__future_base::_Result<void>"
    create = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_create(unsigned long&, unsigned long)"
    assert _core.infer_type([(create, "", 0, False, 0)], create)[0] == "char[] of std::string"


def test_innermost_allocator_frame_wins():
    frames = [("std::__new_allocator<std::_Sp_counted_ptr_inplace<Bar, std::allocator<void>, "
               "(__gnu_cxx::_Lock_policy)2> >::allocate(unsigned long, void const*)", "", 0, True, 40),
              ("std::shared_ptr<Bar> std::make_shared<Bar>()", "", 0, True, 0),
              ("f()", "", 0, False, 0)]
    name, size = _core.infer_type(frames, "f()")
    assert name.startswith("std::_Sp_counted_ptr_inplace<Bar,") and size == 40


def test_strip_parameters():
    assert _core.strip_parameters("Small* make_obj<Small>(unsigned long)") == "make_obj<Small>"
    assert _core.strip_parameters("std::vector<int, std::allocator<int> >::size() const") == \
        "std::vector<int, std::allocator<int> >::size"
    assert _core.strip_parameters("main") == "main"
    # `operator` and the name after it are one name, not a return type and a name.
    assert _core.strip_parameters("operator new(unsigned long)") == "operator new"
    assert _core.strip_parameters("operator delete[](void*, unsigned long)") == "operator delete[]"
    assert _core.strip_parameters("Foo::operator unsigned long() const") == "Foo::operator unsigned long"
    assert _core.strip_parameters("bool Foo::operator()(int)") == "Foo::operator()"
    assert _core.strip_parameters("std::ostream& operator<<(std::ostream&, Foo const&)") == "operator<<"
    assert _core.strip_parameters("int my_operator(int)") == "my_operator"


def test_type_globs_are_budget_globs():
    patterns = ["std::vector<*>", "Small"]
    assert matches_any(patterns, "std::vector<int, std::allocator<int>>")
    assert matches_any(patterns, "Small") and not matches_any(patterns, "SmallX")
    assert matches_any(["int [MEM_TYPE_IMGBUF]"], "int [MEM_TYPE_IMGBUF]")  # brackets: themselves
    assert not matches_any(["int [MEM]"], "int M")
    assert matches_any(["Sm?ll"], "Small") and not matches_any(["Sm?ll"], "Smll")


def test_the_unwinders_backtrace_says_where_it_was_cut(cpp_programs, tmp_path):
    """HEAPTYPE_CALLSTACK=unwind (libgcc's unwinder instead of frame pointers) keeps as
    many callers as a frame-pointer walk, 128, and a path cut there starts with the frame
    that says so, as in the default mode (it kept 128 frames of the backtrace, the
    runtime's own among them, and the deepest caller posed as the path's root)."""
    from conftest import run_profiled

    program = build_with_stale_slot_lib(cpp_programs, tmp_path, "deep_mixed")
    output = tmp_path / "deep-unwind.htp"
    done = run_profiled(program, output, "50", "80", env={"HEAPTYPE_CALLSTACK": "unwind"})
    assert done.returncode == 0 and done.stdout.strip() == str(31 * 2), (done.returncode, done.stderr[-2000:])
    paths = [row.path for row in heaptype.load(output).call_paths() if row.type_label == "Leaf"]
    shallow = [path for path in paths if path[0] == "main"]
    cut = [path for path in paths if path[0] == "(more callers: a walk keeps 64 to 128 frames)"]
    assert shallow and cut and len(shallow) + len(cut) == len(paths), sorted({p[:2] for p in paths})
    assert {len(path) for path in cut} == {130}, sorted({len(path) for path in cut})


def test_an_inlined_lambda_is_named_by_the_function_that_wrote_it(cpp_programs, tmp_path):
    """A lambda in a function with internal linkage, inlined into std::thread's invoker
    (tests/cpp/local_lambda.cpp): GCC's DWARF names its operator() without a linkage name
    and leaves its closure type unnamed, in the function's body, where the index of
    namespaces and classes does not look. The --inlined frame said only "operator()"."""
    from conftest import run_profiled

    output = tmp_path / "local_lambda.htp"
    done = run_profiled(cpp_programs.program("local_lambda"), output)
    assert done.returncode == 0 and done.stdout.strip() == "5", done.stderr
    paths = [row.path for row in heaptype.load(output).call_paths(inlined=True) if row.type_label == "Job"]
    assert len(paths) == 1, paths
    assert paths[0][-1] == "run_jobs::(lambda)::operator()", paths[0]
    assert "operator()" not in paths[0], paths[0]
