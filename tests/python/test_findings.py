"""Findings and the type-aware capture mode.

Releases a program gets wrong (tests/cpp/findings.cpp) are recorded in the profile
and passed on to the allocator: free() of a `new` block, delete of a `new[]` block
(any build), and, in the type-aware mode (Clang >= 21), a Derived deleted through a
Base* without a virtual destructor. The runtime truth program objects.cpp gives the
same rows in the type-aware mode as in the macro mode (test_runtime_truth.py).

The type-aware builds use the ziglang wheel's Clang 22 (`python -m ziglang c++`,
libc++ linked statically, the static runtime built by g++). Without ziglang these
tests skip, and fail under HEAPTYPE_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import heaptype
from heaptype import _core
from heaptype.capture import flags
from heaptype.budget import budget_from_mapping, evaluate, measure
from heaptype.present.report import render_types_text, types_json
from conftest import CPP_DIR, run_profiled
from test_runtime_truth import OBJECTS, OBJECTS_FREES, THREADS, figures
from tooling import require_module, run_once, shared_workdir

ZIG_CXX = [sys.executable, "-m", "ziglang", "c++"]
TYPE_AWARE_STD = "-std=c++20"


def require_ziglang() -> list[str]:
    require_module("ziglang", "ziglang (its wheel brings Clang 22)")
    return ZIG_CXX


def build_type_aware(workdir: Path, name: str) -> Path:
    """tests/cpp/<name>.cpp built with Clang 22 in the type-aware mode, once per session."""
    cxx = require_ziglang()
    exe = workdir / f"{name}_type_aware"
    source = CPP_DIR / f"{name}.cpp"

    def make() -> None:
        command = [*cxx, TYPE_AWARE_STD, "-O2", "-g",
                   *flags.compile_flags(cxx=" ".join(cxx), capture="type-aware"), str(source),
                   *flags.link_flags(cxx=" ".join(cxx)), "-o", str(exe)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-6000:]}"

    run_once(exe.with_suffix(".built"), make)
    return exe


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return shared_workdir(tmp_path_factory, "heaptype-type-aware")


def profile_of(program: Path, tmp_path: Path, *args: str) -> heaptype.Profile:
    output = tmp_path / f"{program.name}.htp"
    done = run_profiled(program, output, *args)
    assert done.returncode == 0, done.stderr
    if len(args) > 1:
        assert done.stdout == f"done={args[1]}\n"
    return heaptype.load(output)


def on_path(stack: list[str], function: str) -> bool:
    return any(frame.startswith(function) for frame in stack)


# --- mismatched free() / delete / delete[]: every build ---------------------------------------

@pytest.mark.parametrize("mode,allocated,allocated_with,released_with,function", [
    ("free-new", "Counted", "new", "free()", "free_new"),
    ("delete-array", "Plain", "new[]", "delete", "delete_array"),
    ("free-cookie", "Counted", "new[]", "free()", "free_cookie"),
])
def test_mismatched_release_is_a_finding_and_the_program_works(cpp_programs, tmp_path, mode, allocated,
                                                              allocated_with, released_with, function):
    profile = profile_of(cpp_programs.program("findings"), tmp_path, mode, "5")
    frees = [f for f in profile.findings if f["kind"] == "mismatched_free"]
    assert [(f["allocated"], f["allocated_with"], f["released_with"], f["count"]) for f in frees] == [
        (allocated, allocated_with, released_with, 5)]
    assert on_path(frees[0]["stack"], function), frees[0]["stack"]
    row = profile.type_row(allocated)
    assert (row.allocations, row.live_blocks) == (5, 0)  # every block freed all the same
    assert profile.warnings == []


def test_mismatched_free_in_json_text_and_budget(cpp_programs, tmp_path):
    profile = profile_of(cpp_programs.program("findings"), tmp_path, "free-new", "3")
    out = types_json(profile)
    assert out["mismatched_deletes"] == []
    [row] = out["mismatched_frees"]
    assert (row["allocated"], row["allocated_with"], row["released_with"], row["count"]) == ("Counted", "new",
                                                                                            "free()", 3)
    text = render_types_text(profile)
    assert "mismatched free() x3: Counted (24 B) allocated with new" in text
    verdict = evaluate(budget_from_mapping("t", {"mismatched_frees": 0}, "test"), measure(profile))
    assert {(v.type, v.field, v.measured) for v in verdict.violations} == {("Counted", "mismatched_frees", 3)}


def test_macro_mode_cannot_see_a_delete_through_base(cpp_programs, tmp_path):
    profile = profile_of(cpp_programs.program("findings"), tmp_path, "delete-base", "3")
    assert profile.findings == []
    assert (profile.type_row("Derived").allocations, profile.type_row("Derived").live_blocks) == (3, 0)


# --- the type-aware mode ---------------------------------------------------------------------

def test_capture_mode_by_compiler():
    assert flags.capture_mode("auto", "g++")[0] == "macro"
    assert flags.capture_mode("type-aware", "g++")[0] == "type-aware"  # forced
    assert "-DHEAPTYPE_TYPE_AWARE=1" not in flags.compile_flags(cxx="g++")
    assert "-DHEAPTYPE_TYPE_AWARE=1" not in flags.compile_flags(cxx="g++", capture="macro")
    zig = " ".join(require_ziglang())
    mode, why = flags.capture_mode("auto", zig)
    assert (mode, why) == ("type-aware", "Clang 22: type-aware allocation; translation units below C++20 take "
                                         "the macro")
    assert "-DHEAPTYPE_TYPE_AWARE=1" in flags.compile_flags(cxx=zig)
    assert "-DHEAPTYPE_TYPE_AWARE=1" not in flags.compile_flags(cxx=zig, capture="macro")


def test_cflags_says_the_mode(tmp_path):
    done = subprocess.run([sys.executable, "-m", "heaptype", "--cflags", "--cxx", "g++"], capture_output=True,
                          text=True, check=True)
    assert done.stderr.startswith("heaptype: type capture: macro (GNU ")
    assert "HEAPTYPE_TYPE_AWARE" not in done.stdout
    forced = subprocess.run([sys.executable, "-m", "heaptype", "--cflags", "--cxx", "g++", "--capture",
                             "type-aware"], capture_output=True, text=True, check=True)
    assert "-DHEAPTYPE_TYPE_AWARE=1" in forced.stdout and "type-aware (GNU" in forced.stderr


# What the type-aware mode sees differently in objects.cpp: nothing. (Blocks of a
# class's own operator new stay untyped in it: see no_macro.cpp below.)
TYPE_AWARE_OBJECTS = dict(OBJECTS)


def test_type_aware_objects_every_row(workdir, tmp_path):
    profile = profile_of(build_type_aware(workdir, "objects"), tmp_path)
    actual = {name: figures(profile, name) for name in TYPE_AWARE_OBJECTS}
    assert actual == TYPE_AWARE_OBJECTS
    typed = {r.type for r in profile.by_type() if r.type}
    assert typed == {name for name, f in TYPE_AWARE_OBJECTS.items() if f}
    # The baseline program: libc++ linked statically allocates nothing at start-up, so
    # it may write no profile at all.
    output = tmp_path / "baseline.htp"
    assert run_profiled(build_type_aware(workdir, "baseline"), output).returncode == 0
    baseline_frees = heaptype.load(output).totals.frees if output.exists() else 0
    assert profile.totals.frees - baseline_frees == OBJECTS_FREES
    assert profile.findings == [] and profile.warnings == []


def test_type_aware_delete_through_base_is_reported(workdir, tmp_path):
    profile = profile_of(build_type_aware(workdir, "findings"), tmp_path, "delete-base", "4")
    [finding] = profile.findings
    assert (finding["kind"], finding["allocated"], finding["allocated_bytes"], finding["deleted"],
            finding["deleted_bytes"], finding["count"]) == ("mismatched_delete", "Derived", 40, "Base", 4, 4)
    assert on_path(finding["stack"], "delete_as_base"), finding["stack"]
    assert on_path(finding["allocation_stack"], "make_derived"), finding["allocation_stack"]
    out = types_json(profile)
    [row] = out["mismatched_deletes"]
    assert {k: row[k] for k in ("allocated", "deleted", "count")} == {"allocated": "Derived", "deleted": "Base",
                                                                      "count": 4}
    assert on_path(row["stack"], "delete_as_base")
    json.dumps(out)
    text = render_types_text(profile)
    assert "mismatched delete x4: deleted as Base (4 B), allocated as Derived (40 B)" in text
    verdict = evaluate(budget_from_mapping("t", {"mismatched_deletes": 0}, "test"), measure(profile))
    assert {(v.type, v.field, v.measured) for v in verdict.violations} == {("Derived", "mismatched_deletes", 4)}
    derived = profile.type_row("Derived")
    assert (derived.allocations, derived.bytes, derived.live_blocks) == (4, 160, 0)


@pytest.mark.parametrize("mode,allocated,allocated_with,released_with", [
    ("free-new", "Counted", "new", "free()"),
    ("delete-array", "Plain", "new[]", "delete"),
    ("free-cookie", "Counted", "new[]", "free()"),
])
def test_type_aware_mismatched_release(workdir, tmp_path, mode, allocated, allocated_with, released_with):
    profile = profile_of(build_type_aware(workdir, "findings"), tmp_path, mode, "5")
    assert [(f["kind"], f["allocated"], f["allocated_with"], f["released_with"], f["count"])
            for f in profile.findings] == [("mismatched_free", allocated, allocated_with, released_with, 5)]
    assert profile.type_row(allocated).live_blocks == 0


def test_type_aware_builds_what_the_macro_breaks(workdir, tmp_path):
    """A class with its own operator new and `::operator new(48)`, no fence."""
    program = build_type_aware(workdir, "no_macro")
    output = tmp_path / "no_macro.htp"
    done = run_profiled(program, output)
    assert (done.returncode, done.stdout) == (0, "sum=5\n"), done.stderr
    profile = heaptype.load(output)
    assert figures(profile, "Widget") == dict(allocations=3, objects=3, bytes=60, peak_bytes=60, live_bytes=20,
                                              live_blocks=1)
    assert profile.type_row("Pooled") is None  # its own operator new: untyped in this mode
    assert profile.findings == []


def test_type_aware_libcxx_containers_are_typed(workdir, tmp_path):
    """containers.cpp against libc++ (heaptype-libcxx/__new/allocate.h): the same
    blocks and counts as with libstdc++'s shim, under libc++'s names and sizes."""
    profile = profile_of(build_type_aware(workdir, "containers"), tmp_path)
    rows = {r.type: r for r in profile.by_type() if r.type}
    assert figures(profile, "Token") == dict(allocations=1, objects=100, bytes=1600, peak_bytes=1600, live_bytes=0,
                                             live_blocks=0)
    node = rows["std::__1::__tree_node<std::__1::__value_type<int, Foo>, void*>"]
    size = node.bytes // 42
    assert (node.allocations, node.objects, node.bytes, node.peak_bytes, node.live_blocks, node.live_bytes) == (
        42, 42, 42 * size, 37 * size, 5, 5 * size)
    shared = rows["std::__1::__shared_ptr_emplace<Foo, std::__1::allocator<Foo>>"]
    assert (shared.allocations, shared.objects, shared.live_blocks) == (3, 3, 0)
    [map] = [r for name, r in rows.items() if name.startswith("std::__1::map<int, Foo")]
    assert (map.allocations, map.live_blocks) == (1, 1)
    assert set(rows) == {"Token", node.type, shared.type, map.type}
    assert profile.findings == []


def test_type_aware_threads_exact_counts(workdir, tmp_path):
    """threads.cpp (8 threads x 5,000, blocks freed by other threads): the same rows.
    std::thread's own state is libc++'s in this build, so its row is not compared."""
    profile = profile_of(build_type_aware(workdir, "threads"), tmp_path)
    for name, expected in THREADS.items():
        if name == "std::thread":
            continue
        got = figures(profile, name)
        if expected["peak_bytes"] is None:
            got["peak_bytes"] = None
        assert got == expected, name
    assert profile.warnings == [] and profile.findings == []
    end = profile.runtime_summary
    assert (end["allocations"], end["frees"]) == (profile.totals.allocations, profile.totals.frees)


# --- the FINDING record, through the reader and the core ----------------------------------------

def findings_profile(tmp_path, cut: int = 0):
    """Thread 1 allocates two Derived (tag 0xD0, 40 B); thread 2 deletes one as Base
    (tag 0xB0, 4 B) twice from the same place and frees one new[] block with free()."""
    b = _core.ProfileBuilder()
    b.thread(1, 101, "main")
    b.thread(2, 102, "worker")
    main = b.node(1, 0, 0x1000, 0)
    site = b.site(1, 40, 1, 0xD0, 0x1010, main)
    array = b.site(1, 64, 8, 0xE0, 0x1020, main)
    b.alloc(1, 1, site)
    b.alloc(1, 2, site)
    b.alloc(1, 3, array)
    b.flush(1)
    worker = b.node(2, 0, 0x2000, 0)
    for t in (4, 5):
        b.finding(2, t, 0, 1, site, 0xB0, 4, 0x2010, worker)
        b.free_remote(2, t, 1, site)
    b.finding(2, 6, 1, 1, array, 2, 0, 0x2020, worker)
    b.free_remote(2, 6, 1, array)
    b.end(3, 3)
    data = b.finish()
    path = tmp_path / "findings.htp"
    path.write_bytes(data[:len(data) - cut] if cut else data)
    names = _core.TableCodeNames()
    for entry, name in ((0x1000, "main"), (0x2000, "worker()")):
        names.add_function(entry, name)
    names.add_call_site(0x1010, "main", 0x1000)
    names.add_call_site(0x1020, "main", 0x1000)
    names.add_call_site(0x2010, "worker()", 0x2000)
    names.add_call_site(0x2020, "worker()", 0x2000)
    for tag, name in ((0xD0, "Derived"), (0xB0, "Base"), (0xE0, "Elem")):
        names.add_type(tag, name)
    return _core.ProfileFile(str(path)), names


def test_finding_records_are_read_and_grouped(tmp_path):
    file, names = findings_profile(tmp_path)
    a = _core.Analysis(file, names)
    assert [(f["kind"], f["allocated"], f.get("deleted"), f.get("released_with"), f["count"], f["stack"])
            for f in a.findings] == [("mismatched_delete", "Derived", "Base", None, 2, ["worker()"]),
                                     ("mismatched_free", "Elem", None, "free()", 1, ["worker()"])]
    assert a.findings[0]["allocation_stack"] == ["main"]
    assert (a.totals.allocations, a.totals.frees, a.totals.live_blocks) == (3, 3, 0)
    assert a.warnings == []


def test_a_file_cut_inside_the_findings_loads_what_came_before(tmp_path):
    file, names = findings_profile(tmp_path, cut=30)
    a = _core.Analysis(file, names)
    assert a.totals.allocations == 3  # thread 1's chunk is whole
    assert all(f["count"] >= 1 for f in a.findings)


def test_heaptype_check_fails_a_budget_of_no_mismatched_deletes(workdir, tmp_path):
    """`[defaults] mismatched_deletes = 0` in a budget file, checked by `heaptype check`."""
    program = build_type_aware(workdir, "findings")
    output = tmp_path / "base.htp"
    assert run_profiled(program, output, "delete-base", "2").returncode == 0
    budget = tmp_path / "heap-budget.toml"
    budget.write_text("[defaults]\nmismatched_deletes = 0\nmismatched_frees = 0\n")
    done = subprocess.run([sys.executable, "-m", "heaptype", "check", str(output), "--budget", str(budget)],
                          capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mismatched deletes 2 > limit 0" in done.stdout + done.stderr
    clean = tmp_path / "clean.htp"
    assert run_profiled(program, clean, "free-new", "0").returncode == 0
    ok = subprocess.run([sys.executable, "-m", "heaptype", "check", str(clean), "--budget", str(budget)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
