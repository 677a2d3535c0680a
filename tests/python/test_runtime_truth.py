"""The runtime and the report against exactly known truth, checked to the object.

Each program in tests/cpp makes a known set of allocations (its header comment lists
them, and static_asserts pin the sizes used here). The session fixture
``cpp_programs`` (conftest.py) builds each once with ``heaptype --cflags/--ldflags``;
the tests run it with HEAPTYPE_OUTPUT, load the profile and compare every figure of
every row. Blocks glibc and libstdc++ allocate for themselves are measured with
tests/cpp/baseline.cpp and subtracted, so the totals are exact too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys

import pytest

import heaptype
from conftest import run_profiled

# Started together at the first test, so that they compile in parallel.
PROGRAMS = [("baseline", True), ("objects", True), ("containers", True), ("containers", False),
            ("threads", True), ("control", True), ("empty", True), ("global_new", True)]

FIELDS = ("allocations", "objects", "bytes", "peak_bytes", "live_bytes", "live_blocks")

NODE = "std::_Rb_tree_node<std::pair<int const, Foo>>"
MAP = "std::map<int, Foo, std::less<int>, std::allocator<std::pair<int const, Foo>>>"
SHARED_BLOCK = "std::_Sp_counted_ptr_inplace<Foo, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>"
LINK_ERROR_SYMBOL = "heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype"


def row(allocations, objects, bytes, peak_bytes, live_bytes, live_blocks):
    return dict(allocations=allocations, objects=objects, bytes=bytes, peak_bytes=peak_bytes,
                live_bytes=live_bytes, live_blocks=live_blocks)


def figures(profile: heaptype.Profile, name: str | None) -> dict | None:
    r = profile.type_row(name)
    return None if r is None else {field: getattr(r, field) for field in FIELDS}


def assert_rows(profile: heaptype.Profile, expected: dict) -> None:
    """Every named row has exactly these figures (None: the type has no row)."""
    actual = {name: figures(profile, name) for name in expected}
    assert actual == expected, f"rows of {profile.path}: {[r.type for r in profile.by_type()]}"


def heaptype_command() -> list[str]:
    path = shutil.which("heaptype")
    return [path] if path else [sys.executable, "-m", "heaptype"]


@pytest.fixture(scope="module", autouse=True)
def _start_builds(cpp_programs):
    for name, stl_types in PROGRAMS:
        cpp_programs.start(name, stl_types=stl_types)


def run_and_load(cpp_programs, tmp_path_factory, name: str, *args: str, stl_types: bool = True):
    program = cpp_programs.program(name, stl_types=stl_types)
    output = tmp_path_factory.mktemp(name) / f"{name}.htp"
    done = run_profiled(program, output, *args)
    assert done.returncode == 0, f"{program} {' '.join(args)} exited {done.returncode}: {done.stderr}"
    assert output.exists(), f"{program} wrote no profile at {output}"
    return heaptype.load(output)


@pytest.fixture(scope="module")
def baseline(cpp_programs, tmp_path_factory):
    return run_and_load(cpp_programs, tmp_path_factory, "baseline")


@pytest.fixture(scope="module")
def startup(baseline):
    """The untyped row of a program that allocates nothing itself."""
    untyped = figures(baseline, None)
    assert untyped is not None, "the baseline program recorded no start-up allocation at all"
    assert [r.type for r in baseline.by_type()] == [None], "the baseline program has typed rows"
    return untyped


@pytest.fixture(scope="module")
def objects(cpp_programs, tmp_path_factory):
    return run_and_load(cpp_programs, tmp_path_factory, "objects")


@pytest.fixture(scope="module")
def containers(cpp_programs, tmp_path_factory):
    return run_and_load(cpp_programs, tmp_path_factory, "containers")


@pytest.fixture(scope="module")
def containers_nostl(cpp_programs, tmp_path_factory):
    return run_and_load(cpp_programs, tmp_path_factory, "containers", stl_types=False)


@pytest.fixture(scope="module")
def threads(cpp_programs, tmp_path_factory):
    return run_and_load(cpp_programs, tmp_path_factory, "threads")


# --- 1. new-expressions (tests/cpp/objects.cpp) ------------------------------------------

# Every row of objects.cpp: (allocations, objects, bytes, peak, live bytes, live blocks).
OBJECTS = {
    "Single": row(3, 3, 3 * 24, 3 * 24, 2 * 24, 2),
    "int": row(2, 10, 7 * 4 + 3 * 4, 40, 28, 1),
    "Bar": row(2, 7, (8 + 5 * 12) + (8 + 2 * 12), 100, 68, 1),
    "Wide": row(2, 4, 64 + (64 + 3 * 64), 320, 256, 1),
    "Nothrow": row(2, 2, 2 * 40, 80, 40, 1),
    "char": row(1, 64, 64, 64, 64, 1),
    "Placed": None,
    "Elem": row(1, 10, 80, 80, 80, 1),
    "Dtor": row(1, 4, 8 + 4 * 16, 72, 0, 0),
    "int [MEM_TYPE_IMGBUF]": row(2, 150, 400 + 200, 600, 400, 1),
    "Packet": row(1, 16, 16 * 32, 512, 0, 0),
    "Pooled": row(1, 8, 8 * 24, 192, 0, 0),
    "Outer": row(3, 5, 16 + 16 + (8 + 3 * 16), 16 + (8 + 3 * 16), 16, 1),
    "Inner": row(5, 5, 5 * 16, 64, 16, 1),
    "Unseen": None,
    "EarlyT": row(2, 2, 2 * 40, 80, 40, 1),
    "LateT": row(3, 6, 56 + (8 + 4 * 56) + 56, 56 + (8 + 4 * 56), 56, 1),
}
OBJECTS_FREES = 18  # tracked frees: see objects.cpp
OBJECTS_UNTRACKED_FREES = 3  # delete of the Unseen, free() of the __libc_malloc block and of the untagged Packet block


def test_single_objects(objects):
    assert_rows(objects, {"Single": OBJECTS["Single"]})


def test_array_of_trivial_type(objects):
    assert_rows(objects, {"int": OBJECTS["int"]})


def test_array_with_cookie_counts_objects_and_cookie_bytes(objects):
    # new Bar[5]: 8-byte Itanium cookie + 5 * 12 bytes, 5 objects.
    assert_rows(objects, {"Bar": OBJECTS["Bar"]})


def test_over_aligned_single_and_array(objects):
    # new Wide: 64 bytes; new Wide[3]: a 64-byte cookie (alignof) + 3 * 64.
    assert_rows(objects, {"Wide": OBJECTS["Wide"]})


def test_nothrow_new(objects):
    assert_rows(objects, {"Nothrow": OBJECTS["Nothrow"]})


def test_placement_new_changes_nothing(objects):
    # Placement new on the stack and twice into a `new char[64]` block: no Placed row,
    # and the char block keeps its type and count.
    assert_rows(objects, {"Placed": None, "char": OBJECTS["char"]})


def test_New_counts_exactly(objects):
    assert_rows(objects, {"Elem": OBJECTS["Elem"], "Dtor": OBJECTS["Dtor"]})


def test_pseudo_type(objects):
    assert_rows(objects, {"int [MEM_TYPE_IMGBUF]": OBJECTS["int [MEM_TYPE_IMGBUF]"],
                          "int": OBJECTS["int"]})


def test_tag_and_untag(objects):
    # A malloc'ed block tagged Packet[16] and untagged before free(), and static
    # storage tagged Pooled[8] then untagged.
    assert_rows(objects, {"Packet": OBJECTS["Packet"], "Pooled": OBJECTS["Pooled"]})


def test_constructor_that_allocates(objects):
    # new Outer (x2) and new Outer[3], whose constructors each do new Inner.
    assert_rows(objects, {"Outer": OBJECTS["Outer"], "Inner": OBJECTS["Inner"]})


def test_static_constructor_and_destructor_allocations(objects):
    # EarlyT: two before main (one freed in main); LateT: allocated in a static
    # destructor after main returned, one left live.
    assert_rows(objects, {"EarlyT": OBJECTS["EarlyT"], "LateT": OBJECTS["LateT"]})


def test_objects_every_row(objects, startup):
    # Every row, and no other; the untyped row as in the baseline program (its peak
    # is checked on its own below).
    expected = {name: f for name, f in OBJECTS.items() if f is not None}
    expected[None] = {k: v for k, v in startup.items() if k != "peak_bytes"}
    actual = {r.type: {field: getattr(r, field) for field in FIELDS if r.type or field != "peak_bytes"}
              for r in objects.by_type()}
    assert actual == expected
    assert objects.warnings == []


def test_objects_untyped_peak_is_only_startup(objects, startup):
    # Outer's blocks are committed before their constructors' `new Inner` and named
    # Outer a moment later: they must never count as untyped, not even in its peak.
    assert figures(objects, None)["peak_bytes"] == startup["peak_bytes"]


def test_objects_totals(objects, baseline):
    present = [r for r in OBJECTS.values() if r]
    t, b = objects.totals, baseline.totals
    assert (t.allocations - b.allocations, t.frees - b.frees, t.bytes - b.bytes,
            t.live_bytes - b.live_bytes, t.live_blocks - b.live_blocks) == (
        sum(r["allocations"] for r in present), OBJECTS_FREES, sum(r["bytes"] for r in present),
        sum(r["live_bytes"] for r in present), sum(r["live_blocks"] for r in present))


def test_runtime_summary_agrees_with_analysis(objects, baseline):
    end, base_end = objects.runtime_summary, baseline.runtime_summary
    assert end is not None and base_end is not None
    assert (end["allocations"], end["frees"]) == (objects.totals.allocations, objects.totals.frees)
    assert end["untracked_frees"] - base_end["untracked_frees"] == OBJECTS_UNTRACKED_FREES


def test_addresses_mode_counts_the_same(cpp_programs, tmp_path, objects):
    # HEAPTYPE_ADDRESSES=1: the header says so (format flag 1 at byte 44) and the
    # records carry addresses; every figure is the same as without them.
    output = tmp_path / "addresses.htp"
    done = run_profiled(cpp_programs.program("objects"), output, env={"HEAPTYPE_ADDRESSES": "1"})
    assert done.returncode == 0, done.stderr
    (flags,) = struct.unpack_from("<I", output.read_bytes(), 44)
    (default_flags,) = struct.unpack_from("<I", open(objects.path, "rb").read(), 44)
    assert (flags, default_flags) == (1 | 2, 2)  # 2: compressed (the default)
    profile = heaptype.load(output)
    assert profile.warnings == []
    assert {r.type: figures(profile, r.type) for r in profile.by_type()} == \
        {r.type: figures(objects, r.type) for r in objects.by_type()}
    assert output.stat().st_size > os.path.getsize(objects.path)


def test_registry_is_a_16_byte_header_per_live_block(objects):
    # The registry is a header in front of each block: 16 bytes per live block
    # whatever its size, plus the alignment padding of over-aligned blocks (the one
    # live Wide[3], alignas(64): its header sits 64 bytes in, 48 more).
    end = objects.runtime_summary
    assert end["registry_bytes"] == 16 * objects.totals.live_blocks + (64 - 16)


# --- 5. frees of blocks HeapType never saw ----------------------------------------------

def test_delete_of_block_allocated_while_stopped(objects):
    # stop(); new Unseen; start(); delete: the program ran on (the profile loaded),
    # nothing is counted for Unseen, and the free is no tracked free (totals above).
    assert objects.type_row("Unseen") is None
    assert objects.complete


def test_start_stopped_records_only_after_start(cpp_programs, tmp_path):
    # HEAPTYPE_START=stopped: nothing before objects.cpp's heaptype::start() is
    # recorded (nor are frees of those blocks); after it, the program allocates only
    # the LateT blocks of its static destructor.
    output = tmp_path / "stopped.htp"
    done = run_profiled(cpp_programs.program("objects"), output, env={"HEAPTYPE_START": "stopped"})
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(output)
    assert {r.type: figures(profile, r.type) for r in profile.by_type()} == {"LateT": OBJECTS["LateT"]}
    assert (profile.totals.allocations, profile.totals.frees) == (3, 2)


# --- `::new` (tests/cpp/global_new.cpp) --------------------------------------------------

def test_global_scope_new(cpp_programs, tmp_path_factory):
    profile = run_and_load(cpp_programs, tmp_path_factory, "global_new")
    assert_rows(profile, {"Scoped": row(2, 2, 48, 48, 24, 1), "char": row(1, 32, 32, 32, 32, 1),
                          "Placed": None})


# --- 2. standard containers (tests/cpp/containers.cpp) ----------------------------------

CONTAINERS = {
    "Token": row(1, 100, 1600, 1600, 0, 0),
    NODE: row(42, 42, 42 * 56, 37 * 56, 5 * 56, 5),
    SHARED_BLOCK: row(3, 3, 3 * 32, 3 * 32, 0, 0),
    MAP: row(1, 1, 48, 48, 48, 1),
    "Foo": None,
}


def test_vector_reserve_is_one_block_of_100(containers):
    assert_rows(containers, {"Token": CONTAINERS["Token"]})


def test_map_nodes(containers):
    assert_rows(containers, {NODE: CONTAINERS[NODE], MAP: CONTAINERS[MAP], "Foo": None})


def test_make_shared_control_block(containers):
    assert_rows(containers, {SHARED_BLOCK: CONTAINERS[SHARED_BLOCK], "Foo": None})


def test_containers_every_row(containers, startup):
    expected = {name: f for name, f in CONTAINERS.items() if f is not None}
    expected[None] = startup
    actual = {r.type: {field: getattr(r, field) for field in FIELDS} for r in containers.by_type()}
    assert actual == expected
    assert containers.warnings == []


def test_no_stl_types_leaves_container_blocks_untyped(containers_nostl, startup):
    # The same program built with compile_flags(stl_types=False): the vector buffer,
    # the map nodes and the shared_ptr blocks are untyped; `new std::map` is still typed.
    blocks = 1 + 42 + 3
    program_peak = 37 * 56  # the local map's 37 nodes, before the erases
    expected = {
        MAP: CONTAINERS[MAP],
        None: row(startup["allocations"] + blocks, startup["objects"] + blocks,
                  startup["bytes"] + 1600 + 42 * 56 + 3 * 32, startup["peak_bytes"] + program_peak,
                  startup["live_bytes"] + 5 * 56, startup["live_blocks"] + 5),
    }
    actual = {r.type: {field: getattr(r, field) for field in FIELDS} for r in containers_nostl.by_type()}
    assert actual == expected


# --- 4. threads (tests/cpp/threads.cpp: 8 threads x 5,000) --------------------------------

THREADS = {
    "Msg": row(40_000, 40_000, 40_000 * 24, None, 0, 0),
    "Local": row(40_000, 40_000, 40_000 * 24, None, 0, 0),
    "Arr": row(8, 36, 8 * 8 + 36 * 4, None, 0, 0),
    "Kept": row(56, 56, 56 * 48, 56 * 48, 56 * 48, 56),
    "std::thread": row(8, 8, 64, 64, 0, 0),
}


def test_threads_exact_counts(threads):
    # Peaks of Msg, Local and Arr depend on the interleaving: not compared.
    actual = {}
    for name, expected in THREADS.items():
        got = figures(threads, name)
        if got is not None and expected["peak_bytes"] is None:
            got["peak_bytes"] = None
        actual[name] = got
    assert actual == THREADS


def test_threads_profile_is_consistent(threads):
    assert threads.warnings == []
    assert len(threads.threads) >= 9  # main and the 8 workers
    end = threads.runtime_summary
    assert (end["allocations"], end["frees"]) == (threads.totals.allocations, threads.totals.frees)
    assert threads.totals.live_blocks == sum(r.live_blocks for r in threads.by_type())


# --- 6. dump, HEAPTYPE_DISABLE, linking -------------------------------------------------

def test_dump_mid_run(cpp_programs, tmp_path, startup):
    program = cpp_programs.program("control")
    snapshot, output = tmp_path / "snapshot.htp", tmp_path / "final.htp"
    done = run_profiled(program, output, "dump", str(snapshot))
    assert done.returncode == 0, done.stderr
    mid = heaptype.load(snapshot)
    assert mid.complete and mid.warnings == [] and mid.end_cause == "dump"
    assert_rows(mid, {"Before": row(10, 10, 320, 320, 320, 10), "After": None})
    untyped = figures(mid, None)
    assert (untyped["allocations"], untyped["bytes"]) == (startup["allocations"], startup["bytes"])
    assert [r.type for r in mid.by_type()] in ([None, "Before"], ["Before", None])
    final = heaptype.load(output)
    assert final.end_cause == "exit"
    assert {r.type: figures(final, r.type) for r in final.by_type()} == {
        None: startup, "Before": row(10, 10, 320, 320, 160, 5), "After": row(20, 20, 800, 800, 800, 20)}


def test_disable_writes_no_file(cpp_programs, tmp_path):
    program = cpp_programs.program("objects")
    done = run_profiled(program, tmp_path / "disabled.htp", env={"HEAPTYPE_DISABLE": "1"})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_link_without_runtime_fails_with_named_error(cpp_programs, tmp_path):
    obj = cpp_programs.object_file("empty")
    done = subprocess.run([cpp_programs.cxx, "-std=c++17", "-O2", "-g", str(obj), "-o", str(tmp_path / "a.out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert LINK_ERROR_SYMBOL in done.stderr


def test_program_that_allocates_nothing_itself_writes_profile(cpp_programs, tmp_path, startup):
    # empty.cpp is `int main() { return 0; }`, built and linked with HeapType's flags:
    # libstdc++ allocates at start-up all the same, so a profile must be written.
    program = cpp_programs.program("empty")
    output = tmp_path / "empty.htp"
    done = run_profiled(program, output)
    assert done.returncode == 0, done.stderr
    assert output.exists(), "no profile written"
    profile = heaptype.load(output)
    assert {r.type: figures(profile, r.type) for r in profile.by_type()} == {None: startup}


# --- 7. fork -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["fork", "fork_exit"])
def test_fork_child_writes_its_own_profile(cpp_programs, tmp_path, mode):
    """The child ends with exit() or with _exit(), which runs no destructors."""
    program = cpp_programs.program("control")
    output = tmp_path / "fork.htp"
    done = run_profiled(program, output, mode)
    assert done.returncode == 0, done.stderr
    child_pid = int(re.fullmatch(r"child (\d+)\n", done.stdout).group(1))
    child_path = tmp_path / f"fork.htp.{child_pid}"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["fork.htp", child_path.name])

    child = heaptype.load(child_path)
    assert child.pid == child_pid
    assert child.complete
    # The child's profile starts empty: its own 11 ChildT and nothing else (its
    # delete of an inherited ParentT is no tracked free).
    assert {r.type: figures(child, r.type) for r in child.by_type()} == {
        "ChildT": row(11, 11, 11 * 56, 11 * 56, 4 * 56, 4)}
    assert child.totals.frees == 7

    parent = heaptype.load(output)
    assert parent.pid != child_pid
    assert_rows(parent, {"ParentT": row(3, 3, 144, 144, 144, 3), "AfterFork": row(2, 2, 128, 128, 128, 2),
                         "ChildT": None})


def test_profile_goes_to_bazel_test_outputs_by_default(cpp_programs, tmp_path):
    """Under `bazel test`, without HEAPTYPE_OUTPUT, the profile is one of the test's
    undeclared outputs."""
    outputs = tmp_path / "undeclared"
    outputs.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "HEAPTYPE_OUTPUT"}
    env["TEST_UNDECLARED_OUTPUTS_DIR"] = str(outputs)
    done = subprocess.run([str(cpp_programs.program("control")), "deref"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    written = list(outputs.glob("heaptype.control.*.htp"))
    assert len(written) == 1 and not list(tmp_path.glob("*.htp"))
    assert figures(heaptype.load(written[0]), "Singleton")["allocations"] == 2


def test_a_binary_changed_after_profiling_gives_a_warning(cpp_programs, tmp_path):
    program = tmp_path / "control"
    shutil.copy2(cpp_programs.program("control"), program)
    output = tmp_path / "deref.htp"
    assert run_profiled(program, output, "deref").returncode == 0
    assert not [w for w in heaptype.load(output).warnings if "changed after" in w]
    later = heaptype.load(output)._raw.start_unix_ns + 60 * 10**9
    os.utime(program, ns=(later, later))  # as a rebuild would
    warnings = [w for w in heaptype.load(output).warnings if "changed after" in w]
    assert warnings == [f"{program} changed after the profile was taken: if it was rebuilt, "
                        "the names of its types and functions may be wrong"]


def test_deref_new_idiom_compiles_and_is_typed(cpp_programs, tmp_path):
    output = tmp_path / "deref.htp"
    done = run_profiled(cpp_programs.program("control"), output, "deref")
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(output)
    assert figures(profile, "Singleton") == row(2, 3, 3 * 24, 3 * 24, 24, 1)


# --- 8. heaptype report -------------------------------------------------------------------

def test_report_json(objects):
    done = subprocess.run([*heaptype_command(), "report", objects.path, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    t = objects.totals
    assert {k: report["totals"][k] for k in ("allocations", "bytes", "peak_bytes", "live_bytes")} == {
        "allocations": t.allocations, "bytes": t.bytes, "peak_bytes": t.peak_bytes, "live_bytes": t.live_bytes}
    keys = ("type", "allocations", "objects", "bytes", "peak_bytes", "live_bytes")
    rows = {r["type"]: {k: r[k] for k in keys} for r in report["rows"]}
    assert len(rows) == len(report["rows"])
    # The report infers (as by_type(infer=True)): the C++ runtime's start-up block has a row of its own.
    assert rows == {r.type: {k: getattr(r, k) for k in keys} for r in objects.by_type(infer=True)}
    assert rows["libstdc++: emergency exception pool"]["bytes"] == 72704
    assert None not in rows and rows["Single"]["allocations"] == 3  # no (untyped) row left
    assert rows["Bar"] == {"type": "Bar", "allocations": 2, "objects": 7, "bytes": 100, "peak_bytes": 100,
                           "live_bytes": 68}


def test_report_text(objects):
    done = subprocess.run([*heaptype_command(), "report", objects.path], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in ("Single", "Bar", "Wide", "int [MEM_TYPE_IMGBUF]", "LateT", "libstdc++: emergency exception pool"):
        assert any(line.startswith(name + " ") for line in lines), name
    temporary = next(r.temporary_allocations for r in objects.by_type() if r.type == "Single")
    assert any(re.fullmatch(rf"Single\s+3\s+{temporary}\s+3\s+72 B\s+72 B\s+48 B", line) for line in lines), \
        done.stdout


def test_report_missing_file(tmp_path):
    missing = tmp_path / "missing.htp"
    done = subprocess.run([*heaptype_command(), "report", str(missing)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    error_lines = done.stderr.strip().splitlines()
    assert len(error_lines) == 1, done.stderr
    assert str(missing) in error_lines[0]


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_a_constructors_placement_new_at_the_objects_start_leaves_it_the_objects_type(cpp_programs, tmp_path, mode):
    """tests/cpp/first_member.cpp: a constructor builds its first member in place (a
    Small, 4 B, at the object's address), so the member's type is reported before the
    new-expression's. `new Holder` and `new Nested` (whose constructor also allocates an
    Other between the two reports) are rows of their own types, one object a block; an
    array of the member's type of the same size (`new Small[16]`, 64 B) stays Small, 16
    objects a block. Before, every Holder was a Small[16] and the call site learned it.
    In the full profile no type's peak counts a block that was another's for a moment
    between the two reports: Small's is its one live array's (docs/aggregate.md: the
    aggregated counts follow the moment, and its peak is two blocks).

    std::make_unique<Holder>'s new-expression, in the standard library's header, reports
    nothing: the member's report is the only one its blocks get, and its call site learns
    Small from it. The make_unique<Holder> frame says each block is one Holder: they are
    "Holder (inferred)", one object a block, and untyped where types are not inferred.
    Before, they were Small, 16 objects a block."""
    output = tmp_path / f"first_member_{mode}.htp"
    n = 50
    done = run_profiled(cpp_programs.program("first_member"), output, str(n), env={"HEAPTYPE_MODE": mode})
    assert done.returncode == 0 and \
        done.stdout.startswith(f"holders={n} nested={n} arrays={n} others={n} uniques={n} "), done.stdout + done.stderr
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    rows = {r.label: (r.allocations, r.objects, r.bytes, r.live_blocks) for r in profile.by_type(infer=True)}
    assert rows["Holder"] == (n, n, 64 * n, 0)
    assert rows["Holder (inferred)"] == (n, n, 64 * n, 0)
    assert rows["Nested"] == (n, n, 64 * n, 0)
    assert rows["Small"] == (n, 16 * n, 64 * n, 0)
    assert rows["Other"] == (n, n, 16 * n, 0)
    untyped = {r.label: (r.allocations, r.objects) for r in profile.by_type(infer=False)}["(untyped)"]
    assert untyped[0] >= n and untyped[0] == untyped[1], untyped  # one object a block
    peaks = {r.type: r.peak_bytes for r in profile.by_type() if r.type in ("Holder", "Nested", "Small")}
    assert peaks == {"Holder": 64, "Nested": 64, "Small": 64 if mode == "full" else 128}, peaks


@pytest.mark.parametrize("mode", ["full", "aggregate"])
def test_a_raw_allocation_function_that_types_share_gives_each_block_its_callers_type(cpp_programs, tmp_path, mode):
    """tests/cpp/shared_raw_site.cpp: one `operator new(n)` call site in a function that
    an A, a B[2] and a C[3] (built one by one) share, each typed by the caller's
    placement new after it returns, in turns. Each is a row of its own type; a raw block
    no one types stays untyped; a char[128] pool with a D built at its start stays char,
    while a char[32] that a D fills is that D. Before, the call site learned A from the
    first block, and every later B[2] (16 B, as an A) was an A."""
    output = tmp_path / f"shared_raw_site_{mode}.htp"
    n = 60
    done = run_profiled(cpp_programs.program("shared_raw_site"), output, str(n), env={"HEAPTYPE_MODE": mode})
    assert done.returncode == 0 and done.stdout == f"as={n} bs={n} cs={n} raws={n} pools={n} storages={n}\n", \
        done.stdout + done.stderr
    profile = heaptype.load(output)
    assert profile.complete and profile.warnings == []
    rows = {r.type: (r.allocations, r.objects, r.bytes, r.live_blocks) for r in profile.by_type()}
    assert rows["A"] == (n, n, 16 * n, 0)
    assert rows["B"] == (n, 2 * n, 16 * n, 0)
    assert rows["C"] == (n, 3 * n, 48 * n, 0)
    assert rows["char"] == (n, 128 * n, 128 * n, 0)
    assert rows["D"] == (n, n, 32 * n, 0)
    untyped = rows[None]  # the raw blocks, and glibc's and libstdc++'s own at start-up
    assert untyped[0] >= n and untyped[2] >= 16 * n, rows
