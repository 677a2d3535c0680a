"""Symbolisation of code addresses (heaptype.analyze.functions): names, lines, inlined
frames, and the on-disk cache per build id.

Names are checked against ``nm -C``, source lines and inline chains against
binutils' ``addr2line -i``, on the call-path test program and its profile. The
cache must let a second symbolisation of the same build read no DWARF at all.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from callpath_programs import callpath_programs  # noqa: F401 (fixture)
from heaptype.analyze import functions
from heaptype.analyze.functions import Symbolizer
from heaptype.analyze.symbols import Mapping, load_bias, parse_proc_maps
from module_maps import module_map
from tooling import require_tool


@pytest.fixture(scope="module")
def known(callpath_programs):
    # The instrumented build: only its hooks record the entry address of each
    # function, whose names these tests compare with nm's.
    return callpath_programs.load("known-instrument")


def executable_of(profile) -> tuple[str, list[Mapping], int]:
    maps = [m for m in parse_proc_maps(profile.modules) if m.path.endswith("/known-instrument")]
    return maps[0].path, maps, load_bias(maps[0].path, maps)


def nm_functions(binary: str) -> dict[int, str]:
    done = subprocess.run([require_tool("nm"), "-C", "--defined-only", binary], capture_output=True, text=True,
                          check=True)
    out = {}
    for line in done.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTWi":
            out.setdefault(int(parts[0], 16), parts[2])
    return out


def addr2line(binary: str, addresses: list[int]) -> list[list[tuple[str, int]]]:
    """Per address, the inline chain innermost first as (file base name, line)."""
    tool = require_tool("addr2line")
    done = subprocess.run([tool, "-i", "-a", "-e", binary, *[f"{a:#x}" for a in addresses]], capture_output=True,
                          text=True, check=True)
    chains: list[list[tuple[str, int]]] = []
    for line in done.stdout.splitlines():
        if line.startswith("0x"):
            chains.append([])
        else:
            file, _, number = line.rpartition(":")
            number = number.split(" ")[0]
            chains[-1].append((os.path.basename(file), int(number) if number.isdigit() else 0))
    return chains


def test_function_names_match_nm(known):
    binary, maps, bias = executable_of(known)
    entries = set(known.analysis().code_addresses()[0])
    entries = [a for a in entries if maps[0].start <= a < max(m.end for m in maps)]
    assert len(entries) > 20
    names = Symbolizer(known.modules, cache=None).functions(entries)
    by_nm = nm_functions(binary)
    for address in entries:
        location = names[address]
        assert location.function == by_nm[address - bias], hex(address)
        assert location.function_address == address and location.module == binary
        assert location.frames[-1].file.endswith("callpaths_known.cpp") and location.frames[-1].line > 0


def test_call_sites_match_addr2line(known):
    binary, maps, bias = executable_of(known)
    sites = [a for a in known.analysis().code_addresses()[1] if maps[0].start <= a < max(m.end for m in maps)]
    located = Symbolizer(known.modules, cache=None).call_sites(sites)
    expected = addr2line(binary, [a - bias - 1 for a in sites])
    inlined = 0
    for address, chain in zip(sites, expected):
        ours = [(os.path.basename(f.file or "??"), f.line) for f in located[address].frames]
        assert ours == chain, f"{address - bias - 1:#x}: {located[address].frames}"
        inlined += len(chain) > 1
    assert inlined > 5  # make_and_free<T> is inlined at every allocation of the program
    leaf = next(l for l in located.values() if l.function == "direct_inner()" and l.inlined_frames)
    assert leaf.inlined_frames[0].function == "make_and_free<Direct>"
    assert leaf.name == "direct_inner()" and leaf.source.endswith("callpaths_known.cpp:50")


def test_allocator_frames_carry_the_size_of_their_type(callpath_programs):
    profile = callpath_programs.load("infer")
    sites = set(profile.analysis().code_addresses()[1])
    located = Symbolizer(profile.modules, cache=None).call_sites(sites)
    sizes = {f.function: f.type_argument_size for l in located.values() for f in l.inlined_frames
             if "allocate(" in f.function or "make_unique" in f.function}
    assert sizes["std::__new_allocator<Foo>::allocate(unsigned long, void const*)"] == 20
    assert sizes["std::__new_allocator<std::_Rb_tree_node<std::pair<int const, Bar> > >::allocate(unsigned long, "
                 "void const*)"] == 64
    unique = [size for name, size in sizes.items() if "make_unique<Bar" in name]
    assert unique == [24, 24]  # make_unique<Bar>() and make_unique<Bar[]>(n): sizeof(Bar)


def test_addresses_outside_known_code(known):
    symbolizer = Symbolizer(known.modules, cache=None)
    nowhere = symbolizer.call_sites([0x10])[0x10]
    assert nowhere.function is None and nowhere.name == "0x10" and nowhere.frames == ()
    binary, maps, bias = executable_of(known)
    header = maps[0].start + 1  # the ELF header: in the module, in no function
    location = symbolizer.call_sites([header])[header]
    assert location.function is None and location.name == "known-instrument+0x1"


def test_cache_answers_a_second_run_without_reading_dwarf(known, tmp_path):
    cache = tmp_path / "cache"
    sites = known.analysis().code_addresses()[1]
    first = Symbolizer(known.modules, cache=cache)
    cold = first.call_sites(sites)
    assert first.stats.decoded > 0 and first.stats.units > 0
    binary, _, _ = executable_of(known)
    build_id = subprocess.run([require_tool("readelf"), "-n", binary], capture_output=True, text=True,
                              check=True).stdout.split("Build ID:")[1].split()[0]
    assert (cache / "symbols" / f"{build_id}.htsym").is_file()

    # A new process: nothing in memory. The cache must answer without any ELF
    # symbol table or DWARF being read.
    second = Symbolizer(known.modules, cache=cache)
    started = time.perf_counter()
    warm = second.call_sites(sites)
    elapsed = time.perf_counter() - started
    assert warm == cold
    stats = second.stats
    assert stats.decoded == 0 and stats.from_cache == len(sites)
    assert stats.dwarf_opened == 0 and stats.symbol_tables_read == 0 and stats.units == 0
    assert elapsed < 1.0


def test_cache_directory_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HEAPTYPE_CACHE_DIR", str(tmp_path / "c"))
    assert functions.cache_dir() == tmp_path / "c"
    monkeypatch.setenv("HEAPTYPE_CACHE_DIR", "off")
    assert functions.cache_dir() is None
    monkeypatch.delenv("HEAPTYPE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert functions.cache_dir() == tmp_path / "xdg" / "heaptype"


# --- a small C program with two units and no build id -------------------------------

UNIT_A = "int twice(int x) { return 2 * x; }\nint thrice(int x) { return 3 * x; }\n"
UNIT_B = "int twice(int);\nint main(int argc, char** argv) { (void)argv; return twice(argc); }\n"


def mappings_for(binary: Path, base: int = 0x7F0000000000) -> list[Mapping]:
    """The module map of a process that loaded `binary` at `base` (no need to run it)."""
    return module_map(binary, base)


@pytest.fixture(scope="module")
def two_units(tmp_path_factory) -> Path:
    cc = require_tool("gcc")
    work = tmp_path_factory.mktemp("two-units")
    (work / "a.c").write_text(UNIT_A)
    (work / "b.c").write_text(UNIT_B)
    binary = work / "two"
    subprocess.run([cc, "-g", "-O1", "-fPIE", "-pie", "-Wl,--build-id=none", str(work / "a.c"), str(work / "b.c"),
                    "-o", str(binary)], check=True, capture_output=True)
    return binary


def symbol_address(binary: Path, name: str) -> int:
    return next(a for a, n in nm_functions(str(binary)).items() if n == name)


def test_only_the_units_holding_the_addresses_are_decoded(two_units, tmp_path):
    base = 0x7F0000000000
    address = base + symbol_address(two_units, "thrice") + 2
    symbolizer = Symbolizer(mappings_for(two_units, base), cache=None)
    location = symbolizer.call_sites([address])[address]
    assert location.function == "thrice" and location.frames[0].file.endswith("a.c")
    assert location.frames[0].line == 2
    assert symbolizer.stats.units == 1  # b.c's unit was never read


def test_cache_key_without_build_id(two_units, tmp_path):
    base = 0x7F0000000000
    cache = tmp_path / "cache"
    entry = base + symbol_address(two_units, "main")
    named = Symbolizer(mappings_for(two_units, base), cache=cache).functions([entry])[entry]
    assert named.function == "main" and named.frames[0].file.endswith("b.c")
    files = list((cache / "symbols").iterdir())
    assert len(files) == 1 and files[0].name.startswith("path-")
    # Another build at the same path (a new modification time) gets a key of its own.
    stamp = two_units.stat()
    os.utime(two_units, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))
    Symbolizer(mappings_for(two_units, base), cache=cache).functions([entry])
    assert len(list((cache / "symbols").iterdir())) == 2


def test_profile_symbolises_once(known):
    """Profile.call_paths, call_tree and by_function share one symbolisation."""
    known.call_paths()
    decoded = known.symbolizer.stats.addresses
    assert decoded > 0
    known.call_tree(bottom_up=True)
    known.by_function(inlined=False)
    assert known.symbolizer.stats.addresses == decoded
