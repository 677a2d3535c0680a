"""The CMake package, used the way projects use it: real cmake, real compilers."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import heaptype
from heaptype.capture import flags
from tooling import require_tool

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "cmake-basic"
CMAKE_DIR = str(flags.cmake_dir())


def cmake() -> str:
    return require_tool("cmake")


def configure(source: Path, build: Path, *args: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([cmake(), "-S", str(source), "-B", str(build), *args],
                          capture_output=True, text=True, env=env)


def build_ok(build: Path) -> None:
    result = subprocess.run([cmake(), "--build", str(build)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def write_project(root: Path, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "main.cpp").write_text(
        "struct Widget { int a[4]; };\n"
        "int main() { Widget* w = new Widget[3]; delete[] w; return 0; }\n")
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(p LANGUAGES CXX)\n" + body)
    return root


def run_indexer(binary: Path, tmp_path: Path) -> heaptype.Profile:
    out = tmp_path / "indexer.htp"
    subprocess.run([str(binary)], check=True, capture_output=True,
                   env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    return heaptype.load(out)


def check_indexer_profile(profile: heaptype.Profile) -> None:
    """The example's truth: 200 documents of 400 words, 12 distinct words, a
    50-node cache of which one node leaks with the Entry it shares."""
    token = profile.type_row("Token")
    assert token is not None and token.allocations == 2000  # 10 vector growths per document
    assert token.live_bytes == 0
    cache = profile.type_row("CacheNode")
    assert (cache.allocations, cache.live_blocks) == (50, 1)
    entries = [r for r in profile.by_type() if r.type and r.type.startswith("std::_Sp_counted_ptr_inplace<Entry,")]
    assert len(entries) == 1 and entries[0].allocations == 12 and entries[0].live_blocks == 1
    nodes = [r for r in profile.by_type() if r.type and r.type.startswith("std::_Rb_tree_node<std::pair<")]
    assert len(nodes) == 1 and nodes[0].allocations == 12 and nodes[0].live_bytes == 0
    posting = profile.type_row("Posting")
    assert posting is not None and posting.live_blocks == 1  # the leaked Entry's postings


@pytest.mark.parametrize("compiler,generator", [
    ("g++", "Ninja"), ("g++", "Unix Makefiles"), ("clang++", "Ninja"), ("clang++", "Unix Makefiles"),
])
def test_example_builds_and_profiles(tmp_path, compiler, generator):
    cxx = require_tool(compiler)
    require_tool("ninja" if generator == "Ninja" else "make")
    build = tmp_path / "build"
    result = configure(EXAMPLE, build, "-G", generator, f"-DCMAKE_CXX_COMPILER={cxx}",
                       f"-DHeapType_DIR={CMAKE_DIR}")
    assert result.returncode == 0, result.stderr
    build_ok(build)
    assert (build / "indexer.map").is_file()
    check_indexer_profile(run_indexer(build / "indexer", tmp_path))


def test_stripped_binary_names_types_from_its_map_file(tmp_path):
    build = tmp_path / "build"
    assert configure(EXAMPLE, build, f"-DHeapType_DIR={CMAKE_DIR}").returncode == 0
    build_ok(build)
    subprocess.run([require_tool("strip"), str(build / "indexer")], check=True)
    check_indexer_profile(run_indexer(build / "indexer", tmp_path))


@pytest.fixture(scope="session")
def venv_with_heaptype(tmp_path_factory) -> Path:
    """A fresh virtual environment with the package installed from a wheel."""
    root = tmp_path_factory.mktemp("venv")
    wheels = root / "wheels"
    # Its own build dir: the project's build/ may be in use by another build.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels),
                    "-C", f"build-dir={root / 'build'}", str(REPO)], check=True, capture_output=True)
    venv = root / "env"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    wheel = next(wheels.glob("heaptype-*.whl"))
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                   check=True, capture_output=True)
    return venv


def activated(venv: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HeapType")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def test_plain_find_package_in_activated_venv(tmp_path, venv_with_heaptype):
    build = tmp_path / "build"
    result = configure(EXAMPLE, build, env=activated(venv_with_heaptype))
    assert result.returncode == 0, result.stderr
    cache = (build / "CMakeCache.txt").read_text()
    found = re.search(r"^HeapType_DIR:PATH=(.*)$", cache, re.M).group(1)
    assert Path(found).resolve() == (venv_with_heaptype / "share" / "cmake" / "HeapType").resolve()
    build_ok(build)
    check_indexer_profile(run_indexer(build / "indexer", tmp_path))


def test_installed_config_files_name_no_build_machine_paths(venv_with_heaptype):
    site = Path(subprocess.run([str(venv_with_heaptype / "bin" / "python"), "-c",
                                "import heaptype, os; print(os.path.dirname(heaptype.__file__))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    files = list((site / "cmake").glob("*.cmake"))
    files += list((venv_with_heaptype / "share" / "cmake" / "HeapType").glob("*.cmake"))
    assert sorted(f.name for f in files) == [
        "HeapTypeConfig.cmake", "HeapTypeConfig.cmake", "HeapTypeConfigVersion.cmake", "HeapTypeConfigVersion.cmake",
        "HeapTypeInstrument.cmake", "HeapTypeProjectInclude.cmake"]
    for f in files:
        text = f.read_text()
        for forbidden in (str(REPO), "/tmp/", "build/", str(venv_with_heaptype), sysconfig.get_path("data")):
            assert forbidden not in text, f"{f} contains {forbidden}"


@pytest.mark.parametrize("requested,ok", [("0.1", True), ("0.1.0", True), ("0.2", False), ("1.0", False)])
def test_find_package_honours_the_version(tmp_path, requested, ok):
    project = write_project(tmp_path / "p", f"find_package(HeapType {requested} CONFIG REQUIRED)\n")
    result = configure(project, tmp_path / "b", f"-DHeapType_DIR={CMAKE_DIR}")
    assert (result.returncode == 0) == ok, result.stderr
    if not ok:
        assert "HeapType" in result.stderr and "version" in result.stderr.lower()


def test_instrumenting_twice_adds_the_flags_once(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "add_executable(app main.cpp)\n"
        "heaptype_instrument(app)\nheaptype_instrument(app)\n"))
    build = tmp_path / "b"
    assert configure(project, build, f"-DHeapType_DIR={CMAKE_DIR}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON").returncode == 0
    commands = json.loads((build / "compile_commands.json").read_text())
    assert commands[0]["command"].count("heaptype/new.hpp") == 1
    build_ok(build)
    out = tmp_path / "app.htp"
    subprocess.run([str(build / "app")], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    widget = heaptype.load(out).type_row("Widget")
    assert (widget.allocations, widget.objects, widget.bytes) == (1, 3, 48)


def test_interface_library_is_a_clear_configure_error(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "add_library(headers INTERFACE)\nheaptype_instrument(headers)\n"))
    result = configure(project, tmp_path / "b", f"-DHeapType_DIR={CMAKE_DIR}")
    assert result.returncode != 0
    assert "heaptype_instrument(headers): cannot instrument a INTERFACE_LIBRARY target" in result.stderr


def test_unknown_option_is_a_clear_configure_error(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "add_executable(app main.cpp)\nheaptype_instrument(app CALLSTAK none)\n"))
    result = configure(project, tmp_path / "b", f"-DHeapType_DIR={CMAKE_DIR}")
    assert result.returncode != 0
    assert "unknown argument 'CALLSTAK'" in result.stderr


def test_target_compiled_for_heaptype_without_runtime_fails_to_link(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "heaptype_compile_options(opts TYPES ON STL_TYPES ON CALLSTACK none)\n"
        "add_executable(app main.cpp)\ntarget_compile_options(app PRIVATE ${opts})\n"))
    build = tmp_path / "b"
    assert configure(project, build, f"-DHeapType_DIR={CMAKE_DIR}").returncode == 0
    result = subprocess.run([cmake(), "--build", str(build)], capture_output=True, text=True)
    assert result.returncode != 0
    assert "heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype" in (
        result.stdout + result.stderr)


def test_instrument_all_switch_and_interface_target(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "add_executable(app main.cpp)\n"
        "add_executable(app2 main.cpp)\ntarget_link_libraries(app2 PRIVATE HeapType::instrument)\n"))
    build = tmp_path / "b"
    assert configure(project, build, f"-DHeapType_DIR={CMAKE_DIR}", "-DHEAPTYPE_INSTRUMENT_ALL=ON").returncode == 0
    build_ok(build)
    for app in ("app", "app2"):
        out = tmp_path / f"{app}.htp"
        subprocess.run([str(build / app)], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
        assert heaptype.load(out).type_row("Widget").objects == 3


def test_a_project_that_does_not_mention_heaptype_is_instrumented_from_the_command_line(tmp_path):
    """`-DCMAKE_PROJECT_INCLUDE=$(heaptype --cmake-dir)/HeapTypeProjectInclude.cmake`: an
    unmodified project, with a subproject of its own (CMake includes the file after each
    project()), gets every target instrumented, from this HeapType package."""
    root = tmp_path / "p"
    write_shapes_project(root, "add_subdirectory(sub)\nadd_executable(app app.cpp)\n"
                               "target_link_libraries(app PRIVATE shapes more)\n", find_package=False)
    (root / "sub").mkdir()
    (root / "sub" / "CMakeLists.txt").write_text(
        "project(sub LANGUAGES CXX)\nadd_library(shapes ../shapes.cpp)\nadd_library(more STATIC ../more.cpp)\n")
    assert "HeapType" not in (root / "CMakeLists.txt").read_text() + (root / "sub" / "CMakeLists.txt").read_text()
    build = tmp_path / "b"
    done = configure(root, build, f"-DCMAKE_PROJECT_INCLUDE={CMAKE_DIR}/HeapTypeProjectInclude.cmake")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "HeapType: instrumented 3 targets (HEAPTYPE_INSTRUMENT_ALL" in done.stdout, done.stdout
    build_ok(build)
    check_shapes_profile(build / "app", tmp_path)


def write_shapes_project(root: Path, body: str, find_package: bool = True) -> Path:
    """An executable using a shared and a static library, each allocating its own type."""
    write_project(root, ("find_package(HeapType CONFIG REQUIRED)\n" if find_package else "") + body)
    (root / "shapes.cpp").write_text("struct Circle { double r; };\nvoid* make_circle() { return new Circle{1.0}; }\n")
    (root / "more.cpp").write_text("struct Square { double s[2]; };\nvoid* make_square() { return new Square{}; }\n")
    (root / "app.cpp").write_text(
        "void* make_circle(); void* make_square();\n"
        "int main() { for (int i = 0; i < 5; ++i) { make_circle(); make_square(); } }\n")
    return root


def check_shapes_profile(app: Path, tmp_path: Path) -> None:
    out = tmp_path / "app.htp"
    subprocess.run([str(app)], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    profile = heaptype.load(out)
    assert (profile.type_row("Circle").allocations, profile.type_row("Circle").live_blocks) == (5, 5)
    assert (profile.type_row("Square").allocations, profile.type_row("Square").live_blocks) == (5, 5)


LIBRARIES = "add_library(shapes shapes.cpp)\nadd_library(more STATIC more.cpp)\n" \
            "add_executable(app app.cpp)\ntarget_link_libraries(app PRIVATE shapes more)\n"


def dynamic_symbols(binary: Path) -> set[str]:
    nm = subprocess.run([require_tool("nm"), "-D", "--defined-only", str(binary)],
                        check=True, capture_output=True, text=True).stdout
    return {line.split()[-1] for line in nm.splitlines() if line.strip()}


def test_instrument_all_with_shared_libs_links_the_runtime_into_executables_only(tmp_path):
    root = write_shapes_project(tmp_path / "p", LIBRARIES)
    build = tmp_path / "b"
    result = configure(root, build, f"-DHeapType_DIR={CMAKE_DIR}", "-DHEAPTYPE_INSTRUMENT_ALL=ON",
                       "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert result.returncode == 0, result.stderr
    assert ("-- HeapType: instrumented 3 targets (HEAPTYPE_INSTRUMENT_ALL, CALLSTACK frame-pointer, "
            "map files ON)") in result.stdout
    build_ok(build)
    library = build / "libshapes.so"
    exported = dynamic_symbols(library)
    assert not {"malloc", "free", "_Znwm", "__cyg_profile_func_enter"} & exported
    # the runtime's C entry points stay undefined in the library: the executable has them
    assert not [name for name in exported if name.startswith("heaptype_")]
    assert {"heaptype_tag_new", "malloc"} <= dynamic_symbols(build / "app")
    commands = json.loads((build / "compile_commands.json").read_text())
    assert all("-fno-omit-frame-pointer" in c["command"] and "heaptype/new.hpp" in c["command"]
               for c in commands)
    assert (build / "app.map").is_file() and (build / "libshapes.so.map").is_file()
    check_shapes_profile(build / "app", tmp_path)


def test_instrument_all_takes_the_call_stack_mode_and_skips_map_files(tmp_path):
    root = write_shapes_project(tmp_path / "p", LIBRARIES)
    build = tmp_path / "b"
    result = configure(root, build, f"-DHeapType_DIR={CMAKE_DIR}", "-DHEAPTYPE_INSTRUMENT_ALL=ON",
                       "-DHEAPTYPE_CALLSTACK=none", "-DHEAPTYPE_MAP_FILES=OFF",
                       "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")
    assert result.returncode == 0, result.stderr
    build_ok(build)
    commands = json.loads((build / "compile_commands.json").read_text())
    assert len(commands) == 3
    assert all("-DHEAPTYPE_NO_CALLSTACK" in c["command"] and "-fno-omit-frame-pointer" not in c["command"]
               for c in commands)
    assert not list(build.glob("*.map"))
    check_shapes_profile(build / "app", tmp_path)


def test_instrument_all_rejects_an_unknown_call_stack_mode(tmp_path):
    root = write_shapes_project(tmp_path / "p", LIBRARIES)
    result = configure(root, tmp_path / "b", f"-DHeapType_DIR={CMAKE_DIR}", "-DHEAPTYPE_INSTRUMENT_ALL=ON",
                       "-DHEAPTYPE_CALLSTACK=dwarf")
    assert result.returncode != 0
    assert "HEAPTYPE_CALLSTACK takes instrument, frame-pointer or none, not 'dwarf'" in result.stderr


def test_shared_and_static_libraries_can_be_instrumented(tmp_path):
    root = tmp_path / "p"
    write_project(root, (
        "find_package(HeapType CONFIG REQUIRED)\n"
        "add_library(shapes SHARED shapes.cpp)\nadd_library(more STATIC more.cpp)\n"
        "add_executable(app app.cpp)\ntarget_link_libraries(app PRIVATE shapes more)\n"
        "heaptype_instrument(shapes)\nheaptype_instrument(more)\nheaptype_instrument(app)\n"))
    (root / "shapes.cpp").write_text("struct Circle { double r; };\nvoid* make_circle() { return new Circle{1.0}; }\n")
    (root / "more.cpp").write_text("struct Square { double s[2]; };\nvoid* make_square() { return new Square{}; }\n")
    (root / "app.cpp").write_text(
        "void* make_circle(); void* make_square();\n"
        "int main() { for (int i = 0; i < 5; ++i) { make_circle(); make_square(); } }\n")
    build = tmp_path / "b"
    assert configure(root, build, f"-DHeapType_DIR={CMAKE_DIR}").returncode == 0
    build_ok(build)
    out = tmp_path / "app.htp"
    subprocess.run([str(build / "app")], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    profile = heaptype.load(out)
    assert (profile.type_row("Circle").allocations, profile.type_row("Circle").live_blocks) == (5, 5)
    assert (profile.type_row("Square").allocations, profile.type_row("Square").live_blocks) == (5, 5)


def test_ctest_budget_test_passes_then_fails_with_the_budget_report(tmp_path):
    """heaptype_add_test: CTest runs the example under profiling and judges its budget
    file with the shared engine; a stricter budget fails with the same report."""
    source = tmp_path / "src"
    shutil.copytree(EXAMPLE, source)
    build = tmp_path / "build"
    assert configure(source, build, f"-DHeapType_DIR={CMAKE_DIR}").returncode == 0
    build_ok(build)
    ctest = require_tool("ctest")
    passed = subprocess.run([ctest, "--test-dir", str(build), "--output-on-failure"], capture_output=True, text=True)
    assert passed.returncode == 0, passed.stdout
    assert "100% tests passed" in passed.stdout
    assert (build / "heaptype" / "indexer.htp").is_file()

    budget = source / "heap-budget.toml"
    budget.write_text(budget.read_text().replace('leaked = "56 B"', "leaked = 0"))
    failed = subprocess.run([ctest, "--test-dir", str(build), "--output-on-failure"], capture_output=True, text=True)
    assert failed.returncode != 0
    out = failed.stdout
    assert "heap budget exceeded: indexer" in out
    assert "CacheNode: leaked 56 B > limit 0 B, over by 56 B" in out
    assert f"profile kept: {build / 'heaptype' / 'indexer.htp'}" in out


def test_heaptype_add_test_rejects_a_missing_budget_file(tmp_path):
    project = write_project(tmp_path / "p", (
        "find_package(HeapType CONFIG REQUIRED)\nenable_testing()\n"
        "add_executable(app main.cpp)\nheaptype_instrument(app)\n"
        "heaptype_add_test(NAME app COMMAND app BUDGET nowhere.toml)\n"))
    result = configure(project, tmp_path / "b", f"-DHeapType_DIR={CMAKE_DIR}")
    assert result.returncode != 0
    message = " ".join(result.stderr.split())  # CMake wraps long messages
    assert "heaptype_add_test(app): budget file" in message and "nowhere.toml does not exist" in message


@pytest.mark.parametrize("signature", ["plain", "keyword"])
def test_instrument_works_with_either_target_link_libraries_signature(tmp_path, signature):
    """CMake refuses to mix target_link_libraries(app lib) and (app PRIVATE lib) on one
    target; existing projects use both, and heaptype_instrument() must suit either."""
    require_tool("g++")
    link = "target_link_libraries(app m)" if signature == "plain" else "target_link_libraries(app PRIVATE m)"
    root = write_project(tmp_path / "src", f"find_package(HeapType CONFIG REQUIRED)\nadd_executable(app main.cpp)\n"
                                           f"{link}\nheaptype_instrument(app)\n{link}\n")
    build = tmp_path / "build"
    result = configure(root, build, f"-DHeapType_DIR={CMAKE_DIR}")
    assert result.returncode == 0, result.stdout + result.stderr
    # configure says which HeapType it found, once, with its version and where it is
    found = [line for line in result.stdout.splitlines() if line.startswith("-- Found HeapType")]
    assert found == [f"-- Found HeapType {heaptype.__version__}: {flags.cmake_dir().parent}"]
    build_ok(build)
    profile = run_indexer(build / "app", tmp_path)
    widgets = profile.type_row("Widget")
    assert widgets is not None and widgets.allocations == 1 and widgets.bytes == 48


CAPTURE_PROJECT = "find_package(HeapType CONFIG REQUIRED)\nadd_executable(app main.cpp)\nheaptype_instrument(app)\n"


def test_capture_mode_is_chosen_by_compiler_and_said(tmp_path):
    """g++ keeps the new macro; HEAPTYPE_CAPTURE forces a mode; each is said once."""
    cxx = require_tool("g++")
    source = write_project(tmp_path / "src", CAPTURE_PROJECT)
    auto = configure(source, tmp_path / "auto", f"-DCMAKE_CXX_COMPILER={cxx}", f"-DHeapType_DIR={CMAKE_DIR}")
    assert auto.returncode == 0, auto.stdout + auto.stderr
    said = [line for line in auto.stdout.splitlines() if "HeapType: type capture:" in line]
    assert len(said) == 1 and re.search(r"type capture: macro \(GNU \d", said[0]), said
    build_ok(tmp_path / "auto")
    forced = configure(source, tmp_path / "forced", f"-DCMAKE_CXX_COMPILER={cxx}", f"-DHeapType_DIR={CMAKE_DIR}",
                       "-DHEAPTYPE_CAPTURE=type-aware")
    assert "HeapType: type capture: type-aware (GNU" in forced.stdout and "forced" in forced.stdout
    bad = configure(source, tmp_path / "bad", f"-DCMAKE_CXX_COMPILER={cxx}", f"-DHeapType_DIR={CMAKE_DIR}",
                    "-DHEAPTYPE_CAPTURE=typeaware")
    assert bad.returncode != 0 and "HEAPTYPE_CAPTURE takes auto, macro or type-aware" in bad.stderr


def zig_cxx(tmp_path: Path) -> Path:
    """The ziglang wheel's Clang 22, behind a one-line wrapper (CMake wants one path)."""
    try:
        import ziglang  # noqa: F401
    except ImportError:
        require_tool("ziglang (pip install ziglang)")
    wrapper = tmp_path / "zig-c++"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ziglang c++ "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def test_instrument_all_says_when_the_linker_writes_no_map_file(tmp_path):
    """zig's linker writes no map file: the targets get none, and the summary says so
    (it said "map files ON")."""
    root = write_shapes_project(tmp_path / "p", LIBRARIES)
    result = configure(root, tmp_path / "b", f"-DCMAKE_CXX_COMPILER={zig_cxx(tmp_path)}", f"-DHeapType_DIR={CMAKE_DIR}",
                       "-DHEAPTYPE_INSTRUMENT_ALL=ON")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("map files OFF: the linker writes none, the symbol table names the types)") in result.stdout, result.stdout


def test_clang_22_gets_the_type_aware_mode(tmp_path):
    wrapper = zig_cxx(tmp_path)
    source = write_project(tmp_path / "src", CAPTURE_PROJECT + "set_target_properties(app PROPERTIES CXX_STANDARD 20)\n")
    done = configure(source, tmp_path / "build", f"-DCMAKE_CXX_COMPILER={wrapper}", f"-DHeapType_DIR={CMAKE_DIR}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"HeapType: type capture: type-aware \(Clang 22[.\d]*: type-aware allocation; translation units "
                     r"below C\+\+20 take the macro\)", done.stdout)
    build_ok(tmp_path / "build")
    profile = run_indexer(tmp_path / "build" / "app", tmp_path)
    widget = profile.type_row("Widget")
    assert (widget.allocations, widget.objects, widget.bytes, widget.live_blocks) == (1, 3, 48, 0)


PLUGIN_HOST = r'''
#include <dlfcn.h>
#include <cstdio>
int main(int argc, char** argv) {
  void* plugin = dlopen(argv[1], RTLD_NOW);
  if (!plugin) { std::printf("dlopen failed: %s\n", dlerror()); return 1; }
  auto make = reinterpret_cast<void* (*)(int)>(dlsym(plugin, "make_gadgets"));
  return make && make(4) ? 0 : 2;
}
'''

PLUGIN = r'''
struct Gadget { long id[3]; };
extern "C" void* make_gadgets(int n) {
  void* last = nullptr;
  for (int i = 0; i < n; ++i) last = new Gadget{{i, i, i}};
  return last;
}
'''


def test_instrument_all_executable_exports_the_runtime_to_a_dlopened_module(tmp_path):
    """A MODULE library (a plugin the executable dlopen()s) is compiled for HeapType and
    uses the executable's runtime: the executable must export the runtime's entry points.
    CMake once handed the linker an empty option for them, and the plugin failed to load
    (undefined symbol heaptype_link_error__...)."""
    root = tmp_path / "p"
    root.mkdir()
    (root / "host.cpp").write_text(PLUGIN_HOST)
    (root / "plugin.cpp").write_text(PLUGIN)
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(p LANGUAGES CXX)\nfind_package(HeapType CONFIG REQUIRED)\n"
        "add_executable(host host.cpp)\ntarget_link_libraries(host PRIVATE ${CMAKE_DL_LIBS})\n"
        "add_library(plugin MODULE plugin.cpp)\n")
    build = tmp_path / "b"
    result = configure(root, build, f"-DHeapType_DIR={CMAKE_DIR}", "-DHEAPTYPE_INSTRUMENT_ALL=ON")
    assert result.returncode == 0, result.stderr
    build_ok(build)
    exported = dynamic_symbols(build / "host")
    assert {"heaptype_tag_new", "heaptype_hint", "heaptype_start", "heaptype_typed_new",
            "heaptype_link_error__program_compiled_with_heaptype_new_hpp_must_link_libheaptype"} <= exported
    out = tmp_path / "host.htp"
    done = subprocess.run([str(build / "host"), str(build / "libplugin.so")], capture_output=True, text=True,
                          env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    assert done.returncode == 0, done.stdout + done.stderr
    gadget = heaptype.load(out).type_row("Gadget")
    assert (gadget.allocations, gadget.live_blocks) == (4, 4)


RAW_ALLOCATOR_HEADER = """#ifndef RAW_ALLOCATOR_H
#define RAW_ALLOCATOR_H
#include <cstddef>
// As jsoncpp's SecureAllocator: `operator new` spelled by name in a header.
template <class T> T* raw_allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T))); }
template <class T> void raw_release(T* p) { ::operator delete(p); }
#endif
"""


def write_operator_new_project(root: Path) -> Path:
    """An unmodified project whose header calls `::operator new` by name (included by
    main.cpp, which also has new-expressions of its own), and whose pool.cpp declares a
    class's own operator new in the source file itself."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "raw_allocator.h").write_text(RAW_ALLOCATOR_HEADER)
    (root / "main.cpp").write_text(
        '#include "raw_allocator.h"\n'
        "struct Widget { int a[4]; };\nstruct Gadget { double d; };\nvoid* make_pooled();\n"
        "int main() {\n"
        "  for (int i = 0; i < 7; ++i) { Widget* w = new Widget[3]; delete[] w; }\n"
        "  for (int i = 0; i < 5; ++i) raw_release(raw_allocate<Gadget>(2));\n"
        "  for (int i = 0; i < 4; ++i) make_pooled();\n"
        "}\n")
    (root / "pool.cpp").write_text(
        "#include <cstddef>\n#include <new>\n"
        "struct Pooled {\n"
        "  long v[2];\n"
        "  static void* operator new(std::size_t n) { return ::operator new(n); }\n"
        "  static void operator delete(void* p) { ::operator delete(p); }\n"
        "};\n"
        "void* make_pooled() { return new Pooled{}; }\n")
    (root / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.19)\nproject(p LANGUAGES CXX)\nadd_executable(app main.cpp pool.cpp)\n")
    return root


def test_code_that_spells_operator_new_by_name_builds_unmodified(tmp_path):
    """The new macro cannot compile `::operator new(n)` spelled after it (jsoncpp's
    allocator.h, abseil's), nor a class's own operator new: an unmodified project stopped
    at its first such file. The targets' compiles go through heaptype-compile.sh, which
    reads such a header before the macro (main.cpp keeps its Widget[3]s typed; the header's
    raw blocks are untyped, as they are everywhere) and compiles a source file that spells
    it itself without the macro (pool.cpp: its Pooled blocks are untyped), and says so.
    With HEAPTYPE_MACRO_FALLBACK=OFF the compiler's error stands."""
    root = write_operator_new_project(tmp_path / "p")
    include = f"-DCMAKE_PROJECT_INCLUDE={CMAKE_DIR}/HeapTypeProjectInclude.cmake"
    build = tmp_path / "b"
    done = configure(root, build, include)
    assert done.returncode == 0, done.stdout + done.stderr
    built = subprocess.run([cmake(), "--build", str(build)], capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    said = [line for line in (built.stdout + built.stderr).splitlines() if line.startswith("heaptype: ")]
    header = str(root / "raw_allocator.h")
    assert len(said) == 2, said
    assert said[0].startswith(f"heaptype: {root / 'main.cpp'}: {header}:5:") and \
        f"read {header} before the new macro" in said[0], said
    assert said[1].startswith(f"heaptype: {root / 'pool.cpp'}: {root / 'pool.cpp'}:") and \
        "compiled without the new macro" in said[1], said
    out = tmp_path / "app.htp"
    subprocess.run([str(build / "app")], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    rows = {row.type: (row.allocations, row.objects, row.bytes) for row in heaptype.load(out).by_type()}
    assert rows["Widget"] == (7, 21, 7 * 48), rows
    assert "Gadget" not in rows and "Pooled" not in rows, rows
    untyped = rows[None]  # the raw Gadget blocks and the Pooled ones, beside the C++ runtime's own
    assert untyped[0] >= 5 + 4, rows

    strict = tmp_path / "strict"
    assert configure(root, strict, include, "-DHEAPTYPE_MACRO_FALLBACK=OFF").returncode == 0
    failed = subprocess.run([cmake(), "--build", str(strict)], capture_output=True, text=True)
    assert failed.returncode != 0
    assert "heaptype_new_macro__to_declare_an_operator_new_include_heaptype_undef_new_h" in failed.stdout + failed.stderr


def test_the_compile_launcher_serves_other_build_systems_with_relative_paths(tmp_path):
    """`sh $(heaptype --cmake-dir)/heaptype-compile.sh g++ ...` in front of a Makefile's
    compiler: `-c -o main.o main.cpp` in make's order, the header found relative to the
    directory the compiler runs in. The header is read before the macro by its absolute
    path, and main.cpp's Widget[3]s stay typed."""
    root = write_operator_new_project(tmp_path / "p")
    launcher = ["sh", f"{CMAKE_DIR}/heaptype-compile.sh", require_tool("g++")]
    cflags = subprocess.run([sys.executable, "-m", "heaptype", "--cflags"], check=True, capture_output=True,
                            text=True).stdout.split()
    ldflags = subprocess.run([sys.executable, "-m", "heaptype", "--ldflags"], check=True, capture_output=True,
                             text=True).stdout.split()
    said = []
    for source in ("main.cpp", "pool.cpp"):
        done = subprocess.run([*launcher, "-O2", *cflags, "-c", "-o", source.replace(".cpp", ".o"), source],
                              cwd=root, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        said += [line for line in done.stderr.splitlines() if line.startswith("heaptype: ")]
    assert said[0].startswith("heaptype: main.cpp: raw_allocator.h:5:") and \
        f"read {root / 'raw_allocator.h'} before the new macro" in said[0], said
    assert said[1].startswith("heaptype: pool.cpp: pool.cpp:") and "compiled without the new macro" in said[1], said
    linked = subprocess.run([*launcher, "main.o", "pool.o", *ldflags, "-o", "app"], cwd=root, capture_output=True,
                            text=True)
    assert linked.returncode == 0 and "heaptype: " not in linked.stderr, linked.stderr
    out = tmp_path / "app.htp"
    subprocess.run([str(root / "app")], check=True, env={**os.environ, "HEAPTYPE_OUTPUT": str(out)})
    rows = {row.type: row.allocations for row in heaptype.load(out).by_type()}
    assert rows["Widget"] == 7 and "Gadget" not in rows and "Pooled" not in rows, rows
