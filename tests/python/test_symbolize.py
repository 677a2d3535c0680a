"""The core symbolizer (heaptype._core.Symbolizer, src/core/symbolize) on real
binaries: names as ``nm -C`` gives them, inline chains and lines as
``addr2line -i -f -C`` gives them (GCC and Clang), separate debug files, the
on-disk cache (warm, corrupt, truncated), unreadable modules and progress.

Each test compiles a small C++ program whose inlined standard-library code
makes inline chains; the module map is made up (no need to run the program):
the executable loaded at BASE.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import module_maps
from heaptype import _core
from tooling import require_tool

BASE = 0x7F0000000000

PROGRAM = r"""
#include <memory>
#include <vector>

namespace app {
struct Item { long a, b, c; };
inline int helper(int x) { return x * 3 + 1; }
struct Box {
  std::vector<Item> items;
  void add(int n);
};
void Box::add(int n) {
  for (int i = 0; i < n; ++i) items.push_back(Item{i, helper(i), i});
}
}  // namespace app

__attribute__((noinline)) int compute(int n) {
  int sum = 0;
  for (int i = 0; i < n; ++i) sum += app::helper(i);
  return sum;
}

int main(int argc, char**) {
  app::Box box;
  box.add(argc * 10);
  auto item = std::make_unique<app::Item>();
  return compute(argc) + static_cast<int>(box.items.size()) + static_cast<int>(item->a);
}
"""


def build(directory: Path, compiler: str = "g++", extra: tuple[str, ...] = ()) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "prog.cpp"
    source.write_text(PROGRAM)
    binary = directory / "prog"
    subprocess.run([require_tool(compiler), "-std=c++17", "-O2", "-g", *extra, str(source), "-o", str(binary)],
                   check=True, capture_output=True)
    return binary


def module_map(binary: Path, path: str | None = None) -> list:
    """The mappings of a process that loaded `binary` (named `path`) at BASE."""
    return module_maps.module_map(binary, BASE, path)


def functions_of(binary: Path) -> dict[int, tuple[str, int]]:
    """{address: (nm -C name, size)} of the sized functions nm lists."""
    done = subprocess.run([require_tool("nm"), "-C", "-S", "--defined-only", str(binary)], capture_output=True,
                          text=True, check=True)
    out = {}
    for line in done.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in "tTWi":
            out.setdefault(int(parts[0], 16), (parts[3], int(parts[1], 16)))
    return out


# The reference for each compiler's DWARF: binutils' addr2line reads GCC's, but
# drops the inline chains of Clang's DWARF 5 (binutils 2.40); LLVM's own
# symbolizer reads those (and prints the same format with these options).
REFERENCE = {
    "g++": ("addr2line", "-i", "-f", "-C", "-a"),
    "clang++": ("llvm-symbolizer", "--output-style=GNU", "--print-address", "--inlining", "--demangle",
                "--functions=linkage"),
}


def addr2line_chains(binary: Path, addresses: list[int], compiler: str = "g++") -> list[list[tuple[str, str, int]]]:
    """Per address, the inline chain innermost first as (function, file base name, line)."""
    tool, *options = REFERENCE[compiler]
    done = subprocess.run([require_tool(tool), *options, "-e", str(binary), *[f"{a:#x}" for a in addresses]],
                          capture_output=True, text=True, check=True)
    chains: list[list[tuple[str, str, int]]] = []
    lines = done.stdout.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("0x"):
            chains.append([])
            i += 1
            continue
        function, place = lines[i], lines[i + 1]
        file, _, number = place.rpartition(":")
        number = number.split(" ")[0]
        chains[-1].append((function, os.path.basename(file), int(number) if number.isdigit() else 0))
        i += 2
    return chains


def our_chain(location) -> list[tuple[str, str, int]]:
    return [(f.function, os.path.basename(f.file) if f.file else "??", f.line) for f in location.frames]


def sample_addresses(binary: Path) -> list[int]:
    """Link-time addresses all over the program's own functions (every 3rd byte)."""
    out = []
    for start, (name, size) in functions_of(binary).items():
        if name in ("compute(int)", "main", "app::Box::add(int)") or "app::" in name:
            out += range(start, start + size, 3)
    return out


def symbolizer(binary: Path, **options) -> _core.Symbolizer:
    options.setdefault("cache_dir", None)
    options.setdefault("progress", False)
    return _core.Symbolizer(module_map(binary), str(binary), **options)


# --- names, lines and inline chains -----------------------------------------------------

@pytest.mark.parametrize("compiler", ["g++", "clang++"])
def test_chains_match_addr2line(tmp_path, compiler):
    """Clang emits no .debug_aranges: units are found from their own ranges."""
    binary = build(tmp_path, compiler)
    addresses = sample_addresses(binary)
    assert len(addresses) > 50
    expected = addr2line_chains(binary, addresses, compiler)
    located = symbolizer(binary).call_sites([BASE + a + 1 for a in addresses])  # looked up at a
    inlined = compared = 0
    mismatches = []
    for address, chain, location in zip(addresses, expected, located):
        assert location.module_offset == address + 1
        if chain[0][2] == 0 and compiler == "g++":
            continue  # a row without a source line: binutils then gives no inline chain
        compared += 1
        if our_chain(location) != chain:
            mismatches.append((hex(address), our_chain(location), chain))
        inlined += len(chain) > 1
    assert mismatches == []
    assert compared > 0.8 * len(addresses)
    assert inlined > 10  # the vector and unique_ptr code is inlined into Box::add and main


def test_function_entries_are_named_as_nm_names_them(tmp_path):
    binary = build(tmp_path)
    functions = functions_of(binary)
    entries = sorted(functions)
    located = symbolizer(binary).functions([BASE + a for a in entries])
    for address, location in zip(entries, located):
        # The part of f that GCC moved off the hot path (f.cold) counts as f.
        name = functions[address][0]
        assert location.function == (name[:-5] if name.endswith(".cold") else name), f"{address:#x}"
        assert location.function_address == BASE + address
    assert {"main", "compute(int)", "app::Box::add(int)"} <= {l.function for l in located}


def test_inlined_frame_names_and_sizes(tmp_path):
    binary = build(tmp_path)
    located = symbolizer(binary).call_sites([BASE + a + 1 for a in sample_addresses(binary)])
    frames = {f.function: f for l in located for f in l.frames if f.inlined}
    push_back = frames["std::vector<app::Item, std::allocator<app::Item> >::push_back(app::Item&&)"]
    assert push_back.file.endswith("bits/stl_vector.h") and push_back.line > 0
    assert push_back.type_argument_size == 0  # only allocator and factory frames carry it
    allocate = frames["std::__new_allocator<app::Item>::allocate(unsigned long, void const*)"]
    assert allocate.file.endswith("new_allocator.h") and allocate.type_argument_size == 24  # sizeof(app::Item)


# --- separate debug files ------------------------------------------------------------------

def split_debug_info(binary: Path, debug_file: Path, strip_all: bool = False) -> None:
    objcopy = require_tool("objcopy")
    subprocess.run([objcopy, "--only-keep-debug", str(binary), str(debug_file)], check=True)
    subprocess.run([objcopy, "--strip-all" if strip_all else "--strip-debug", str(binary)], check=True)


@pytest.mark.parametrize("strip_all", [False, True], ids=["strip-debug", "strip-all"])
def test_debug_file_found_by_debuglink(tmp_path, strip_all):
    full = build(tmp_path / "full")
    addresses = [BASE + a + 1 for a in sample_addresses(full)]
    expected = [our_chain(l) for l in symbolizer(full).call_sites(addresses)]

    binary = tmp_path / "split" / "prog"
    binary.parent.mkdir()
    shutil.copy(full, binary)
    split_debug_info(binary, tmp_path / "split" / "prog.debug", strip_all)
    subprocess.run([require_tool("objcopy"), "--add-gnu-debuglink=prog.debug", "prog"], cwd=binary.parent, check=True)
    bare = symbolizer(binary, debug_roots=[]).call_sites(addresses)
    assert [our_chain(l) for l in bare] == expected
    assert any(len(l.frames) > 1 for l in bare)


def test_debug_file_found_by_build_id_under_a_debug_root(tmp_path):
    full = build(tmp_path / "full")
    addresses = [BASE + a + 1 for a in sample_addresses(full)]
    expected = [our_chain(l) for l in symbolizer(full).call_sites(addresses)]

    build_id = _core.build_id(str(full))
    assert len(build_id) == 40
    root = tmp_path / "debug-root"
    (root / ".build-id" / build_id[:2]).mkdir(parents=True)
    binary = tmp_path / "prog"
    shutil.copy(full, binary)
    split_debug_info(binary, root / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug")

    without = symbolizer(binary, debug_roots=[]).call_sites(addresses)
    assert all(f.line == 0 for l in without for f in l.frames)  # the symbol table alone: no lines
    found = symbolizer(binary, debug_roots=[str(root)]).call_sites(addresses)
    assert [our_chain(l) for l in found] == expected


# --- the on-disk cache -------------------------------------------------------------------

def symbolize_with_cache(binary: Path, cache: Path, addresses: list[int]):
    s = symbolizer(binary, cache_dir=str(cache))
    chains = [our_chain(l) for l in s.call_sites(addresses)]
    s.save_cache()
    return chains, s.stats


def test_warm_cache_reads_no_debug_info(tmp_path):
    binary = build(tmp_path / "b")
    addresses = [BASE + a + 1 for a in sample_addresses(binary)]
    cold, cold_stats = symbolize_with_cache(binary, tmp_path / "cache", addresses)
    assert cold_stats.decoded == len(addresses) and cold_stats.dwarf_opened == 1 and cold_stats.units >= 1
    files = list((tmp_path / "cache" / "symbols").iterdir())
    assert [f.name for f in files] == [f"{_core.build_id(str(binary))}.htsym"]
    warm, warm_stats = symbolize_with_cache(binary, tmp_path / "cache", addresses)
    assert warm == cold
    assert (warm_stats.decoded, warm_stats.from_cache) == (0, len(addresses))
    assert (warm_stats.dwarf_opened, warm_stats.symbol_tables_read, warm_stats.units) == (0, 0, 0)


def test_typeinfos_name_thrown_types_cold_and_from_the_cache(tmp_path):
    """A thrown object's tag is its std::type_info: "typeinfo for T" names T, the
    program's own (Thrown) and the copies a throw of a library's type makes in the
    executable (copy relocations: "_ZTIi@CXXABI_1.3" in .symtab), also from the cache."""
    gxx = require_tool("g++")
    binary = tmp_path / "thrown"
    subprocess.run([gxx, "-O2", str(Path(__file__).parents[1] / "cpp" / "thrown_types.cpp"), "-o", str(binary)],
                   check=True, capture_output=True)
    symbols = subprocess.run(["nm", str(binary)], check=True, capture_output=True, text=True).stdout.split("\n")
    wanted = {"_ZTI6Thrown": "Thrown", "_ZTIi": "int", "_ZTISt13runtime_error": "std::runtime_error"}
    tags = {}
    for line in symbols:
        fields = line.split()
        if len(fields) == 3 and fields[2].split("@")[0] in wanted:
            tags[BASE + int(fields[0], 16)] = wanted[fields[2].split("@")[0]]
    assert sorted(tags.values()) == sorted(wanted.values()), symbols
    for expected_from_cache in (0, 1):
        s = symbolizer(binary, cache_dir=str(tmp_path / "cache"))
        assert s.type_names(list(tags)) == tags
        assert s.stats.type_tables_from_cache == expected_from_cache
        s.save_cache()


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "empty", "other data"])
def test_damaged_cache_file_is_ignored_and_rewritten(tmp_path, damage):
    binary = build(tmp_path / "b")
    addresses = [BASE + a + 1 for a in sample_addresses(binary)]
    cold, _ = symbolize_with_cache(binary, tmp_path / "cache", addresses)
    (cache_file,) = (tmp_path / "cache" / "symbols").iterdir()
    data = bytearray(cache_file.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped byte":
        data[len(data) // 2] ^= 0x40
    elif damage == "empty":
        data = bytearray()
    else:
        data = bytearray(b"not a cache file\n" * 100)
    cache_file.write_bytes(bytes(data))

    again, stats = symbolize_with_cache(binary, tmp_path / "cache", addresses)
    assert again == cold and stats.decoded == len(addresses) and stats.from_cache == 0
    _, warm = symbolize_with_cache(binary, tmp_path / "cache", addresses)  # rewritten: whole again
    assert (warm.decoded, warm.from_cache) == (0, len(addresses))


def test_entries_of_another_run_are_kept(tmp_path):
    """Two reports asking different addresses of one binary: the file keeps both."""
    binary = build(tmp_path / "b")
    addresses = [BASE + a + 1 for a in sample_addresses(binary)]
    half = len(addresses) // 2
    symbolize_with_cache(binary, tmp_path / "cache", addresses[:half])
    symbolize_with_cache(binary, tmp_path / "cache", addresses[half:])
    _, stats = symbolize_with_cache(binary, tmp_path / "cache", addresses)
    assert (stats.decoded, stats.from_cache) == (0, len(addresses))


def test_another_run_of_the_same_binary_shares_what_was_read(tmp_path):
    """A symbolizer for another process (the binary loaded elsewhere, as ASLR does) made
    with for_modules names every address as a new one would, without reading the
    binary's symbol table or DWARF again; the first one still names its own run."""
    binary = build(tmp_path / "b")
    link = sample_addresses(binary)
    first = symbolizer(binary)
    before = [our_chain(first.call_site(BASE + a + 1)) for a in link]
    shift = 0x10000000
    other = first.for_modules(module_maps.module_map(binary, BASE + shift))
    fresh = _core.Symbolizer(module_maps.module_map(binary, BASE + shift), str(binary), cache_dir=None,
                             progress=False)
    again = [our_chain(other.call_site(BASE + shift + a + 1)) for a in link]
    assert again == [our_chain(fresh.call_site(BASE + shift + a + 1)) for a in link] == before
    main = next(a for a, (n, _) in functions_of(binary).items() if n == "main")
    assert other.function_at(BASE + shift + main).function_address == BASE + shift + main
    assert first.function_at(BASE + main).function_address == BASE + main
    stats = other.stats  # the file's counters are shared: the second run decoded nothing new
    assert (stats.symbol_tables_read, stats.dwarf_opened, stats.decoded) == (1, 1, len(set(link)))


@pytest.mark.parametrize("layout", [(), ("-Wl,-z,noseparate-code",)], ids=["separate-code", "code-first"])
def test_a_plain_mapping_of_a_loaded_file_is_not_its_image(tmp_path, layout):
    """A process that reads its own libraries (the Python process of in-process markers)
    also maps them as plain files: that copy, at offset 0 below or above the loaded
    image, must not move the image's load bias. mmap often places it right against the
    image: ending where the image starts, or starting where its last mapping ends. An
    image may start with its code (ld -z noseparate-code)."""
    binary = build(tmp_path / "b", extra=layout)
    size = (binary.stat().st_size + 0xFFF) & ~0xFFF
    image = module_map(binary)
    main = next(a for a, (n, _) in functions_of(binary).items() if n == "main")
    for reader_at in (BASE - 0x1000000, BASE + 0x1000000, BASE - size, max(m.end for m in image)):
        maps = image + [_core.Mapping(reader_at, reader_at + size, 0, "r--p", str(binary))]
        s = _core.Symbolizer(maps, str(binary), cache_dir=None, progress=False)
        assert s.function_at(BASE + main).function == "main", hex(reader_at)


# --- modules that cannot be read -------------------------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "not ELF"])
def test_unreadable_module_gives_offsets_and_a_warning(tmp_path, kind):
    binary = build(tmp_path / "b")
    module = tmp_path / "libgone.so"
    if kind == "not ELF":
        module.write_text("a data file mapped into the process\n" * 200)
    maps = module_map(binary) + [_core.Mapping(0x7F1000000000, 0x7F1000010000, 0, "r-xp", str(module))]
    s = _core.Symbolizer(maps, str(binary), cache_dir=None, progress=False)
    lost = s.call_site(0x7F1000000123)
    assert lost.name == "libgone.so+0x123" and lost.module == str(module) and lost.frames == []
    assert s.function_at(0x7F1000000400).name == "libgone.so+0x400"
    (warning,) = s.warnings
    assert str(module) in warning and "libgone.so+offset" in warning
    main = s.function_at(BASE + next(a for a, (n, _) in functions_of(binary).items() if n == "main"))
    assert main.function == "main" and main.frames[0].line > 0  # the readable module is unaffected


def test_module_without_debug_info_is_named_from_symbols_with_a_warning(tmp_path):
    binary = build(tmp_path / "b", extra=("-g0",))
    s = symbolizer(binary)
    entry = next(a for a, (n, _) in functions_of(binary).items() if n == "compute(int)")
    location = s.function_at(BASE + entry)
    assert location.function == "compute(int)" and [(f.function, f.line) for f in location.frames] == [
        ("compute(int)", 0)]
    assert any("no debug info" in w and str(binary) in w for w in s.warnings)


# --- progress -----------------------------------------------------------------------------------

def test_progress_reports_slow_steps_only(tmp_path, capfd):
    binary = build(tmp_path / "b")
    addresses = [BASE + a + 1 for a in sample_addresses(binary)]
    events = []
    s = symbolizer(binary, progress=lambda *event: events.append(event), progress_delay=0.0)
    s.call_sites(addresses)
    assert events and events[-1][2] is True and events[-1][0].startswith("heaptype: reading debug info of prog (")
    assert events[-1][0].endswith(" s") and "done in" in events[-1][0]
    assert all(0 <= fraction <= 1 for _, fraction, _ in events)

    quick = []  # the same work, done well within the delay: silence
    symbolizer(binary, progress=lambda *event: quick.append(event), progress_delay=60.0).call_sites(addresses)
    assert quick == []

    symbolizer(binary, progress=True, progress_delay=0.0).call_sites(addresses)  # stderr, not a terminal
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("heaptype: reading debug info of prog (") and "done in" in lines[0]


def test_progress_on_a_terminal_is_rewritten_in_place(tmp_path):
    """On a terminal each update rewrites the line ("\\r", erase to its end), and the
    last one ends it."""
    import pty
    import sys

    binary = build(tmp_path / "b")
    addresses = [BASE + a + 1 for a in sample_addresses(binary)]
    script = (
        "import sys\nfrom heaptype import _core\nimport module_maps\n"
        f"maps = module_maps.module_map(__import__('pathlib').Path({str(binary)!r}), {BASE})\n"
        "s = _core.Symbolizer(maps, '', cache_dir=None, progress=True, progress_delay=0.0)\n"
        f"s.prefetch_call_sites({addresses!r})\n"
    )
    main, terminal = pty.openpty()
    child = subprocess.Popen([sys.executable, "-c", script], stderr=terminal, stdout=subprocess.DEVNULL,
                             cwd=Path(__file__).parent)
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    assert child.wait(timeout=60) == 0
    os.close(main)
    text = output.decode()
    assert text.startswith("\r\x1b[Kheaptype: reading debug info of prog (") and text.endswith("\r\n")
    assert text.rstrip().rsplit("\r\x1b[K", 1)[-1].startswith("heaptype: reading debug info of prog (")
    assert "done in" in text.rsplit("\r\x1b[K", 1)[-1]
