"""Tests for heaptype.analyze.symbols: naming runtime tag addresses.

Most tests build a real program and shared library, run the program, and feed
the addresses it prints, with its own /proc/self/maps, to TypeResolver.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import require_tool, run_preloaded
from tooling import missing
from heaptype.analyze.symbols import (
    Mapping,
    SymbolError,
    TypeResolver,
    demangle_many,
    elf_type_tags,
    load_bias,
    map_file_type_tags,
    parse_proc_maps,
    type_name_from_symbol,
)

INCLUDE_DIR = Path(__file__).resolve().parents[2] / "src" / "include"

MAP_NAME = "std::map<int, Foo, std::less<int>, std::allocator<std::pair<int const, Foo>>>"

# Each TAG line carries the runtime address of a tag and the name it must get.
MAIN_CPP = r"""
#include <heaptype/type_id.hpp>
#include <cstdio>
#include <map>

struct Foo { int a; };
struct MEM_TYPE_IMGBUF;
namespace app { template <class T> struct Box { T value; }; }

const void* second_tu_foo_tag();
const void* lib_tag();

static void tag(const void* address, const char* name) {
  std::printf("TAG %p %s\n", address, name);
}

int main() {
  tag(heaptype::tag_of<Foo>(), "Foo");
  tag(heaptype::tag_of<std::map<int, Foo>>(), "MAP_NAME");
  tag(heaptype::tag_of<std::_Rb_tree_node<std::pair<const int, int>>>(),
      "std::_Rb_tree_node<std::pair<int const, int>>");
  tag(heaptype::tag_of<heaptype::labeled<int, MEM_TYPE_IMGBUF>>(), "int [MEM_TYPE_IMGBUF]");
  tag(heaptype::tag_of<const app::Box<long>>(), "app::Box<long>");
  tag(second_tu_foo_tag(), "Foo");
  tag(lib_tag(), "libns::LibType");
  std::printf("CODE %p\n", reinterpret_cast<const void*>(&tag));
  std::printf("MAPS\n");
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, maps)) > 0;)
    std::fwrite(buffer, 1, n, stdout);
  std::fclose(maps);
}
""".replace("MAP_NAME", MAP_NAME)

# The same type in a second TU: its COMDAT copy of the tag is discarded.
TU2_CPP = r"""
#include <heaptype/type_id.hpp>
struct Foo { int a; };
const void* second_tu_foo_tag() { return heaptype::tag_of<Foo>(); }
"""

# Linked first, so the tags land past the file-backed page of .bss, in the
# anonymous mapping that holds the rest of it.
PADDING_CPP = "char heaptype_test_padding[1 << 16];\n"

LIB_CPP = r"""
#include <heaptype/type_id.hpp>
namespace libns { struct LibType { int x; }; }
__attribute__((visibility("default"))) const void* lib_tag() {
  return heaptype::tag_of<libns::LibType>();
}
"""


@dataclass
class Run:
    """What one run of a test program printed."""

    program: Path
    library: Path
    tags: list[tuple[int, str]]
    code: int
    maps: str

    def expected(self) -> dict[int, str]:
        return dict(self.tags)

    def resolver(self, map_files: dict[str, str] | None = None) -> TypeResolver:
        return TypeResolver(parse_proc_maps(self.maps), map_files)


def _run(command: list) -> None:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, command))}\n{done.stderr}"


class Builder:
    """Compiles the test sources once per flavour and links variants from them."""

    def __init__(self, root: Path):
        self.root = root
        self._objects: dict[tuple[str, bool], dict[str, Path]] = {}
        self._count = 0

    def objects(self, compiler: str, hidden: bool) -> dict[str, Path]:
        key = (compiler, hidden)
        if key not in self._objects:
            out = self.root / f"obj-{compiler}-{'hidden' if hidden else 'default'}"
            out.mkdir()
            flags = ["-fvisibility=hidden"] if hidden else []
            objects = {}
            for name, text in (("padding", PADDING_CPP), ("main", MAIN_CPP),
                               ("tu2", TU2_CPP), ("lib", LIB_CPP)):
                source = out / f"{name}.cpp"
                source.write_text(text)
                objects[name] = out / f"{name}.o"
                _run([compiler, "-c", "-O0", "-fPIC" if name == "lib" else "-fPIE",
                      *flags, "-I", INCLUDE_DIR, source, "-o", objects[name]])
            self._objects[key] = objects
        return self._objects[key]

    def build(self, *, compiler="g++", linker=None, pie=True, hidden=False, link_map=False,
              no_demangle=False, strip=False, rdynamic=False) -> Run:
        """Link, optionally strip, and run one variant.

        The library's map file is written as ``libtags.so.map`` (found by
        default next to it), the program's as ``app.linkmap`` (found only when
        passed in ``map_files``).
        """
        objects = self.objects(compiler, hidden)
        self._count += 1
        out = self.root / f"build{self._count}"
        out.mkdir()
        program, library = out / "app", out / "libtags.so"
        flags = [f"-fuse-ld={linker}"] if linker else []
        if no_demangle:
            flags.append("-Wl,--no-demangle")
        _run([compiler, "-shared", *flags, objects["lib"], "-o", library,
              *([f"-Wl,-Map={library}.map"] if link_map else [])])
        _run([compiler, *flags, "-pie" if pie else "-no-pie", *(["-rdynamic"] if rdynamic else []),
              objects["padding"], objects["main"], objects["tu2"],
              "-L", out, "-ltags", "-Wl,-rpath,$ORIGIN", "-o", program,
              *([f"-Wl,-Map={out / 'app.linkmap'}"] if link_map else [])])
        if strip:
            for binary in (program, library):
                shutil.copy(binary, f"{binary}.full")
                _run(["strip", "--strip-all", binary])
        return self.run(program, library)

    @staticmethod
    def run(program: Path, library: Path) -> Run:
        output = subprocess.run([program], capture_output=True, text=True, check=True,
                                timeout=30).stdout
        head, _, maps = output.partition("MAPS\n")
        tags, code = [], None
        for line in head.splitlines():
            kind, address, *name = line.split(" ", 2)
            if kind == "TAG":
                tags.append((int(address, 16), name[0]))
            elif kind == "CODE":
                code = int(address, 16)
        return Run(program, library, tags, code, maps)


@pytest.fixture(scope="session")
def builder(tmp_path_factory) -> Builder:
    require_tool("g++")
    return Builder(tmp_path_factory.mktemp("symbols"))


@pytest.fixture(scope="session")
def pie_run(builder) -> Run:
    return builder.build()


def _assert_resolves(run: Run, map_files: dict[str, str] | None = None) -> None:
    names = run.resolver(map_files).resolve(address for address, _ in run.tags)
    assert names == run.expected()


# --------------------------------------------------------------------------
# Real binaries

def test_pie_executable_and_shared_library(pie_run):
    _assert_resolves(pie_run)
    foo = [address for address, name in pie_run.tags if name == "Foo"]
    assert len(foo) == 2 and foo[0] == foo[1], "one Foo tag across translation units"


def test_tags_in_bss_past_the_file_backed_mappings(pie_run):
    """The padding puts the program's tags in .bss's anonymous tail mapping."""
    mapped = parse_proc_maps(pie_run.maps)
    program_tags = [a for a, name in pie_run.tags if name != "libns::LibType"]
    assert not any(m.start <= a < m.end for a in program_tags for m in mapped)
    _assert_resolves(pie_run)


def test_addresses_outside_tags_are_unknown(pie_run):
    lonely = 0x10
    names = pie_run.resolver().resolve([lonely, pie_run.code])
    assert names == {
        lonely: "<unknown type 0x10>",
        pie_run.code: f"<unknown type {pie_run.code:#x}>",
    }


def test_non_pie_executable(builder):
    run = builder.build(pie=False)
    _assert_resolves(run)
    mappings = [m for m in parse_proc_maps(run.maps) if m.path == str(run.program)]
    assert load_bias(str(run.program), mappings) == 0


def test_load_bias_of_pie_is_its_lowest_mapping(pie_run):
    mappings = [m for m in parse_proc_maps(pie_run.maps) if m.path == str(pie_run.program)]
    assert load_bias(str(pie_run.program), mappings) == min(m.start for m in mappings)


@pytest.mark.parametrize("no_demangle", [False, True], ids=["demangled", "mangled"])
@pytest.mark.parametrize("linker", ["bfd", "gold", "lld"])
def test_stripped_binary_with_map_file(builder, linker, no_demangle):
    """Hidden visibility keeps the tags out of .dynsym: only the map can name them."""
    require_tool(f"ld.{linker}")
    run = builder.build(linker=linker, hidden=True, link_map=True, no_demangle=no_demangle,
                        strip=True)
    program_map = run.program.parent / "app.linkmap"
    # The map must say exactly what the symbol table of the unstripped binary says.
    assert map_file_type_tags(str(program_map)) == elf_type_tags(f"{run.program}.full")
    assert map_file_type_tags(f"{run.library}.map") == elf_type_tags(f"{run.library}.full")
    with pytest.raises(SymbolError):
        run.resolver().resolve(address for address, _ in run.tags)
    _assert_resolves(run, {str(run.program): str(program_map)})


def test_bfd_discarded_input_sections_are_ignored(builder):
    require_tool("ld.bfd")
    run = builder.build(linker="bfd", link_map=True)
    text = (run.program.parent / "app.linkmap").read_text()
    discarded = text.split("Discarded input sections", 1)[1].split("Linker script and memory map")[0]
    assert ".bss._ZN8heaptype7type_idI3FooE3tagE" in discarded, "the trap is really there"
    tags = map_file_type_tags(str(run.program.parent / "app.linkmap"))
    assert list(tags.values()).count("Foo") == 1 and 0 not in tags
    assert tags == elf_type_tags(str(run.program))


@pytest.mark.parametrize("strip", [False, True], ids=["symtab", "stripped-with-map"])
def test_clang(builder, strip):
    require_tool("clang++")
    run = builder.build(compiler="clang++", link_map=strip, strip=strip)
    _assert_resolves(run, {str(run.program): str(run.program.parent / "app.linkmap")})


def test_stripped_without_map_file_names_the_binary(builder):
    run = builder.build(hidden=True, strip=True)
    assert elf_type_tags(str(run.program)) == {} and elf_type_tags(str(run.library)) == {}
    resolver = run.resolver()
    address_of = {name: address for address, name in run.tags}
    for binary, address in ((run.program, address_of["Foo"]),
                            (run.library, address_of["libns::LibType"])):
        with pytest.raises(SymbolError, match="stripped and no linker map file") as error:
            resolver.resolve([address])
        assert str(binary) in str(error.value)
        assert "-Wl,-Map=" in str(error.value)


@pytest.mark.parametrize("linker, rdynamic", [("bfd", True), ("gold", False)])
def test_stripped_binary_resolves_from_dynsym(builder, linker, rdynamic):
    """GCC's tags are STB_GNU_UNIQUE: gold always exports them, bfd with -rdynamic
    (and in shared libraries); .dynsym alone then names them."""
    require_tool(f"ld.{linker}")
    run = builder.build(linker=linker, rdynamic=rdynamic, strip=True)
    assert "Foo" in elf_type_tags(str(run.program)).values()
    assert "libns::LibType" in elf_type_tags(str(run.library)).values()
    _assert_resolves(run)


def test_each_module_is_read_once(pie_run, tmp_path):
    resolver = TypeResolver(parse_proc_maps(pie_run.maps), cache=tmp_path / "cache")
    addresses = [address for address, _ in pie_run.tags]
    assert resolver.resolve(addresses) == resolver.resolve(addresses) == pie_run.expected()
    assert resolver.stats.type_tables_read == 2  # the program and the library, once each
    # A second resolver (a new report of the same builds) reads the tables from the cache.
    again = TypeResolver(parse_proc_maps(pie_run.maps), cache=tmp_path / "cache")
    assert again.resolve(addresses) == pie_run.expected()
    assert (again.stats.type_tables_read, again.stats.type_tables_from_cache) == (0, 2)


# --------------------------------------------------------------------------
# Pure functions

def test_parse_proc_maps_keeps_file_mappings():
    text = (
        "55d0c4a00000-55d0c4a01000 r--p 00000000 fe:00 2146484    /opt/my app/bin\n"
        "55d0c4a01000-55d0c4a02000 r-xp 00001000 fe:00 2146484    /opt/my app/bin\n"
        "55d0c5000000-55d0c5021000 rw-p 00000000 00:00 0          [heap]\n"
        "7f7187113000-7f7187116000 rw-p 00000000 00:00 0 \n"
        "7f71872eb000-7f71872f8000 r--p 00000000 fe:00 12 /usr/lib/libc.so.6 (deleted)\n"
        "7ffd5b1c5000-7ffd5b1e6000 rw-p 00000000 00:00 0          [stack]\n"
        "7ffd5b1f1000-7ffd5b1f3000 r-xp 00000000 00:00 0          [vdso]\n"
    )
    assert parse_proc_maps(text) == [
        Mapping(0x55D0C4A00000, 0x55D0C4A01000, 0, "r--p", "/opt/my app/bin"),
        Mapping(0x55D0C4A01000, 0x55D0C4A02000, 0x1000, "r-xp", "/opt/my app/bin"),
        Mapping(0x7F71872EB000, 0x7F71872F8000, 0, "r--p", "/usr/lib/libc.so.6 (deleted)"),
    ]


@pytest.mark.parametrize("demangled, name", [
    ("heaptype::type_id<Foo>::tag", "Foo"),
    ("heaptype::type_id<std::_Rb_tree_node<std::pair<int const, int> > >::tag",
     "std::_Rb_tree_node<std::pair<int const, int>>"),
    ("heaptype::type_id<std::vector<std::vector<std::vector<int, std::allocator<int> > > > >::tag",
     "std::vector<std::vector<std::vector<int, std::allocator<int>>>>"),
    ("heaptype::type_id<heaptype::labeled<int, MEM_TYPE_IMGBUF> >::tag", "int [MEM_TYPE_IMGBUF]"),
    ("heaptype::type_id<heaptype::labeled<std::map<int, int>, ns::Label> >::tag",
     "std::map<int, int> [ns::Label]"),
    ("heaptype::type_id<heaptype::elements_of<char, std::__cxx11::basic_string<char, std::char_traits<char>, "
     "std::allocator<char> > > >::tag", "char[] of std::string"),
    ("heaptype::type_id<heaptype::elements_of<wchar_t, std::__1::basic_string<wchar_t, "
     "std::__1::char_traits<wchar_t>, std::__1::allocator<wchar_t> > > >::tag", "wchar_t[] of std::wstring"),
    ("heaptype::type_id<heaptype::elements_of<char, std::basic_string<char, MyTraits, std::allocator<char> > > >::tag",
     "char[] of std::basic_string<char, MyTraits, std::allocator<char>>"),
    ("heaptype::type_id<(anonymous namespace)::Local>::tag", "(anonymous namespace)::Local"),
    ("heaptype::type_id<Holder<(char)65, (anonymous namespace)::Local> >::tag",
     "Holder<(char)65, (anonymous namespace)::Local>"),
    ("heaptype::type_id<A>::other<B>::tag", None),
    ("heaptype::type_id<Foo>::other", None),
    ("std::vector<int>::tag", None),
    ("_ZN8heaptype7type_idI3FooE3tagE", None),
])
def test_type_name_from_symbol(demangled, name):
    assert type_name_from_symbol(demangled) == name


def test_demangle_many_falls_back_to_cxxfilt(monkeypatch):
    require_tool("c++filt")
    monkeypatch.setitem(sys.modules, "heaptype._core", None)  # import now fails
    assert demangle_many([]) == []
    assert demangle_many(["_ZN8heaptype7type_idI3FooE3tagE", "not_mangled"]) == [
        "heaptype::type_id<Foo>::tag", "not_mangled",
    ]


# A generic lambda with a parameter pack, as kj's test runner has: GCC 12's
# abi::__cxa_demangle refuses its name, binutils' (c++filt) gives it.
PACK_LAMBDA_CPP = r"""
#include <cstdio>
struct Runner { int n; };
__attribute__((noinline)) int* run(Runner& r) {
  auto body = [](auto& runner, auto&&... rest) __attribute__((noinline)) {
    int* p = new int[runner.n + sizeof...(rest)];
    *p = 7;
    return p;
  };
  return body(r);
}
int main() { Runner r{4}; int* p = run(r); std::printf("%d\n", *p); delete[] p; }
"""
PACK_LAMBDA = "auto run(Runner&)::{lambda(auto:1&, (auto:2&&)...)#1}::operator()<Runner>(Runner&) const"


def require_libiberty():
    from heaptype import _core

    if not _core.demangles_with_libiberty():
        missing("the analysis core was built without binutils' demangler: install libiberty-dev and build again")


def test_names_the_cxx_runtimes_demangler_refuses_are_demangled_as_cxxfilt_does():
    from heaptype import _core

    require_libiberty()
    kj = "_ZZN2kj10TestRunner7getMainEvENUlRT_DpOT0_E5_clIS0_JEEEDaS2_S5_"
    assert _core.demangle(kj) == ("auto kj::TestRunner::getMain()::{lambda(auto:1&, (auto:2&&)...)#7}"
                                  "::operator()<kj::TestRunner>(kj::TestRunner&)")
    assert _core.demangle("_ZZ3runR6RunnerENKUlRT_DpOT0_E_clIS_JEEEDaS2_S5_") == PACK_LAMBDA
    assert _core.demangle("not_mangled") == "not_mangled" and _core.demangle("_Zx") == "_Zx"


def test_a_generic_lambda_with_a_pack_is_named_in_call_paths(tmp_path):
    import heaptype

    require_libiberty()
    source = tmp_path / "pack_lambda.cpp"
    source.write_text(PACK_LAMBDA_CPP)
    program = tmp_path / "pack_lambda"
    subprocess.run([require_tool("g++"), "-O2", "-g", "-fno-omit-frame-pointer", str(source), "-o", str(program)],
                   check=True)
    out = tmp_path / "pack_lambda.htp"
    done = subprocess.run([sys.executable, "-m", "heaptype", "run", "-o", str(out), "--", str(program)],
                          capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert done.returncode == 0 and done.stdout == "7\n", done.stderr
    paths = [row.path for row in heaptype.load(out).call_paths() if row.type_label == "(untyped)"]
    assert any(path[-2:] == ("run(Runner&)", f"{PACK_LAMBDA} [clone .constprop.0] [clone .isra.0]")
               for path in paths), paths


def test_map_file_discarded_section_is_skipped(tmp_path):
    """Even a symbol-like line under "Discarded input sections" is not a tag."""
    path = tmp_path / "bfd.map"
    path.write_text(
        "Discarded input sections\n\n"
        " .bss._ZN8heaptype7type_idI3FooE3tagE\n"
        "                0x0000000000000000        0x1 /tmp/b.o\n"
        "                0x0000000000000000                heaptype::type_id<Bar>::tag\n\n"
        "Memory Configuration\n\n"
        "Linker script and memory map\n\n"
        " .bss._ZN8heaptype7type_idI3FooE3tagE\n"
        "                0x0000000000004041        0x1 /tmp/a.o\n"
        "                0x0000000000004041                heaptype::type_id<Foo>::tag\n"
    )
    assert map_file_type_tags(str(path)) == {0x4041: "Foo"}


def test_lld_map_table(tmp_path):
    path = tmp_path / "lld.map"
    path.write_text(
        "             VMA              LMA     Size Align Out     In      Symbol\n"
        "            3d20             3d20       10     8 .bss\n"
        "            3d21             3d21        1     1         /tmp/a.o:(.bss._ZN8heaptype7type_idI3FooE3tagE)\n"
        "            3d21             3d21        1     1                 _ZN8heaptype7type_idI3FooE3tagE\n"
        "            3d22             3d22        1     1         /tmp/a.o:(.bss._ZN8heaptype7type_idINS_7labeledIi15MEM_TYPE_IMGBUFEEE3tagE)\n"
        "            3d22             3d22        1     1                 heaptype::type_id<heaptype::labeled<int, MEM_TYPE_IMGBUF> >::tag\n"
    )
    assert map_file_type_tags(str(path)) == {0x3D21: "Foo", 0x3D22: "int [MEM_TYPE_IMGBUF]"}


def test_a_function_of_internal_linkage_is_one_function_inlined_or_not(tmp_path):
    """GCC's DWARF names a function of internal linkage (static, or in an anonymous
    namespace) without a linkage name: where it was inlined its frame was `N::dup`, where
    called out of line the symbol table's `N::dup(char const*, unsigned int)`, two rows of
    `--by function` for one function (jsoncpp's duplicateAndPrefixStringValue). The inlined
    frames now take the name of the function's out-of-line copy. tests/cpp/internal_inline.cpp."""
    source = Path(__file__).resolve().parents[1] / "cpp" / "internal_inline.cpp"
    program = tmp_path / "internal_inline"
    subprocess.run([require_tool("g++"), "-O2", "-g", str(source), "-o", str(program)], check=True, capture_output=True)
    output = tmp_path / "internal_inline.htp"
    done = run_preloaded(program, output)
    assert done.returncode == 0, done.stderr
    import heaptype
    rows = {row.function: row.self.allocations for row in heaptype.load(output).by_function() if row.self.allocations}
    assert rows == {"N::dup(char const*, unsigned int)": 17,
                    "(anonymous namespace)::copy(char const*, unsigned int)": 17}, rows
