"""The Bazel rules (bazel/, shipped in the wheel: `heaptype --bazel-dir`), used for real.

Debian's bazel-bootstrap (Bazel 4.2.3), offline: the rules_cc, rules_java and
remote_coverage_tools stand-ins of bazel/shims are passed with --override_repository.

One Bazel workspace per test session, shared by the pytest-xdist workers (an flock
guards its creation; Bazel itself serialises commands on one output base): a copy of
examples/bazel-basic plus a package `plain` of unmodified BUILD rules. Every command runs
with --batch, so no Bazel server outlives the tests.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from xml.etree import ElementTree

import pytest

import heaptype
from heaptype.capture import flags
from heaptype.analyze.symbols import elf_type_tags
from tooling import require_tool

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "bazel-basic"
CMAKE_EXAMPLE = REPO / "examples" / "cmake-basic"

INDEXER_TYPES = {
    "Token", "Posting", "CacheNode",
    "std::_Rb_tree_node<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, "
    "std::allocator<char>> const, std::shared_ptr<Entry>>>",
    "std::_Sp_counted_ptr_inplace<Entry, std::allocator<void>, (__gnu_cxx::_Lock_policy)2>",
    "char[] of std::string",  # the map's keys and the words' buffers
}
# The runtime's own tag, in every binary it is linked into: blocks whose constructor threw.
RUNTIME_TYPES = {"heaptype::constructor_threw"}

# A project that knows nothing of HeapType: --config=heaptype must profile it as it is.
PLAIN_BUILD = """\
cc_library(name = "shapes", srcs = ["shapes.cc"], hdrs = ["shapes.h"])

cc_binary(name = "app", srcs = ["app.cc"], deps = [":shapes"])

# A tool run during the build (host configuration): it stays uninstrumented.
cc_binary(name = "generator", srcs = ["generator.cc"])

genrule(
    name = "generated",
    outs = ["generated.txt"],
    cmd = "$(location :generator) > $@ && ls >> $@",
    tools = [":generator"],
)
"""
PLAIN_SOURCES = {
    "shapes.h": "#pragma once\n#include <vector>\nstruct Circle { double r; };\n"
                "std::vector<Circle>* make_circles(int n);\n",
    "shapes.cc": '#include "plain/shapes.h"\n'
                 "std::vector<Circle>* make_circles(int n) {\n"
                 "  auto* v = new std::vector<Circle>();\n"
                 "  for (int i = 0; i < n; ++i) v->push_back(Circle{1.0 * i});\n"
                 "  return v;\n}\n",
    "app.cc": '#include <map>\n#include "plain/shapes.h"\n'
              "struct Widget { int a[4]; };\n"
              "int main() {\n"
              "  Widget* w = new Widget[3]; delete[] w;\n"
              "  delete make_circles(5);\n"
              "  std::map<int, Widget> m; for (int i = 0; i < 7; ++i) m[i] = Widget{};\n"
              "}\n",
    "generator.cc": "#include <cstdio>\n#include <vector>\n"
                    'int main() { std::vector<int> v(10); std::printf("%zu\\n", v.size()); }\n',
}

# Code that spells `operator new` by name, as abseil's and jsoncpp's do: in a header
# (raw_allocator.h, included by main.cc) and in a source file (pool.cc's class).
SPELLED_BUILD = """\
cc_binary(name = "app", srcs = ["main.cc", "pool.cc", "raw_allocator.h"])
"""
SPELLED_SOURCES = {
    "raw_allocator.h": "#ifndef RAW_ALLOCATOR_H\n#define RAW_ALLOCATOR_H\n#include <cstddef>\n"
                       "template <class T> T* raw_allocate(std::size_t n) {\n"
                       "  return static_cast<T*>(::operator new(n * sizeof(T)));\n}\n"
                       "template <class T> void raw_release(T* p) { ::operator delete(p); }\n#endif\n",
    "main.cc": '#include "spelled/raw_allocator.h"\n'
               "struct Widget { int a[4]; };\nstruct Gadget { double d; };\nvoid* make_pooled();\n"
               "int main() {\n"
               "  for (int i = 0; i < 7; ++i) { Widget* w = new Widget[3]; delete[] w; }\n"
               "  for (int i = 0; i < 5; ++i) raw_release(raw_allocate<Gadget>(2));\n"
               "  for (int i = 0; i < 4; ++i) make_pooled();\n"
               "}\n",
    "pool.cc": "#include <cstddef>\n#include <new>\n"
               "struct Pooled {\n"
               "  long v[2];\n"
               "  static void* operator new(std::size_t n) { return ::operator new(n); }\n"
               "  static void operator delete(void* p) { ::operator delete(p); }\n"
               "};\n"
               "void* make_pooled() { return new Pooled{}; }\n",
}

# heaptype_cc_test, and heaptype_budget_test over a program built WITHOUT HeapType.
CHECKS_BUILD = """\
load("@heaptype//:defs.bzl", "heaptype_budget_test", "heaptype_cc_test")

heaptype_cc_test(name = "recording_test", srcs = ["recording_test.cc"], copts = ["-std=c++17"])

cc_binary(name = "unprofiled", srcs = ["unprofiled.cc"])

heaptype_budget_test(
    name = "unprofiled_heap",
    binary = ":unprofiled",
    budget = "//:heap-budget.toml",
    tags = ["manual"],
)
"""
CHECKS_SOURCES = {
    # No #include of HeapType: the macro force-includes heaptype/new.hpp.
    "recording_test.cc": "#include <cstdlib>\n#include <string>\n"
                         "struct Gadget { long x[2]; };\n"
                         "int main() {\n"
                         "  Gadget* g = new Gadget[4];\n"
                         "  if (!heaptype::recording()) return 1;\n"
                         '  std::string out = std::string(std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) + "/gadget.htp";\n'
                         "  bool dumped = heaptype::dump(out.c_str());\n"
                         "  delete[] g;\n"
                         "  return dumped ? 0 : 2;\n"
                         "}\n",
    "unprofiled.cc": "int main() { return 0; }\n",
}

# A GoogleTest program checked case by case, in 3 shards and whole: Big.Blobs is over
# budget.toml (8 blobs of 1 KiB against 4 KiB), within raised.toml.
SHARDS_BUILD = """\
load("@heaptype//:defs.bzl", "heaptype_budget_test", "heaptype_cc_binary")

heaptype_cc_binary(
    name = "cases",
    srcs = ["cases.cc"],
    copts = ["-std=c++17"],
    linkopts = ["-lgtest", "-lgtest_main", "-lpthread"],
)

heaptype_budget_test(name = "cases_heap", binary = ":cases", budget = "budget.toml", test_name = "cases",
                     shard_count = 3, tags = ["manual"])

heaptype_budget_test(name = "cases_heap_unsharded", binary = ":cases", budget = "budget.toml", test_name = "cases",
                     tags = ["manual"])

heaptype_budget_test(name = "cases_heap_raised", binary = ":cases", budget = "raised.toml", test_name = "cases",
                     shard_count = 3)
"""
SHARDS_BUDGET = """\
[[tests]]
name = "cases"                          # every case: cases[Suite.Case] gets this entry too
command = ["shards/cases"]
[tests.types."Leaf"]
allocations = 8

[[tests]]
name = "cases[Big.Blobs]"
command = ["shards/cases", "--gtest_filter=Big.Blobs"]
[tests.types."Blob"]
peak = "{peak}"
"""
BLOBS = 8
SHARDS_SOURCES = {
    "cases.cc": "#include <gtest/gtest.h>\n#include <memory>\n#include <vector>\n"
                "struct Blob { char bytes[1024]; };\nstruct Leaf { int value; };\n"
                f"constexpr int kBlobs = {BLOBS};\n"
                "TEST(Small, One) { std::unique_ptr<Leaf> leaf(new Leaf()); EXPECT_EQ(leaf->value, 0); }\n"
                "TEST(Small, Two) { std::vector<Leaf> leaves(2); EXPECT_EQ(leaves.size(), 2u); }\n"
                "TEST(Small, Three) { std::unique_ptr<Leaf[]> leaves(new Leaf[3]()); EXPECT_EQ(leaves[2].value, 0); }\n"
                "TEST(Small, Four) { std::vector<std::unique_ptr<Leaf>> v; v.emplace_back(new Leaf()); EXPECT_EQ(v.size(), 1u); }\n"
                "TEST(Big, Blobs) {\n"
                "  std::vector<std::unique_ptr<Blob>> blobs;\n"
                "  for (int i = 0; i < kBlobs; ++i) blobs.emplace_back(new Blob());\n"
                "  EXPECT_EQ(blobs.size(), static_cast<size_t>(kBlobs));\n}\n",
    "budget.toml": SHARDS_BUDGET.format(peak="4 KiB"),
    "raised.toml": SHARDS_BUDGET.format(peak="16 KiB"),
}
SHARDS_CASES = ["Small.One", "Small.Two", "Small.Three", "Small.Four", "Big.Blobs"]



class Bazel:
    """One workspace and one output root for the whole test session."""

    def __init__(self, root: Path):
        self.root = root
        self.workspace = root / "workspace"
        self.bazel_dir = Path(flags.bazel_dir())
        self.rc = root / "session.bazelrc"
        self.output_user_root = root / "output"
        self._info: dict = {}

    def create(self) -> None:
        shutil.copytree(EXAMPLE, self.workspace, ignore=shutil.ignore_patterns("bazel-*"))
        # The copy's relative path to the CMake example's sources, made absolute.
        workspace_file = self.workspace / "WORKSPACE"
        text = workspace_file.read_text()
        assert 'path = "../cmake-basic/src"' in text
        workspace_file.write_text(text.replace('path = "../cmake-basic/src"', f'path = "{CMAKE_EXAMPLE / "src"}"'))
        for package, build, sources in (("plain", PLAIN_BUILD, PLAIN_SOURCES), ("checks", CHECKS_BUILD, CHECKS_SOURCES),
                                        ("shards", SHARDS_BUILD, SHARDS_SOURCES),
                                        ("spelled", SPELLED_BUILD, SPELLED_SOURCES)):
            (self.workspace / package).mkdir()
            (self.workspace / package / "BUILD.bazel").write_text(build)
            for name, text in sources.items():
                (self.workspace / package / name).write_text(text)
        (self.workspace / "BUILD.bazel").write_text(
            (self.workspace / "BUILD.bazel").read_text() + '\nexports_files(["heap-budget.toml"])\n')
        shims = self.bazel_dir / "shims"
        self.rc.write_text("\n".join([
            # The rules as installed in the wheel, not the source tree's copy.
            f"build --override_repository=heaptype={self.bazel_dir}",
            f"build --override_repository=rules_cc={shims / 'rules_cc'}",
            f"build --override_repository=rules_java={shims / 'rules_java'}",
            f"build --override_repository=remote_coverage_tools={shims / 'remote_coverage_tools'}",
            "build --nosandbox_debug",  # Debian's /etc/bazel/bazelrc turns it on
            "build --show_result=0",
            "test --test_output=errors",
            f"import {self.bazel_dir / 'heaptype.bazelrc'}",
            "",
        ]))

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HEAPTYPE_", "BAZEL"))}
        env["HEAPTYPE_PYTHON"] = sys.executable  # the interpreter these tests import heaptype from
        env["CC"] = require_tool("gcc")  # the compiler the CMake build uses too
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 600, workspace: Path | None = None,
            output_base: Path | None = None) -> subprocess.CompletedProcess:
        """`bazel args...` in the session's workspace, or in `workspace` (a copy of it);
        in the workspace's own output base under the session's output root, or in
        `output_base`."""
        startup = [f"--output_base={output_base}"] if output_base else []
        command = [require_tool("bazel"), f"--output_user_root={self.output_user_root}", *startup,
                   f"--bazelrc={self.rc}", "--batch", *args]
        done = subprocess.run(command, cwd=workspace or self.workspace, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)
        if check and done.returncode != 0:
            pytest.fail(f"$ bazel {' '.join(args)}\nexit {done.returncode}\n{done.stderr[-8000:]}", pytrace=False)
        return done

    def info(self, key: str, *args: str) -> Path:
        """`bazel info KEY` (cached: the workspace and its options stay put for the session)."""
        if (key, args) not in self._info:
            self._info[(key, args)] = Path(self.run("info", *args, key).stdout.strip())
        return self._info[(key, args)]


@pytest.fixture(scope="session")
def bazel(tmp_path_factory) -> Bazel:
    require_tool("bazel")
    base = tmp_path_factory.getbasetemp()
    # Under xdist every worker has its own basetemp; their parent is shared.
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "heaptype-bazel"
    root.mkdir(exist_ok=True)
    session = Bazel(root)
    with open(root / "create.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "created").exists():
            session.create()
            (root / "created").touch()
    return session


def run_profiled(binary: Path, profile: Path, *args: str, cwd: Path | None = None) -> heaptype.Profile:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    env["HEAPTYPE_OUTPUT"] = str(profile)
    subprocess.run([str(binary), *args], check=True, capture_output=True, env=env, cwd=cwd)
    return heaptype.load(profile)


def per_type(profile: heaptype.Profile) -> dict:
    return {row.label: (row.allocations, row.objects, row.bytes, row.peak_bytes, row.live_bytes, row.live_blocks)
            for row in profile.by_type()}


# --- without Bazel ----------------------------------------------------------------------------

def test_bazel_dir_is_the_repository_shipped_in_the_package():
    printed = subprocess.run([sys.executable, "-m", "heaptype", "--bazel-dir"], check=True,
                             capture_output=True, text=True).stdout.strip()
    assert Path(printed) == flags.bazel_dir() == Path(heaptype.__file__).parent / "bazel"
    for name in ("WORKSPACE", "MODULE.bazel", "BUILD.bazel", "defs.bzl", "repositories.bzl", "heaptype.bazelrc",
                 "tools/type_table.py", "tools/budget_test.py", "shims/rules_cc/cc/defs.bzl"):
        assert (Path(printed) / name).is_file(), name
        assert (Path(printed) / name).read_bytes() == (REPO / "bazel" / name).read_bytes(), \
            f"{name}: the installed copy is stale (pip install .)"


def test_bazel_example_builds_the_cmake_example_sources():
    """One copy of the program: the Bazel example's repository @indexer_sources is
    examples/cmake-basic/src."""
    assert not (EXAMPLE / "src").exists()
    assert 'path = "../cmake-basic/src"' in (EXAMPLE / "WORKSPACE").read_text()
    build = (EXAMPLE / "indexer_sources.BUILD").read_text()
    assert all(f'"{name}"' in build for name in ("index.cpp", "document.hpp", "main.cpp"))
    assert sorted(p.name for p in (CMAKE_EXAMPLE / "src").iterdir()) == ["document.hpp", "index.cpp", "main.cpp"]


def test_macros_build_the_example_and_the_aspect_writes_its_type_table(bazel, tmp_path):
    # Only the budget test on the command line: the aspect reaches the cc_binary through
    # its `binary` attribute.
    done = bazel.run("build", "//:indexer_heap", "--aspects=@heaptype//:defs.bzl%heaptype_aspect",
                     "--output_groups=+heaptype_types", "--show_result=10")
    assert re.search(r"heaptype_aspect of //:indexer_heap up-to-date:\n\s+bazel-bin/indexer.heaptype_types.json",
                     done.stderr), done.stderr[-3000:]
    bin_dir = bazel.info("bazel-bin")
    binary = bin_dir / "indexer"

    table = json.loads((bin_dir / "indexer.heaptype_types.json").read_text())
    assert table["binary"] == "//:indexer"
    names = [row["type"] for row in table["types"]]
    expected = INDEXER_TYPES | RUNTIME_TYPES
    assert set(names) == expected and len(names) == len(expected) == table["count"]
    # The symbolizer the profiles use, on the same binary, gives exactly this table.
    assert {int(row["tag"], 16): row["type"] for row in table["types"]} == elf_type_tags(str(binary))

    profile = run_profiled(binary, tmp_path / "indexer.htp")
    token = profile.type_row("Token")
    assert (token.allocations, token.live_bytes) == (2000, 0)
    cache = profile.type_row("CacheNode")
    assert (cache.allocations, cache.live_blocks) == (50, 1)


def test_generated_flags_are_the_package_flag_list(bazel):
    """@heaptype_install//:flags.bzl comes from flags.json: the macros' default options
    are `heaptype --cflags` with the package's include directory as Bazel names it."""
    external = bazel.info("output_base") / "external"
    if not (external / "heaptype_install" / "flags.bzl").exists():
        bazel.run("build", "--nobuild", "//:indexer")
    scope: dict = {}
    exec((external / "heaptype_install" / "flags.bzl").read_text(), scope)
    bazel_options = [token for group in ("headers", "types", "stl_types", "debug")
                     for option in scope["COMPILE"][group] for token in option]
    bazel_options += [token for option in scope["CALLSTACK"][flags.DEFAULT_CALLSTACK] for token in option]
    cflags = subprocess.run([sys.executable, "-m", "heaptype", "--cflags", "--cxx", "gcc"], check=True,
                            capture_output=True, text=True).stdout.split()
    relative = [flag.replace(str(flags.include_dir()), "external/heaptype_install/include") for flag in cflags]
    assert bazel_options == relative
    assert scope["LINKOPTS"] == [t for option in json.loads((flags.PACKAGE_DIR / "flags.json").read_text())
                                 ["link"]["static"] for t in option if "{lib}" not in t]


# --- budget tests -----------------------------------------------------------------------------

def test_budget_tests_pass_and_fail_with_the_budget_report_in_the_log(bazel):
    done = bazel.run("test", "//:indexer_heap", "//:indexer_over_budget", "//checks:unprofiled_heap",
                     "//checks:recording_test", check=False)
    assert done.returncode == 3, done.stderr[-4000:]  # 3: the build was fine, some tests failed
    summary = done.stdout + done.stderr
    assert re.search(r"//:indexer_heap\s+PASSED", summary), summary[-3000:]
    assert re.search(r"//:indexer_over_budget\s+FAILED", summary), summary[-3000:]
    assert re.search(r"//checks:unprofiled_heap\s+FAILED", summary), summary[-3000:]
    assert re.search(r"//checks:recording_test\s+PASSED", summary), summary[-3000:]

    testlogs = bazel.info("bazel-testlogs")
    passed = (testlogs / "indexer_heap" / "test.log").read_text()
    assert "heaptype check: indexer: within budget" in passed

    failed = (testlogs / "indexer_over_budget" / "test.log").read_text()
    assert "heap budget exceeded" in failed
    assert re.search(r"Token: peak live 30 KiB .*limit 16 KiB", failed), failed
    assert re.search(r"CacheNode: leaked 56 B .*limit 0 B", failed), failed
    assert "over-budget.toml:5" in failed  # where the broken limit was set
    assert "bazel-testlogs/indexer_over_budget/test.outputs/" in failed

    with zipfile.ZipFile(testlogs / "indexer_over_budget" / "test.outputs" / "outputs.zip") as outputs:
        assert sorted(outputs.namelist()) == ["indexer_over_budget.budget.txt", "indexer_over_budget.htp",
                                              "indexer_over_budget.report.txt"]
        assert "heap budget exceeded" in outputs.read("indexer_over_budget.budget.txt").decode()
        report = outputs.read("indexer_over_budget.report.txt").decode()
        assert "Token" in report
        # Nothing of the machine in what goes to a shared cache: the program by its runfiles path.
        assert re.search(r"^  program    bazel_basic/indexer 200 \(pid \d+\)$", report, re.M), report[:500]
        for text in (report, outputs.read("indexer_over_budget.budget.txt").decode()):
            assert str(bazel.output_user_root) not in text and str(bazel.workspace) not in text

    unprofiled = (testlogs / "checks" / "unprofiled_heap" / "test.log").read_text()
    assert "checks/unprofiled exited with status 0 and wrote no profile: build it with HeapType" in unprofiled

    # The test's own dump, and the profile the runtime writes among the undeclared
    # outputs by default (no HEAPTYPE_OUTPUT under bazel test).
    with zipfile.ZipFile(testlogs / "checks" / "recording_test" / "test.outputs" / "outputs.zip") as outputs:
        names = sorted(outputs.namelist())
        assert len(names) == 2 and names[0] == "gadget.htp", names
        assert re.fullmatch(r"heaptype\.recording_test\.\d+\.htp", names[1]), names
        with tempfile.TemporaryDirectory() as scratch:
            outputs.extract(names[1], scratch)
            gadget = heaptype.load(Path(scratch) / names[1]).type_row("Gadget")
            assert (gadget.allocations, gadget.objects, gadget.live_bytes) == (1, 4, 0)


def test_budget_test_names_no_machine_path_and_declares_its_inputs(bazel):
    """What a remote executor needs: the launcher refers to runfiles only (the interpreter
    aside, which --@heaptype//:python replaces), and the runfiles hold everything the
    check imports."""
    bazel.run("build", "//:indexer_heap")
    bin_dir = bazel.info("bazel-bin")
    launcher = (bin_dir / "indexer_heap").read_text()
    for machine_path in (str(bazel.workspace), str(bazel.output_user_root), str(REPO), str(flags.PACKAGE_DIR)):
        assert machine_path not in launcher
    runfiles = bin_dir / "indexer_heap.runfiles"
    for name in ("bazel_basic/indexer", "bazel_basic/heap-budget.toml", "heaptype/tools/budget_test.py",
                 "heaptype_install/python/heaptype/budget/evaluate.py", "heaptype_install/python/heaptype/run/runner.py",
                 "heaptype_install/python/heaptype/judge/check_command.py", "heaptype_install/python/heaptype/analyze/symbols.py"):
        assert (runfiles / name).exists(), name
    assert list((runfiles / "heaptype_install" / "python" / "heaptype").glob("_core*.so"))


# --- --config=heaptype ------------------------------------------------------------------------

def test_config_heaptype_profiles_an_unmodified_cc_binary(bazel, tmp_path):
    bazel.run("build", "--config=heaptype", "//plain:app", "//plain:generated")
    bin_dir = bazel.info("bazel-bin", "--config=heaptype")
    assert bin_dir.parent.name.endswith("-heaptype")  # its own output directory
    profile = run_profiled(bin_dir / "plain" / "app", tmp_path / "app.htp")
    widget = profile.type_row("Widget")
    assert (widget.allocations, widget.objects, widget.bytes) == (1, 3, 48)
    circles = profile.type_row("Circle")  # compiled in the cc_library, typed by the STL shim
    assert circles is not None and circles.allocations == 4 and circles.live_bytes == 0
    assert profile.type_row("std::vector<Circle, std::allocator<Circle>>").allocations == 1
    nodes = profile.type_row("std::_Rb_tree_node<std::pair<int const, Widget>>")
    assert nodes is not None and nodes.allocations == 7

    # The build's own tool ran uninstrumented: no runtime, no profile in its sandbox.
    generated = (bin_dir / "plain" / "generated.txt").read_text().split()
    assert generated[0] == "10" and not [name for name in generated if name.endswith(".htp")]


def test_config_heaptype_builds_code_that_spells_operator_new_by_name(bazel, tmp_path):
    """The new macro cannot compile `::operator new(n)` spelled after it, nor a class's own
    operator new: under --config=heaptype the toolchain's compiler runs behind
    heaptype-compile.sh, as the CMake package's typed targets do. main.cc compiles again
    with raw_allocator.h read before the macro (by the relative path Bazel checks its
    inputs by) and keeps its Widget[3]s typed; pool.cc compiles without the macro (its
    Pooled blocks untyped). Each says so in the build's output."""
    done = bazel.run("build", "--config=heaptype", "//spelled:app")
    said = [line for line in done.stderr.splitlines() if line.startswith("heaptype: ") and "spells" in line]
    assert len(said) == 2, done.stderr[-4000:]
    main = next(line for line in said if line.startswith("heaptype: spelled/main.cc: "))
    # The header as GCC found it, through Bazel's `-iquote .`.
    assert main.startswith("heaptype: spelled/main.cc: ./spelled/raw_allocator.h:5:") and \
        "read ./spelled/raw_allocator.h before the new macro" in main, said
    pool = next(line for line in said if line.startswith("heaptype: spelled/pool.cc: "))
    assert "compiled without the new macro" in pool, said
    bin_dir = bazel.info("bazel-bin", "--config=heaptype")
    profile = run_profiled(bin_dir / "spelled" / "app", tmp_path / "spelled.htp")
    rows = {row.type: (row.allocations, row.objects, row.bytes) for row in profile.by_type()}
    assert rows["Widget"] == (7, 21, 7 * 48), rows
    assert "Gadget" not in rows and "Pooled" not in rows, rows
    assert rows[None][0] >= 5 + 4, rows  # the raw Gadget blocks and the Pooled ones


# --- Bazel and CMake agree --------------------------------------------------------------------

def test_bazel_and_cmake_builds_of_the_example_report_the_same_per_type_counts(bazel, tmp_path):
    cmake = require_tool("cmake")
    build = tmp_path / "cmake-build"
    configure = subprocess.run([cmake, "-S", str(CMAKE_EXAMPLE), "-B", str(build),
                                f"-DHeapType_DIR={flags.cmake_dir()}", f"-DCMAKE_CXX_COMPILER={require_tool('g++')}"],
                               capture_output=True, text=True)
    assert configure.returncode == 0, configure.stderr
    compiled = subprocess.run([cmake, "--build", str(build)], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    bazel.run("build", "//:indexer")
    bazel_binary = bazel.info("bazel-bin") / "indexer"

    from_cmake = per_type(run_profiled(build / "indexer", tmp_path / "cmake.htp", "120"))
    from_bazel = per_type(run_profiled(bazel_binary, tmp_path / "bazel.htp", "120"))
    assert set(INDEXER_TYPES) <= set(from_bazel)
    assert from_bazel == from_cmake


# --- past one machine: shards and shared caches (issue 26) ------------------------------------

CASE_RUN = re.compile(r"running \S+ --gtest_filter=(\S+) under HeapType")
CASES_SUMMARY = re.compile(r"(\d+) of (\d+) cases passed(?:; failed: (.+))?$", re.M)


def checked_cases(log: str) -> tuple[list[str], list[str]]:
    """(the cases a budget test's run checked, those over budget) from its log."""
    ran = CASE_RUN.findall(log)
    summary = CASES_SUMMARY.search(log)
    assert summary, log[-3000:]
    failed = summary.group(3).split(", ") if summary.group(3) else []
    assert (int(summary.group(1)), int(summary.group(2))) == (len(ran) - len(failed), len(ran)), log[-3000:]
    return ran, failed


def test_sharded_budget_test_checks_each_case_once_and_fails_as_one_run_does(bazel):
    done = bazel.run("test", "//shards:cases_heap", "//shards:cases_heap_unsharded", "//shards:cases_heap_raised",
                     check=False)
    assert done.returncode == 3, done.stderr[-4000:]
    summary = done.stdout + done.stderr
    assert re.search(r"//shards:cases_heap\s+FAILED", summary), summary[-3000:]
    assert re.search(r"//shards:cases_heap_unsharded\s+FAILED", summary), summary[-3000:]
    assert re.search(r"//shards:cases_heap_raised\s+PASSED", summary), summary[-3000:]

    testlogs = bazel.info("bazel-testlogs") / "shards"
    assert checked_cases((testlogs / "cases_heap_unsharded" / "test.log").read_text()) == (SHARDS_CASES, ["Big.Blobs"])
    for test, over_budget in (("cases_heap", ["Big.Blobs"]), ("cases_heap_raised", [])):
        shards = [checked_cases((testlogs / test / f"shard_{i}_of_3" / "test.log").read_text()) for i in (1, 2, 3)]
        # GoogleTest's own rule: the n-th case runs in shard n % 3; each case once.
        assert [ran for ran, _ in shards] == [SHARDS_CASES[i::3] for i in range(3)], test
        assert [case for _, failed in shards for case in failed] == over_budget, test

    failed = (testlogs / "cases_heap" / "shard_2_of_3" / "test.log").read_text()  # Big.Blobs: case 4
    assert "heap budget exceeded: cases[Big.Blobs]" in failed
    assert re.search(r"Blob: peak live 8 KiB \(8,192 B\) > limit 4 KiB", failed), failed[-3000:]
    # The test's own JUnit XML: one testcase per case of the shard, the verdict in the failure.
    xml = ElementTree.parse(testlogs / "cases_heap" / "shard_2_of_3" / "test.xml").getroot()
    cases = {case.get("name"): case.find("failure") for case in xml.iter("testcase")}
    assert sorted(cases) == sorted(f"cases_heap[{case}]" for case in SHARDS_CASES[1::3])
    assert cases["cases_heap[Small.Two]"] is None
    assert "heap budget exceeded: cases[Big.Blobs]" in cases["cases_heap[Big.Blobs]"].text
    with zipfile.ZipFile(testlogs / "cases_heap" / "shard_2_of_3" / "test.outputs" / "outputs.zip") as outputs:
        assert sorted(outputs.namelist()) == sorted(f"cases_heap[{case}].{kind}" for case in SHARDS_CASES[1::3]
                                                    for kind in ("htp", "report.txt", "budget.txt"))


NGINX_CONF = """\
{user}
daemon off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 64; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/temp/body;
    proxy_temp_path {root}/temp/proxy;
    fastcgi_temp_path {root}/temp/fastcgi;
    uwsgi_temp_path {root}/temp/uwsgi;
    scgi_temp_path {root}/temp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root}/cache;
        client_max_body_size 0;
        location / {{
            dav_methods PUT;
            create_full_put_path on;
        }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(port: int, server: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"nginx exited with status {server.returncode}: {server.stderr.read()}", pytrace=False)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"nginx did not listen on 127.0.0.1:{port} in {timeout} s", pytrace=False)


@pytest.fixture
def http_cache(tmp_path):
    """Debian's nginx as a Bazel HTTP cache (WebDAV PUT) on 127.0.0.1: (its URL, the
    directory it stores into). Stopped when the test ends, however it ends."""
    nginx = require_tool("nginx")
    root = tmp_path / "nginx"
    (root / "cache").mkdir(parents=True)
    (root / "temp").mkdir()
    port = free_port()
    conf = root / "nginx.conf"
    conf.write_text(NGINX_CONF.format(root=root, port=port, user="user root;" if os.geteuid() == 0 else ""))
    server = subprocess.Popen([nginx, "-p", str(root), "-c", str(conf), "-e", str(root / "error.log")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving(port, server)
        yield f"http://127.0.0.1:{port}", root / "cache"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def spawns(log: Path) -> list[dict]:
    """The spawns of `--execution_log_json_file` (one JSON object after another)."""
    text, decoder, found, at = log.read_text(), json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return found
        spawn, at = decoder.raw_decode(text, at)
        found.append(spawn)


def executed(spawns_of_a_run: list[dict]) -> list[str]:
    """What a run really ran, as Bazel's progress messages: its spawns that no cache served."""
    return sorted(spawn["progressMessage"] for spawn in spawns_of_a_run if not spawn["remoteCacheHit"])


def copy_checkout(bazel: Bazel, path: Path) -> Path:
    """A checkout of the session's workspace at another path (another output base)."""
    shutil.copytree(bazel.workspace, path, ignore=shutil.ignore_patterns("bazel-*"))
    return path


CACHED_TARGETS = ("//:indexer_heap", "//shards:cases_heap_raised")
RAISED_SHARDS = [f"Testing //shards:cases_heap_raised (shard {i} of 3)" for i in (1, 2, 3)]


def test_budget_tests_come_from_a_shared_cache_and_rerun_only_where_a_source_changed(bazel, http_cache, tmp_path):
    """Issue 26: a second clean checkout at another path gets every budget test (and the
    instrumented builds under them) from an HTTP cache, or from a disk cache; after one
    source file changes, only the budget test that depends on it runs again."""
    url, stored = http_cache
    disk = tmp_path / "disk-cache"
    first, second = copy_checkout(bazel, tmp_path / "first"), copy_checkout(bazel, tmp_path / "second")

    def test(workspace: Path, name: str, *cache: str, output_base: Path | None = None):
        log = tmp_path / f"{name}.json"
        done = bazel.run("test", *CACHED_TARGETS, *cache, f"--execution_log_json_file={log}",
                         "--incompatible_strict_action_env", workspace=workspace, output_base=output_base)
        return done.stdout + done.stderr, spawns(log)

    # 1. The first checkout builds and runs everything, and fills both caches.
    output, ran = test(first, "first", f"--remote_cache={url}", f"--disk_cache={disk}")
    assert ran and not [spawn for spawn in ran if spawn["remoteCacheHit"]]
    assert {"Testing //:indexer_heap", *RAISED_SHARDS} <= set(executed(ran)), executed(ran)
    assert any(stored.rglob("*")) and any(disk.rglob("*"))

    # 2. A clean checkout at another path: every spawn is a remote cache hit.
    output, hits = test(second, "second", f"--remote_cache={url}")
    assert executed(hits) == [], executed(hits)
    assert sorted(spawn["progressMessage"] for spawn in hits) == sorted(spawn["progressMessage"] for spawn in ran)
    assert re.search(rf"\b{len(ran)} remote cache hit", output), output[-3000:]
    assert re.search(r"//:indexer_heap\s+\(cached\) PASSED", output), output[-3000:]
    assert re.search(r"//shards:cases_heap_raised\s+\(cached\) PASSED", output), output[-3000:]

    # 3. The same from the disk cache alone, in another clean output base.
    output, hits = test(second, "disk", f"--disk_cache={disk}", output_base=tmp_path / "disk-base")
    assert executed(hits) == [] and len(hits) == len(ran), executed(hits)
    assert re.search(r"//:indexer_heap\s+\(cached\) PASSED", output), output[-3000:]

    # 4. One source file changes: its compile, its link and its budget test's shards run
    #    again; the indexer's budget test still comes from the cache.
    source = second / "shards" / "cases.cc"
    text = source.read_text()
    assert f"kBlobs = {BLOBS};" in text
    source.write_text(text.replace(f"kBlobs = {BLOBS};", f"kBlobs = {BLOBS + 1};"))
    output, after = test(second, "changed", f"--remote_cache={url}", output_base=tmp_path / "changed-base")
    assert executed(after) == sorted(["Compiling shards/cases.cc", "Linking shards/cases", *RAISED_SHARDS])
    assert "Testing //:indexer_heap" in [spawn["progressMessage"] for spawn in after]
    assert re.search(r"//:indexer_heap\s+\(cached\) PASSED", output), output[-3000:]
    assert re.search(r"//shards:cases_heap_raised\s+PASSED", output), output[-3000:]
