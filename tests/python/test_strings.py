"""String-heavy code typed exactly: std::string's buffers as `char[] of std::string`.

tests/cpp/strings.cpp (a config-file parser: ostringstream, to_string, getline from an
istringstream, substr, map<string, string>, append) built the way a user builds, with
`heaptype --cflags/--ldflags --cxx <compiler>` and nothing else, per compiler and -std:

- g++ 12 and Debian's clang++ with libstdc++ (the macro mode; the typed
  ext/alloc_traits.h, the library's extern templates instantiated in the program);
- the ziglang wheel's Clang 22 with libc++: C++20 in the type-aware mode, below C++20
  the same flags fall back to the macro (new.hpp), and the link flags fit zig's linker.

Each build: the string row's live blocks and bytes at exit equal what the program
counts itself (sum of capacity() + 1 of the strings it keeps); the largest row is the
string's; at least 99% of the bytes the program allocates carry an exact type (a type
tag, not inferred); the rest of the bytes are the C++ runtime's own start-up blocks,
which a program that allocates nothing (baseline.cpp) has too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import heaptype
from conftest import CPP_DIR, run_preloaded, run_profiled
from test_findings import require_ziglang
from tooling import require_tool, run_once, shared_workdir

STRING_ROW = "char[] of std::string"
ROUNDS = "400"

GNU_BUILDS = [("g++", std) for std in ("c++11", "c++14", "c++17", "c++20", "c++23")] + [
    ("clang++", "c++17"), ("clang++", "c++20")]
ZIG_BUILDS = [("zig", std) for std in ("c++11", "c++17", "c++20", "c++23")]


def heaptype_flags(*args: str) -> tuple[list[str], str]:
    done = subprocess.run([sys.executable, "-m", "heaptype", *args], capture_output=True, text=True, check=True)
    return done.stdout.split(), done.stderr


def compiler(name: str) -> list[str]:
    return require_ziglang() if name == "zig" else [require_tool(name)]


def build(workdir: Path, cxx_name: str, std: str, source: str, link: str = "static") -> Path:
    """tests/cpp/<source>.cpp compiled and linked with heaptype's flags for this compiler,
    once per session; the object file is kept (its symbols say the capture mode). `link`:
    the static runtime, the shared one (`shared`), or the static runtime with libstdc++
    linked statically too (`static-libstdc++`)."""
    cxx = compiler(cxx_name)
    exe = workdir / f"{source}_{cxx_name.replace('+', 'x')}_{std}{'' if link == 'static' else '_' + link}"

    def make() -> None:
        cxx_text = " ".join(cxx)
        cflags, _ = heaptype_flags("--cflags", "--cxx", cxx_text)
        ldflags, _ = heaptype_flags("--ldflags", *(["--shared"] if link == "shared" else []), "--cxx", cxx_text)
        ldflags += ["-static-libstdc++"] if link == "static-libstdc++" else []
        for command in ([*cxx, f"-std={std}", "-O2", *cflags, "-c", str(CPP_DIR / f"{source}.cpp"), "-o",
                         str(exe.with_suffix(".o"))],
                        [*cxx, f"-std={std}", "-O2", str(exe.with_suffix(".o")), *ldflags, "-o", str(exe)]):
            done = subprocess.run(command, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-6000:]}"

    run_once(exe.with_suffix(".built"), make)
    return exe


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return shared_workdir(tmp_path_factory, "heaptype-strings")


def profile_and_truth(program: Path, tmp_path: Path, *args: str) -> tuple[heaptype.Profile, dict[str, int]]:
    output = tmp_path / f"{program.name}.htp"
    done = run_profiled(program, output, *args)
    assert done.returncode == 0, done.stderr
    truth = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", done.stdout)}
    return heaptype.load(output), truth


def exact_bytes(profile: heaptype.Profile) -> int:
    """Bytes of rows named by a type tag (not inferred from call sites, not untyped)."""
    return sum(row.bytes for row in profile.by_type() if row.type_tag)


def all_bytes(profile: heaptype.Profile) -> int:
    return sum(row.bytes for row in profile.by_type())


def startup_bytes(baseline: Path, tmp_path: Path) -> int:
    """What the C++ runtime allocates for itself in a program that allocates nothing
    (libstdc++'s exception pool; zig's static libc++ allocates nothing, and then the
    runtime never starts and writes no profile)."""
    output = tmp_path / f"{baseline.name}.htp"
    done = run_profiled(baseline, output)
    assert done.returncode == 0, done.stderr
    if not output.exists():
        return 0
    profile = heaptype.load(output)
    assert exact_bytes(profile) == 0
    return all_bytes(profile)


@pytest.mark.parametrize("cxx_name, std", GNU_BUILDS + ZIG_BUILDS)
def test_string_buffers_are_exact_and_named(workdir, tmp_path, cxx_name, std):
    profile, truth = profile_and_truth(build(workdir, cxx_name, std, "strings"), tmp_path, ROUNDS)
    strings = profile.type_row(STRING_ROW)
    assert strings is not None, [row.label for row in profile.by_type()]
    assert (strings.live_blocks, strings.live_bytes) == (truth["live_blocks"], truth["live_bytes"])
    assert strings.allocations > truth["live_blocks"]  # temporaries too: lines, substr, str(), copies
    assert max(profile.by_type(), key=lambda row: row.bytes).label == STRING_ROW
    # A vector<char> of 300 and a new char[500] are not strings: the `char` row.
    chars = profile.type_row("char")
    assert (chars.allocations, chars.objects, chars.bytes, chars.live_bytes) == (2, 800, 800, 800)
    program_bytes = all_bytes(profile) - startup_bytes(build(workdir, cxx_name, std, "baseline"), tmp_path)
    assert exact_bytes(profile) >= 0.99 * program_bytes, [(row.label, row.bytes) for row in profile.by_type()]


@pytest.mark.parametrize("std, mode_symbol", [("c++17", "heaptype_tag_new"), ("c++20", "heaptype_typed_new")])
def test_clang22_builds_below_and_from_cxx20_with_one_set_of_flags(workdir, std, mode_symbol):
    """`heaptype --cflags/--ldflags --cxx <zig's clang>` say the mode once; a C++17 unit
    takes the macro (it reports through heaptype_tag_new), a C++20 unit the type-aware
    operator new (heaptype_typed_new, and no macro report); zig's linker gets -rdynamic."""
    cxx_text = " ".join(require_ziglang())
    cflags, said = heaptype_flags("--cflags", "--cxx", cxx_text)
    assert said == "heaptype: type capture: type-aware (Clang 22: type-aware allocation; translation units " \
                   "below C++20 take the macro)\n"
    ldflags, _ = heaptype_flags("--ldflags", "--cxx", cxx_text)
    assert "-rdynamic" in ldflags and not [f for f in ldflags if "export-dynamic-symbol" in f]
    obj = build(workdir, "zig", std, "objects").with_suffix(".o")
    undefined = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True).stdout.split()
    other = {"heaptype_tag_new": "heaptype_typed_new", "heaptype_typed_new": "heaptype_tag_new"}[mode_symbol]
    assert mode_symbol in undefined and (other not in undefined or std == "c++17"), undefined


@pytest.mark.parametrize("std", ["c++17", "c++20"])
def test_totals_equal_heaptracks_on_the_plain_build(workdir, tmp_path, std):
    """The program instantiating libstdc++'s templates allocates what the plain build,
    calling libstdc++.so's copies, allocates: the same calls, the same peak."""
    heaptrack, printer = require_tool("heaptrack"), require_tool("heaptrack_print")
    plain = tmp_path / f"strings_plain_{std}"
    subprocess.run([require_tool("g++"), f"-std={std}", "-O2", "-g", str(CPP_DIR / "strings.cpp"), "-o", str(plain)],
                   check=True, capture_output=True)
    subprocess.run([heaptrack, "-o", str(tmp_path / "trace"), str(plain), ROUNDS], check=True, capture_output=True)
    text = subprocess.run([printer, str(next(tmp_path.glob("trace*")))], check=True, capture_output=True,
                          text=True).stdout
    calls = int(re.search(r"^calls to allocation functions: (\d+)", text, re.M).group(1))
    peak_kb = float(re.search(r"^peak heap memory consumption: ([\d.]+)K", text, re.M).group(1))
    profile, _ = profile_and_truth(build(workdir, "g++", std, "strings"), tmp_path, ROUNDS)
    assert profile.totals.allocations == calls
    assert round(profile.totals.peak_bytes / 1000, 2) == peak_kb  # heaptrack_print: 235.57K


# --- what the standard library allocates on the program's behalf ------------------------

THROWS = "5"


def rows_with_inference(profile: heaptype.Profile) -> dict[str, "heaptype._core.TypeGroup"]:
    return {row.label: row for row in profile.by_type(infer=True)}


@pytest.mark.parametrize("cxx_name, std", [("g++", "c++17"), ("g++", "c++20"), ("zig", "c++20")])
def test_library_blocks_are_typed_or_named(workdir, tmp_path, cxx_name, std):
    """tests/cpp/library_blocks.cpp: std::function, regex, a locale, exceptions, a thread,
    file streams, stdio. Nothing the library allocates under main() stays (untyped): the
    thrown objects, stdout's buffer, the locale, the filebuf, the thread's state have rows
    that say so. (Only a few bytes libstdc++ allocates at start-up, before any call
    path, remain untyped.)"""
    program = build(workdir, cxx_name, std, "library_blocks")
    output = tmp_path / "library_blocks.htp"
    done = run_profiled(program, output, THROWS, env={"LIBRARY_BLOCKS_FILE": str(tmp_path / "file.txt")})
    assert done.returncode == 0 and done.stdout.startswith(f"caught={THROWS} "), done.stderr
    profile = heaptype.load(output)
    rows = rows_with_inference(profile)
    thrown_row = "C++ runtime: exception object" if cxx_name == "zig" else "Thrown"  # see test_thrown_objects_...
    assert rows[thrown_row].allocations == int(THROWS)
    assert rows["glibc: stdio buffer"].live_blocks == 1  # stdout's, written to a pipe, live at exit
    assert rows["glibc: FILE of fopen"].allocations == 2  # the ofstream's and the ifstream's
    lib = "libc++" if cxx_name == "zig" else "libstdc++"
    assert {f"{lib}: std::locale", f"{lib}: std::thread state"} <= set(rows), sorted(rows)
    untyped = profile.call_paths(types=["(untyped)"], infer=True)
    assert all(row.path == ("(no call site)",) for row in untyped), [(r.path, r.bytes) for r in untyped]
    assert sum(row.bytes for row in untyped) < 64


# --- thrown objects, typed by the type they are thrown as ---------------------------------------

THROWN = 3
ABI_HEADER = 128  # libstdc++'s __cxa_refcounted_exception in front of a thrown object (x86-64)


def expected_thrown_rows(truth: dict[str, int]) -> dict[str, tuple[int, int, int, int]]:
    """tests/cpp/thrown_types.cpp's thrown objects: (allocations, objects, bytes, live bytes)
    per type; a row's block holds the ABI header and the object."""
    counts = {"Thrown": (THROWN + 1, truth["sizeof_thrown"]), "std::runtime_error": (THROWN + 1, truth["sizeof_error"]),
              "int": (THROWN + 2, truth["sizeof_int"]), "std::out_of_range": (1, truth["sizeof_out_of_range"])}
    return {label: (n, n, n * (ABI_HEADER + size), 0) for label, (n, size) in counts.items()}


def thrown_rows_of(profile: heaptype.Profile, labels) -> dict[str, tuple[int, int, int, int]]:
    rows = rows_with_inference(profile)
    return {label: (rows[label].allocations, rows[label].objects, rows[label].bytes, rows[label].live_bytes)
            for label in labels if label in rows}


def check_thrown_program_ran(done: subprocess.CompletedProcess) -> dict[str, int]:
    assert done.returncode == 0, done.stderr
    truth = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", done.stdout)}
    assert {k: truth[k] for k in ("thrown", "errors", "ints", "rethrown", "out_of_range")} == \
        {"thrown": THROWN, "errors": THROWN + 1, "ints": THROWN + 2, "rethrown": 2, "out_of_range": 1}
    return truth


@pytest.mark.parametrize("cxx_name, std, link", [
    ("g++", "c++17", "static"), ("g++", "c++20", "static"), ("g++", "c++17", "shared"),
    ("g++", "c++17", "static-libstdc++"), ("clang++", "c++17", "static"), ("clang++", "c++20", "static"),
    ("zig", "c++20", "static")])
def test_thrown_objects_are_typed_by_the_thrown_type(workdir, tmp_path, cxx_name, std, link):
    """tests/cpp/thrown_types.cpp: a class of the program, std::runtime_error and int thrown
    N, N+1 and N+2 times, a Thrown from std::make_exception_ptr rethrown twice, an
    std::out_of_range from vector::at. With libstdc++ each thrown object's block is a row
    of its type (the runtime's __cxa_throw / __cxa_init_primary_exception retype it);
    the two dependent exceptions of std::rethrow_exception stay the named row. zig's
    Clang links libc++abi statically, and so does g++ -static-libstdc++ with libstdc++:
    its __cxa_throw wins over the runtime's weak one, and every thrown object stays
    "C++ runtime: exception object". `shared`: linked with libheaptype.so, which comes
    before libstdc++.so in the lookup order."""
    program = build(workdir, cxx_name, std, "thrown_types", link)
    output = tmp_path / "thrown_types.htp"
    truth = check_thrown_program_ran(run_profiled(program, output, str(THROWN)))
    profile = heaptype.load(output)
    expected = expected_thrown_rows(truth)
    rows = rows_with_inference(profile)
    if cxx_name == "zig" or link == "static-libstdc++":
        assert thrown_rows_of(profile, expected) == {}
        thrown_objects = THROWN + (THROWN + 1) + (THROWN + 2) + 1 + 1
        assert rows["C++ runtime: exception object"].allocations == thrown_objects + 2
        return
    assert thrown_rows_of(profile, expected) == expected
    assert rows["C++ runtime: exception object"].allocations == 2


@pytest.mark.parametrize("build_flags, stripped", [([], False), ([], True), (["-no-pie"], True)],
                         ids=["symbols", "stripped", "stripped-no-pie"])
def test_thrown_objects_are_typed_in_a_preloaded_program(tmp_path, build_flags, stripped):
    """`heaptype run` on thrown_types.cpp built without HeapType: the preloaded runtime's
    __cxa_throw comes before libstdc++.so's and types the thrown objects the same way.
    Stripped (as distributions ship programs), the program's own typeinfos have no symbol:
    the symbolizer finds them by their dynamic relocations, in a position-independent
    executable and in a fixed-address one alike, and names Thrown as before."""
    cxx = require_tool("g++")
    exe = tmp_path / "thrown_types_plain"
    subprocess.run([cxx, "-std=c++17", "-O2", "-g", *build_flags, str(CPP_DIR / "thrown_types.cpp"), "-o", str(exe)],
                   check=True, capture_output=True)
    if stripped:
        subprocess.run([require_tool("strip"), "--strip-all", str(exe)], check=True)
        assert b"_ZTI6Thrown" not in exe.read_bytes(), "strip left the typeinfo's symbol"
    output = tmp_path / "thrown_types_plain.htp"
    done = run_preloaded(exe, output, str(THROWN))
    truth = check_thrown_program_ran(done)
    profile = heaptype.load(output)
    assert profile.mode == "preloaded"
    expected = expected_thrown_rows(truth)
    assert thrown_rows_of(profile, expected) == expected
    assert rows_with_inference(profile)["C++ runtime: exception object"].allocations == 2


def test_ldflags_fit_zig_behind_a_wrapper_of_another_name(tmp_path):
    """A wrapper script (as a build system's CXX) is recognised as zig's Clang by its
    --version, and gets -rdynamic instead of --export-dynamic-symbol."""
    zig = require_ziglang()
    wrapper = tmp_path / "clang++-22"
    wrapper.write_text(f"#!/bin/sh\nexec {' '.join(zig)} \"$@\"\n")
    wrapper.chmod(0o755)
    ldflags, _ = heaptype_flags("--ldflags", "--cxx", str(wrapper))
    assert "-rdynamic" in ldflags and not [f for f in ldflags if "export-dynamic-symbol" in f]
    gnu, _ = heaptype_flags("--ldflags", "--cxx", require_tool("g++"))
    assert "-rdynamic" not in gnu and [f for f in gnu if "export-dynamic-symbol" in f]


def test_copy_on_write_strings_of_a_preloaded_program_are_string_buffers(tmp_path):
    """A plain program built for libstdc++'s copy-on-write ABI (-D_GLIBCXX_USE_CXX11_ABI=0,
    as pip's cmake is) under `heaptype run`: its strings are allocated in libstdc++.so's
    `std::string::_Rep::_S_create`, one block a string (the _Rep, then the characters),
    in the row of the new ABI's string buffers, their objects the characters (they were
    once all called "std::runtime_error's message")."""
    cxx = require_tool("g++")
    exe = tmp_path / "cow_strings"
    subprocess.run([cxx, "-O2", "-g", "-D_GLIBCXX_USE_CXX11_ABI=0", str(CPP_DIR / "cow_strings.cpp"), "-o", str(exe)],
                   check=True, capture_output=True)
    output = tmp_path / "cow_strings.htp"
    done = run_preloaded(exe, output, "40")
    assert done.returncode == 0, done.stderr
    truth = {key: int(value) for key, value in (item.split("=") for item in done.stdout.split())}
    rows = rows_with_inference(heaptype.load(output))
    narrow, wide = rows["char[] of std::string (inferred)"], rows["wchar_t[] of std::wstring (inferred)"]
    assert (narrow.allocations, narrow.objects, narrow.bytes) == (40, truth["chars"], truth["bytes"])
    assert (wide.allocations, wide.objects, wide.bytes) == (1, 101, truth["wstring_bytes"])
    assert not [label for label in rows if "runtime_error" in label]


@pytest.mark.parametrize("cxx_name, std", [("g++", "c++11"), ("g++", "c++20"), ("clang++", "c++17")])
def test_copy_on_write_strings_built_with_heaptype_are_string_buffers(tmp_path, cxx_name, std):
    """The same program built with HeapType's flags (the macro mode): the copy-on-write
    string's block comes from a std::allocator<char> it rebinds to (which alone would
    say `char`), and counts as its characters after the 24-byte _Rep, exactly as the
    new ABI's buffers and the preloaded run's inference do."""
    cxx = compiler(cxx_name)
    cflags, _ = heaptype_flags("--cflags", "--cxx", cxx[0])
    ldflags, _ = heaptype_flags("--ldflags", "--cxx", cxx[0])
    exe = tmp_path / "cow_strings"
    command = [*cxx, f"-std={std}", "-O2", "-D_GLIBCXX_USE_CXX11_ABI=0", *cflags, str(CPP_DIR / "cow_strings.cpp"),
               *ldflags, "-o", str(exe)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    profile, truth = profile_and_truth(exe, tmp_path, "40")
    rows = {row.label: row for row in profile.by_type()}
    narrow, wide = rows["char[] of std::string"], rows["wchar_t[] of std::wstring"]
    assert (narrow.allocations, narrow.objects, narrow.bytes) == (40, truth["chars"], truth["bytes"])
    assert (wide.allocations, wide.objects, wide.bytes) == (1, 101, truth["wstring_bytes"])
    # The 5 strings of the program's own allocator (a std::allocator<char> too) allocate
    # through it, as it checks: its `char`.
    assert rows["char"].allocations == 5


# --- blocks of the standard library's functions without a symbol ----------------------------

FILESYSTEM_PATHS = 9


@pytest.mark.parametrize("built_with_heaptype", [False, True], ids=["preloaded", "built"])
def test_a_filesystem_paths_components_are_named_by_the_member_that_keeps_them(
        workdir, tmp_path, built_with_heaptype):
    """std::filesystem::path's members in libstdc++.so (stripped: .dynsym only) allocate
    the list of a path's components in local functions that have no symbol. Such blocks
    were `libstdc++: function without a symbol`; they are named by the nearest function
    of libstdc++ on their path that has one, a member of path: `libstdc++:
    std::filesystem::path`. The emergency pool, whose unnamed constructor the loader
    calls, keeps its own row. tests/cpp/filesystem_paths.cpp."""
    if built_with_heaptype:
        program = build(workdir, "g++", "c++17", "filesystem_paths")
        output = tmp_path / "built.htp"
        done = run_profiled(program, output, str(FILESYSTEM_PATHS))
    else:
        program = tmp_path / "filesystem_paths_plain"
        subprocess.run([require_tool("g++"), "-std=c++17", "-O2", "-g", str(CPP_DIR / "filesystem_paths.cpp"), "-o",
                        str(program)], check=True, capture_output=True)
        output = tmp_path / "preloaded.htp"
        done = run_preloaded(program, output, str(FILESYSTEM_PATHS))
    assert done.returncode == 0 and done.stdout == f"kept={FILESYSTEM_PATHS // 2}\n", done.stderr
    rows = rows_with_inference(heaptype.load(output))
    assert "libstdc++: function without a symbol" not in rows, sorted(rows)
    components = rows["libstdc++: std::filesystem::path"]
    # Each path does the same: the row's blocks are the same number for each path built,
    # and the same number of each kept (moved) path's are live at exit, none of the others'.
    kept = FILESYSTEM_PATHS // 2
    per_path, per_kept_path = divmod(components.allocations, FILESYSTEM_PATHS), divmod(components.live_blocks, kept)
    assert per_path[1] == 0 and per_kept_path[1] == 0, (components.allocations, components.live_blocks)
    assert 0 < per_kept_path[0] <= per_path[0], (per_kept_path, per_path)
    assert rows["libstdc++: emergency exception pool"].allocations == 1
