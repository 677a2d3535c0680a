"""Turn runtime type-tag addresses back into C++ type names.

A profile records, for each heap type T, the runtime address of the one-byte
static ``heaptype::type_id<T>::tag`` together with the process's module map
(``/proc/self/maps``).  This module names those addresses again:

* find the module (executable or shared library) whose image holds the address;
* read that module's tags at link-time addresses, from its ELF symbol table
  (``.symtab``, else ``.dynsym``) or, for a stripped binary, from the linker map
  file written by ``-Wl,-Map=FILE`` (GNU ld.bfd, gold or lld);
* shift them by the module's load bias and look the address up.

It depends on nothing else in the package, so the analysis can name types even
where the compiled extension ``heaptype._core`` is not built (the demangler then
falls back to ``c++filt``).
"""

from __future__ import annotations

import bisect
import os
import re
import struct
import subprocess
from dataclasses import dataclass
from typing import Iterable

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

__all__ = [
    "Mapping",
    "SymbolError",
    "TypeResolver",
    "demangle_many",
    "elf_type_tags",
    "load_bias",
    "map_file_type_tags",
    "parse_proc_maps",
    "type_name_from_symbol",
]

# Every tag symbol, and nothing else we care about, starts with these.
MANGLED_TAG_PREFIX = "_ZN8heaptype7type_idI"
_DEMANGLED_TAG_PREFIX = "heaptype::type_id<"
_DEMANGLED_TAG_SUFFIX = ">::tag"
_LABELED_PREFIX = "heaptype::labeled<"

# load_bias reads the page rounding from a mapping's file offset; a rounding
# larger than the largest page size in use means the offset cannot tell, and
# the common 4 KiB page is assumed instead.
_MAX_PAGE_SIZE = 1 << 16
_FALLBACK_PAGE_SIZE = 4096


class SymbolError(Exception):
    """A module that owns tag addresses offers no way to name them."""


# --------------------------------------------------------------------------
# /proc/self/maps

@dataclass(frozen=True)
class Mapping:
    """One line of /proc/self/maps that is backed by a file."""

    start: int
    end: int
    offset: int
    perms: str
    path: str


_MAPS_LINE = re.compile(
    r"^([0-9a-fA-F]+)-([0-9a-fA-F]+)\s+(\S+)\s+([0-9a-fA-F]+)\s+\S+\s+\d+\s+(.*?)\s*$"
)


def parse_proc_maps(text: str) -> list[Mapping]:
    """Parse /proc/self/maps text, keeping only mappings of files.

    Only files can carry symbols: anonymous memory, ``[heap]``, ``[stack]``,
    ``[vdso]`` and the like are dropped.  Lines that are not maps lines are
    ignored, so the text may come with surrounding noise.
    """
    mappings = []
    for line in text.splitlines():
        match = _MAPS_LINE.match(line)
        if not match or not match.group(5).startswith("/"):
            continue
        start, end, perms, offset, path = match.groups()
        mappings.append(Mapping(int(start, 16), int(end, 16), int(offset, 16), perms, path))
    return mappings


# --------------------------------------------------------------------------
# Names

def demangle_many(names: list[str]) -> list[str]:
    """Demangle a batch of C++ symbols, in order.

    Uses the native ``heaptype._core.demangle_many`` when the extension is
    built; otherwise one ``c++filt`` process for the whole batch, because one
    process per symbol would dominate the run time on large binaries.
    """
    names = list(names)
    if not names:
        return []
    try:
        from heaptype._core import demangle_many as native
    except ImportError:
        return _demangle_with_cxxfilt(names)
    return list(native(names))


def _demangle_with_cxxfilt(names: list[str]) -> list[str]:
    try:
        done = subprocess.run(
            ["c++filt"], input="\n".join(names) + "\n",
            capture_output=True, text=True, check=True,
        )
    except FileNotFoundError:
        raise RuntimeError(
            "cannot demangle C++ symbols: heaptype._core is not built and c++filt "
            "(GNU binutils) is not installed"
        ) from None
    out = done.stdout.splitlines()
    if len(out) != len(names):
        raise RuntimeError(f"c++filt returned {len(out)} names for {len(names)} symbols")
    return out


def type_name_from_symbol(demangled: str) -> str | None:
    """Return T for a demangled ``heaptype::type_id<T>::tag``, else None.

    The name keeps the demangler's spelling except that ``> >`` becomes ``>>``,
    the way C++11 code writes it.  A pseudo type ``heaptype::labeled<T, L>``
    renders as ``T [L]``, the form the reports use for labelled allocations.
    """
    text = demangled.strip()
    if not (text.startswith(_DEMANGLED_TAG_PREFIX) and text.endswith(_DEMANGLED_TAG_SUFFIX)):
        return None
    inner = text[len(_DEMANGLED_TAG_PREFIX):-len(_DEMANGLED_TAG_SUFFIX)].strip()
    # Reject e.g. "heaptype::type_id<A>::x<B>::tag", whose brackets do not pair up.
    if not inner or _split_top_level(inner) is None:
        return None
    return _render_type(_collapse_closing_brackets(inner))


def _collapse_closing_brackets(name: str) -> str:
    while "> >" in name:
        name = name.replace("> >", ">>")
    return name


def _render_type(name: str) -> str:
    if name.startswith(_LABELED_PREFIX) and name.endswith(">"):
        args = _split_top_level(name[len(_LABELED_PREFIX):-1])
        if args is not None and len(args) == 2:
            return f"{_render_type(args[0])} [{args[1]}]"
    return name


def _split_top_level(args: str) -> list[str] | None:
    """Split template arguments on top-level commas; None if brackets do not pair.

    Brackets inside parentheses are skipped: the demangler parenthesises
    expressions such as ``(1>2)`` used as template arguments.
    """
    parts, depth, parens, begin = [], 0, 0, 0
    for i, char in enumerate(args):
        if char == "(":
            parens += 1
        elif char == ")":
            parens -= 1
        elif parens:
            continue
        elif char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
            if depth < 0:
                return None
        elif char == "," and depth == 0:
            parts.append(args[begin:i].strip())
            begin = i + 1
    if depth or parens:
        return None
    parts.append(args[begin:].strip())
    return parts


def _names_by_address(raw: dict[int, str]) -> dict[int, str]:
    """Turn {address: symbol as found (mangled or not)} into {address: type name}."""
    mangled = sorted({name for name in raw.values() if name.startswith("_Z")})
    demangled = dict(zip(mangled, demangle_many(mangled)))
    names = {}
    for address, symbol in raw.items():
        name = type_name_from_symbol(demangled.get(symbol, symbol))
        if name is not None:
            names[address] = name
    return names


# --------------------------------------------------------------------------
# ELF symbol tables

def elf_type_tags(binary_path: str) -> dict[int, str]:
    """Map link-time tag address -> type name, from ``.symtab`` then ``.dynsym``.

    GCC's tags are STB_GNU_UNIQUE and so often exported: a stripped binary can
    still name them from ``.dynsym``.  Returns {} when neither table has tags.
    """
    tags, _ = _read_elf_tags(binary_path)
    return tags


def _read_elf_tags(binary_path: str) -> tuple[dict[int, str], bool]:
    """Return the tags and whether a ``.symtab`` (the complete table) was there."""
    with open(binary_path, "rb") as stream:
        elf = ELFFile(stream)
        symtab = _raw_tag_symbols(elf, ".symtab")
        has_symtab = elf.get_section_by_name(".symtab") is not None
        raw = {**_raw_tag_symbols(elf, ".dynsym"), **symtab}
    return _names_by_address(raw), has_symtab


def _raw_tag_symbols(elf: ELFFile, section_name: str) -> dict[int, str]:
    """Return {st_value: mangled name} of the defined tag symbols of one table.

    Binaries can hold 100k+ symbols and pyelftools builds a Python object per
    symbol, so the table is unpacked with ``struct`` and names are compared to
    the tag prefix in the raw string table before anything is decoded.
    """
    section = elf.get_section_by_name(section_name)
    if section is None or section["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
        return {}
    strings = elf.get_section(section["sh_link"]).data()
    endian = "<" if elf.little_endian else ">"
    if elf.elfclass == 64:  # st_name, st_info, st_other, st_shndx, st_value, st_size
        layout, name_at, shndx_at, value_at = endian + "IBBHQQ", 0, 3, 4
    else:                   # st_name, st_value, st_size, st_info, st_other, st_shndx
        layout, name_at, shndx_at, value_at = endian + "IIIBBH", 0, 5, 1
    size = struct.calcsize(layout)
    data = section.data()
    data = data[: len(data) - len(data) % size]
    prefix = MANGLED_TAG_PREFIX.encode()
    found = {}
    for entry in struct.iter_unpack(layout, data):
        name_offset = entry[name_at]
        if entry[shndx_at] == 0 or not strings.startswith(prefix, name_offset):
            continue  # undefined (imported) or not a tag
        end = strings.index(b"\0", name_offset)
        found[entry[value_at]] = strings[name_offset:end].decode("ascii", "replace")
    return found


# --------------------------------------------------------------------------
# Linker map files

# Symbol lines: one or more numeric columns, then the symbol alone.  bfd/gold:
# "0x0000000000004041    heaptype::type_id<Foo>::tag"; lld's table:
# "3d21  3d21  1  1    heaptype::type_id<Foo>::tag" (VMA first).  Input-section
# lines such as ".bss._ZN8heaptype..." or "a.o:(.bss._ZN8heaptype...)" do not
# match because text other than numbers precedes the name.
_MAP_SYMBOL_LINE = re.compile(
    r"^\s*(?P<numbers>(?:(?:0x)?[0-9a-fA-F]+\s+)+)"
    r"(?P<name>heaptype::type_id<.*>::tag|" + MANGLED_TAG_PREFIX + r"\S*)\s*$"
)
_DISCARDED_HEADER = "Discarded input sections"
_MEMORY_MAP_HEADERS = ("Memory Configuration", "Linker script and memory map", "Memory map")


def map_file_type_tags(map_path: str) -> dict[int, str]:
    """Map link-time tag address -> type name, from a GNU ld.bfd, gold or lld map.

    Names may be demangled (the default) or mangled (``--no-demangle``).
    """
    with open(map_path, encoding="utf-8", errors="replace") as stream:
        lines = _memory_map_lines(stream)
        raw = {}
        for line in lines:
            match = _MAP_SYMBOL_LINE.match(line)
            if match:
                raw[int(match.group("numbers").split()[0], 16)] = match.group("name").strip()
    return _names_by_address(raw)


def _memory_map_lines(lines: Iterable[str]) -> Iterable[str]:
    """Drop the "Discarded input sections" part of bfd and gold maps.

    It lists the COMDAT duplicates the linker threw away, at address 0: they
    name real tags but at addresses that never exist at run time.
    """
    skipping = False
    for line in lines:
        header = line.strip()
        if header == _DISCARDED_HEADER:
            skipping = True
        elif header in _MEMORY_MAP_HEADERS and not line[:1].isspace():
            skipping = False
        elif not skipping:
            yield line


# --------------------------------------------------------------------------
# Load bias

@dataclass(frozen=True)
class _Segment:
    vaddr: int
    offset: int
    memsz: int


def _load_segments(binary_path: str) -> list[_Segment]:
    with open(binary_path, "rb") as stream:
        segments = [
            _Segment(seg["p_vaddr"], seg["p_offset"], seg["p_memsz"])
            for seg in ELFFile(stream).iter_segments()
            if seg["p_type"] == "PT_LOAD"
        ]
    if not segments:
        raise SymbolError(f"{binary_path} has no PT_LOAD segment: not a loadable module")
    return sorted(segments, key=lambda seg: seg.vaddr)


def load_bias(binary_path: str, mappings: list[Mapping]) -> int:
    """Return runtime address - link-time address for one module.

    ``mappings`` are that file's lines of /proc/self/maps.  The lowest mapping
    holds the first PT_LOAD segment, mapped from its p_vaddr rounded down to a
    page.  How far it was rounded is read from the mapping's file offset
    (p_vaddr and p_offset agree modulo the page size), so the result does not
    depend on the page size of the machine that was profiled.
    """
    if not mappings:
        raise ValueError(f"no mappings given for {binary_path}")
    return _bias(_load_segments(binary_path), mappings)


def _bias(segments: list[_Segment], mappings: list[Mapping]) -> int:
    first, lowest = segments[0], min(mappings, key=lambda m: m.start)
    rounding = first.offset - lowest.offset
    if not 0 <= rounding < _MAX_PAGE_SIZE:
        rounding = first.vaddr % _FALLBACK_PAGE_SIZE
    return lowest.start - (first.vaddr - rounding)


# --------------------------------------------------------------------------
# Resolver

class _Module:
    """One mapped file: its mappings, and lazily its ELF layout."""

    def __init__(self, path: str, mappings: list[Mapping]):
        self.path = path
        self.mappings = mappings
        self.low = min(m.start for m in mappings)
        self.mapped_high = max(m.end for m in mappings)
        self._segments: list[_Segment] | None = None

    def segments(self) -> list[_Segment]:
        if self._segments is None:
            self._segments = _load_segments(self.path)
        return self._segments

    def bias(self) -> int:
        return _bias(self.segments(), self.mappings)

    def contains(self, address: int) -> bool:
        """True if the address lies in the module's image.

        The image goes past its file-backed mappings: the tail of ``.bss``
        lives in an anonymous mapping right after them, and tags are in .bss.
        """
        if self.low <= address < self.mapped_high:
            return True
        if address < self.low:
            return False
        try:
            image_end = self.bias() + max(seg.vaddr + seg.memsz for seg in self.segments())
        except (OSError, ELFError, SymbolError):
            return False
        return address < image_end


class TypeResolver:
    """Names runtime tag addresses of one profiled process.

    ``mappings`` is the process's module map (see :func:`parse_proc_maps`).
    ``map_files`` maps a module path (or its base name) to the linker map file
    to use when that module is stripped; ``<module>.map`` next to the module is
    tried as well.  Each module's tags are read at most once per resolver.
    """

    def __init__(self, mappings: list[Mapping], map_files: dict[str, str] | None = None):
        by_path: dict[str, list[Mapping]] = {}
        for mapping in mappings:
            by_path.setdefault(mapping.path, []).append(mapping)
        self._modules = sorted((_Module(p, ms) for p, ms in by_path.items()), key=lambda m: m.low)
        self._lows = [module.low for module in self._modules]
        self._map_files = dict(map_files or {})
        self._tags: dict[str, dict[int, str]] = {}  # path -> runtime address -> name

    def resolve(self, addresses: Iterable[int]) -> dict[int, str]:
        """Return {address: type name}; unnamed addresses get ``<unknown type 0x...>``.

        Raises SymbolError when a module owning some of the addresses has
        neither a symbol table with tags nor a linker map file.
        """
        names = {}
        for address in set(addresses):
            module = self._owner(address)
            tags = self._runtime_tags(module) if module is not None else {}
            names[address] = tags.get(address, f"<unknown type {address:#x}>")
        return names

    def _owner(self, address: int) -> _Module | None:
        index = bisect.bisect_right(self._lows, address) - 1
        if index < 0:
            return None
        module = self._modules[index]
        return module if module.contains(address) else None

    def _runtime_tags(self, module: _Module) -> dict[int, str]:
        if module.path not in self._tags:
            try:
                link_tags, bias = self._link_tags(module.path), module.bias()
            except ELFError:
                link_tags, bias = {}, 0  # a mapped file that is not ELF (data, fonts)
            except OSError as error:
                raise SymbolError(f"cannot read {module.path}: {error}") from error
            self._tags[module.path] = {addr + bias: name for addr, name in link_tags.items()}
        return self._tags[module.path]

    def _link_tags(self, path: str) -> dict[int, str]:
        """Tags at link-time addresses, from the symbol table or the map file."""
        tags, complete = _read_elf_tags(path)
        if complete:
            return tags
        map_path = self._map_file_for(path)
        if map_path is not None:
            try:
                return {**map_file_type_tags(map_path), **tags}
            except OSError as error:
                raise SymbolError(f"cannot read the linker map file of {path}: {error}") from error
        if tags:
            return tags  # .dynsym alone (GCC exports its unique tag symbols)
        raise SymbolError(
            f"{path} is stripped and no linker map file was given: rebuild with "
            f"-Wl,-Map={os.path.basename(path)}.map or keep the symbol table"
        )

    def _map_file_for(self, path: str) -> str | None:
        """The map file named for this module, else ``<module>.map`` if it exists."""
        given = self._map_files.get(path) or self._map_files.get(os.path.basename(path))
        if given is not None:
            return given
        beside = path + ".map"
        return beside if os.path.isfile(beside) else None
