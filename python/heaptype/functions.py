"""Code addresses to function names, source lines and inlined frames.

A profile records code addresses of the profiled process: the entry address of
each function the instrumentation hooks saw, and the return address of each
call (the call site of an allocation, or of a call in a walked stack).  This
module names them:

* the module (executable or shared library) that holds the address, from the
  process's module map, and the address inside its file (minus the load bias);
* the function, from the ELF symbol tables (``.symtab``, then ``.dynsym``),
  demangled: the same names ``nm -C`` and pprof show;
* the source line, from the DWARF line program of the compilation unit that
  holds the address, and the chain of functions inlined at that address, from
  the unit's ``DW_TAG_inlined_subroutine`` entries (what ``addr2line -i`` shows).

Only what the addresses need is decoded: ``.debug_aranges`` leads to the units
that hold them, and only those units' line programs and subprogram trees are
read.  Results are cached on disk per binary (its GNU build id, else its path,
size and modification time) under ``$HEAPTYPE_CACHE_DIR`` (default
``$XDG_CACHE_HOME/heaptype``, ``~/.cache/heaptype``), so a second report of the
same build reads no DWARF at all.  ``HEAPTYPE_CACHE_DIR=off`` turns the cache off.

Return addresses are looked up one byte back (``address - 1``), inside the call
instruction: the instruction after a call can belong to the next line, or to the
next function when the call never returns.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import struct
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from elftools.common.exceptions import DWARFError, ELFError
from elftools.elf.elffile import ELFFile

from .symbols import Mapping, SymbolError, _bias, _load_segments, demangle_many, parse_proc_maps

__all__ = [
    "CodeLocation",
    "SourceFrame",
    "SymbolizeStats",
    "Symbolizer",
    "cache_dir",
]

CACHE_FORMAT = 2  # bump when the meaning of cached entries changes

# Debug info kept apart from the binary (Debian's -dbgsym packages, objcopy
# --only-keep-debug): looked up by build id, then by .gnu_debuglink name.
DEBUG_ROOTS = ("/usr/lib/debug",)

_COLD_SUFFIXES = (" [clone .cold]", ".cold")


# --------------------------------------------------------------------------
# Results

@dataclass(frozen=True)
class SourceFrame:
    """One function at a code address: the function itself, or one inlined into it.

    ``line`` is where in ``function`` the address is: for the innermost frame the
    line of the instruction, for an outer frame the line that called (and so
    inlined) the frame inside it.  ``file`` is None and ``line`` 0 when unknown.
    """

    function: str
    file: str | None = None
    line: int = 0
    inlined: bool = False
    # sizeof the first template type argument of the function, else of its class,
    # when DWARF has it: how big one T is for std::__new_allocator<T>::allocate.
    type_argument_size: int | None = None

    @property
    def source(self) -> str | None:
        if not self.file:
            return None
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class CodeLocation:
    """What a code address is.

    ``function`` is the (out-of-line) function holding the address, by its symbol
    table name, demangled; ``function_address`` its runtime entry.  ``frames``
    lists the functions at the address innermost first, like ``addr2line -i``:
    inlined ones (``inlined`` set), then ``function`` itself.  A module without
    debug info gives one frame without a line; an address in no known function
    gives none.
    """

    address: int
    module: str | None = None
    module_offset: int | None = None  # the address in the module's file (link-time)
    function: str | None = None
    function_address: int | None = None
    frames: tuple[SourceFrame, ...] = ()

    @property
    def name(self) -> str:
        """The function's name, or ``module+0xoffset`` / ``0xaddress`` when unknown."""
        if self.function:
            return self.function
        if self.module is not None and self.module_offset is not None:
            return f"{os.path.basename(self.module)}+{self.module_offset:#x}"
        return f"{self.address:#x}"

    @property
    def source(self) -> str | None:
        """``file:line`` of the innermost frame, if the debug info has it."""
        return self.frames[0].source if self.frames else None

    @property
    def inlined_frames(self) -> tuple[SourceFrame, ...]:
        """The inlined frames, innermost first (without the function itself)."""
        return tuple(f for f in self.frames if f.inlined)


@dataclass
class SymbolizeStats:
    """What one Symbolizer did, for the curious and for benchmarks."""

    addresses: int = 0        # distinct addresses asked for
    from_cache: int = 0       # answered from the on-disk or in-process cache
    decoded: int = 0          # looked up in the binaries
    units: int = 0            # DWARF compilation units decoded
    modules: int = 0          # binaries involved
    seconds: float = 0.0
    cache_files: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------
# Cache location

def cache_dir() -> Path | None:
    """The symbol cache directory, or None when caching is off."""
    configured = os.environ.get("HEAPTYPE_CACHE_DIR")
    if configured is not None:
        if configured.strip().lower() in ("", "0", "off", "none", "no"):
            return None
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "heaptype"


_DEFAULT = object()


# --------------------------------------------------------------------------
# The symbolizer

class Symbolizer:
    """Names code addresses of one profiled process.

    ``mappings`` is the process's module map (``/proc/self/maps`` text, or the
    list :func:`heaptype.symbols.parse_proc_maps` makes of it).  ``lines=False``
    skips DWARF: names from the symbol tables only.
    """

    def __init__(self, mappings: list[Mapping] | str, *, cache: Path | str | None | object = _DEFAULT,
                 lines: bool = True):
        if isinstance(mappings, str):
            mappings = parse_proc_maps(mappings)
        by_path: dict[str, list[Mapping]] = {}
        for mapping in mappings:
            by_path.setdefault(mapping.path, []).append(mapping)
        self._modules = sorted((_MappedModule(path, ms) for path, ms in by_path.items()), key=lambda m: m.low)
        self._lows = [m.low for m in self._modules]
        self._cache = cache_dir() if cache is _DEFAULT else (Path(cache) if cache else None)
        self._lines = lines
        self._results: dict[tuple[int, bool], CodeLocation] = {}
        self._touched: set[str] = set()
        self.stats = SymbolizeStats()

    def functions(self, addresses: Iterable[int]) -> dict[int, CodeLocation]:
        """Entry addresses of functions (as the instrumentation hooks give them)."""
        return self._resolve(addresses, return_address=False)

    def call_sites(self, addresses: Iterable[int]) -> dict[int, CodeLocation]:
        """Return addresses (looked up at ``address - 1``, inside the call)."""
        return self._resolve(addresses, return_address=True)

    # --- internals -----------------------------------------------------------------

    def _owner(self, address: int) -> _MappedModule | None:
        index = bisect.bisect_right(self._lows, address) - 1
        if index < 0:
            return None
        module = self._modules[index]
        return module if module.contains(address) else None

    def _resolve(self, addresses: Iterable[int], return_address: bool) -> dict[int, CodeLocation]:
        started = time.perf_counter()
        wanted = {a for a in addresses if (a, return_address) not in self._results}
        by_module: dict[_MappedModule | None, list[int]] = {}
        for address in wanted:
            by_module.setdefault(self._owner(address), []).append(address)
        self.stats.addresses += len(wanted)
        for module, batch in by_module.items():
            if module is None:
                for address in batch:
                    self._results[(address, return_address)] = CodeLocation(address)
                continue
            try:
                bias = module.bias()
                info = _binary_info(module.path, self._cache)
            except (OSError, ELFError, SymbolError, ValueError):
                for address in batch:
                    self._results[(address, return_address)] = CodeLocation(
                        address, module.path, address - module.low)
                continue
            self._touched.add(module.path)
            pcs = {a: a - bias - (1 if return_address else 0) for a in batch}
            entries = info.lookup(set(pcs.values()), self._lines, self.stats)
            for address, pc in pcs.items():
                self._results[(address, return_address)] = _location(
                    address, module.path, address - bias, bias, entries.get(pc))
        self.stats.modules = len(self._touched)
        self.stats.seconds += time.perf_counter() - started
        return {a: self._results[(a, return_address)] for a in addresses}


def _location(address: int, module: str, offset: int, bias: int, entry) -> CodeLocation:
    if entry is None:
        return CodeLocation(address, module, offset)
    function, start, frames = entry
    return CodeLocation(address, module, offset, function, None if start is None else start + bias,
                        tuple(SourceFrame(*frame) for frame in frames))


class _MappedModule:
    def __init__(self, path: str, mappings: list[Mapping]):
        self.path = path
        self.mappings = mappings
        self.low = min(m.start for m in mappings)
        self.high = max(m.end for m in mappings)
        self._bias: int | None = None

    def contains(self, address: int) -> bool:
        return self.low <= address < self.high

    def bias(self) -> int:
        if self._bias is None:
            self._bias = _bias(_load_segments(self.path), self.mappings)
        return self._bias


# --------------------------------------------------------------------------
# One binary: cached entries, and the ELF/DWARF behind them
#
# An entry, for one link-time pc: (function name or None, function start or
# None, frames innermost first as (function, file, line, inlined) tuples).

_BINARIES: dict[str, "_BinaryInfo"] = {}  # path -> info, for this process


def _binary_info(path: str, cache: Path | None) -> "_BinaryInfo":
    st = os.stat(path)
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
    info = _BINARIES.get(path)
    if info is None or info.stamp != stamp or info.cache_root != cache:
        info = _BinaryInfo(path, stamp, cache)
        _BINARIES[path] = info
    return info


class _BinaryInfo:
    def __init__(self, path: str, stamp: tuple, cache: Path | None):
        self.path = path
        self.stamp = stamp
        self.cache_root = cache
        self.build_id = _read_build_id(path)
        self.key = self.build_id or _fallback_key(path, stamp)
        self.entries: dict[int, tuple | None] = {}
        self._loaded_cache = False
        self._reader: _ElfReader | None = None

    @property
    def cache_file(self) -> Path | None:
        if self.cache_root is None:
            return None
        return self.cache_root / "symbols" / f"{self.key}.json"

    def lookup(self, pcs: set[int], lines: bool, stats: SymbolizeStats) -> dict[int, tuple | None]:
        if not self._loaded_cache:
            self._load_cache()
        missing = [pc for pc in pcs if pc not in self.entries
                   or (lines and self.entries[pc] is not None and self.entries[pc][3] is False)]
        stats.from_cache += len(pcs) - len(missing)
        if missing:
            stats.decoded += len(missing)
            if self._reader is None:
                self._reader = _ElfReader(self.path)
            found = self._reader.lookup(missing, lines, stats)
            for pc in missing:
                entry = found.get(pc)
                self.entries[pc] = None if entry is None else (*entry, lines)
            self._save_cache(missing)
        if self.cache_file is not None and str(self.cache_file) not in stats.cache_files:
            stats.cache_files.append(str(self.cache_file))
        return {pc: (None if self.entries[pc] is None else self.entries[pc][:3]) for pc in pcs}

    def _load_cache(self) -> None:
        self._loaded_cache = True
        path = self.cache_file
        if path is None:
            return
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        if data.get("format") != CACHE_FORMAT:
            return
        self.entries.update(_decode_entries(data.get("entries", {})))

    def _save_cache(self, new_pcs: list[int]) -> None:
        path = self.cache_file
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            entries = {}
            try:  # another process may have added entries meanwhile: keep them
                data = json.loads(path.read_text())
                if data.get("format") == CACHE_FORMAT:
                    entries = data.get("entries", {})
            except (OSError, ValueError):
                pass
            entries.update(_encode_entries({pc: self.entries[pc] for pc in self.entries}))
            text = json.dumps({"format": CACHE_FORMAT, "binary": self.path, "build_id": self.build_id,
                               "entries": entries}, separators=(",", ":"))
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "w") as out:
                out.write(text)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only or full cache directory costs time, not results


def _encode_entries(entries: dict[int, tuple | None]) -> dict[str, list | None]:
    out = {}
    for pc, entry in entries.items():
        if entry is None:
            out[f"{pc:x}"] = None
        else:
            function, start, frames, lines = entry
            out[f"{pc:x}"] = [function, start, [list(f) for f in frames], lines]
    return out


def _decode_entries(raw: dict) -> dict[int, tuple | None]:
    out = {}
    for key, value in raw.items():
        try:
            pc = int(key, 16)
            if value is None:
                out[pc] = None
            else:
                function, start, frames, lines = value
                out[pc] = (function, start,
                           tuple((str(f[0]), f[1], int(f[2]), bool(f[3]), f[4] if len(f) > 4 else None)
                                 for f in frames),
                           bool(lines))
        except (ValueError, TypeError, IndexError):
            continue
    return out


def _read_build_id(path: str) -> str | None:
    try:
        with open(path, "rb") as stream:
            elf = ELFFile(stream)
            for section in elf.iter_sections():
                if section["sh_type"] != "SHT_NOTE":
                    continue
                for note in section.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return str(note["n_desc"])
    except (OSError, ELFError, ValueError):
        return None
    return None


def _fallback_key(path: str, stamp: tuple) -> str:
    size, mtime_ns, _ = stamp
    digest = hashlib.sha1(f"{os.path.realpath(path)}\0{size}\0{mtime_ns}".encode()).hexdigest()
    return f"path-{digest}"


def _strip_cold(name: str) -> str:
    """``f [clone .cold]`` is the part of f that GCC moved away from the hot path."""
    for suffix in _COLD_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


# --------------------------------------------------------------------------
# ELF symbol tables

class _FunctionTable:
    """Function symbols of one binary, sorted by address, names still mangled."""

    def __init__(self, elf: ELFFile):
        rows: dict[int, tuple[int, int, int, bytes]] = {}  # start -> (rank, size, name offset, table)
        self._strings: list[bytes] = []
        for table_index, name in enumerate((".symtab", ".dynsym")):
            section = elf.get_section_by_name(name)
            if section is None or section["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
                continue
            strings = elf.get_section(section["sh_link"]).data()
            self._strings.append(strings)
            string_index = len(self._strings) - 1
            endian = "<" if elf.little_endian else ">"
            if elf.elfclass == 64:
                layout = endian + "IBBHQQ"
                fields = lambda e: (e[0], e[1], e[3], e[4], e[5])  # name, info, shndx, value, size
            else:
                layout = endian + "IIIBBH"
                fields = lambda e: (e[0], e[3], e[5], e[1], e[2])
            size = struct.calcsize(layout)
            data = section.data()
            data = data[: len(data) - len(data) % size]
            for entry in struct.iter_unpack(layout, data):
                name_offset, info, shndx, value, sym_size = fields(entry)
                kind, binding = info & 0xF, info >> 4
                if kind not in (2, 10) or shndx == 0 or not value:  # STT_FUNC, STT_GNU_IFUNC; defined
                    continue
                # Prefer global over weak over local names, sized over unsized, .symtab first.
                rank = (0 if binding == 1 else 1 if binding == 2 else 2, 0 if sym_size else 1, table_index)
                old = rows.get(value)
                if old is None or rank < old[0]:
                    rows[value] = (rank, sym_size, name_offset, string_index)
        starts = sorted(rows)
        self.starts = starts
        self.sizes = [rows[s][1] for s in starts]
        self._names = [(rows[s][2], rows[s][3]) for s in starts]

    def __len__(self) -> int:
        return len(self.starts)

    def find(self, pc: int) -> tuple[int, str] | None:
        """(start, mangled name) of the function holding pc, or None."""
        index = bisect.bisect_right(self.starts, pc) - 1
        if index < 0:
            return None
        start, size = self.starts[index], self.sizes[index]
        if pc >= start + max(size, 1):
            return None
        offset, table = self._names[index]
        strings = self._strings[table]
        end = strings.find(b"\0", offset)
        return start, strings[offset:end].decode("utf-8", "replace")


# --------------------------------------------------------------------------
# DWARF

_CODE_SCOPES = ("DW_TAG_subprogram", "DW_TAG_inlined_subroutine", "DW_TAG_lexical_block",
                "DW_TAG_try_block", "DW_TAG_catch_block")
_CONTAINERS = ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type",
               "DW_TAG_module")
# Frames whose template argument's size a report may need (type inference); the
# names here are still mangled (linkage names) or plain source names.
_SIZED_FRAMES = ("allocat", "make_unique", "make_shared", "10make_uniq", "11make_shared", "basic_string")
# DW_LANG_C89, C, C99, C11, C17, Mips_Assembler
_FLAT_LANGUAGES = {0x0001, 0x0002, 0x000C, 0x001D, 0x002C, 0x8001}
_NAME_SCOPES = {"DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type"}


class _ElfReader:
    """Reads one binary's symbols and debug info, keeping what it decoded."""

    def __init__(self, path: str):
        self.path = path
        self._stream = open(path, "rb")
        self._elf = ELFFile(self._stream)
        self._functions = _FunctionTable(self._elf)
        self._dwarf_elf = self._debug_elf()
        self._dwarf = None
        self._dwarf_failed = False
        self._aranges = None
        self._unit_ranges: list[tuple[int, int, int]] | None = None  # (low, high, cu offset)
        self._units: dict[int, _Unit] = {}
        if not len(self._functions) and self._dwarf_elf is not self._elf:
            self._functions = _FunctionTable(self._dwarf_elf)

    def _debug_elf(self) -> ELFFile:
        if self._elf.get_section_by_name(".debug_info") is not None:
            return self._elf
        for candidate in _separate_debug_files(self.path, self._elf):
            try:
                stream = open(candidate, "rb")
                elf = ELFFile(stream)
            except (OSError, ELFError):
                continue
            if elf.get_section_by_name(".debug_info") is not None:
                return elf
            stream.close()
        return self._elf

    def dwarf(self):
        if self._dwarf is None and not self._dwarf_failed:
            try:
                if self._dwarf_elf.has_dwarf_info() and self._dwarf_elf.get_section_by_name(".debug_info"):
                    self._dwarf = self._dwarf_elf.get_dwarf_info(relocate_dwarf_sections=False)
                    self._aranges = self._dwarf.get_aranges()
                else:
                    self._dwarf_failed = True
            except (DWARFError, ELFError, ValueError, KeyError, AssertionError):
                self._dwarf_failed = True
        return self._dwarf

    def lookup(self, pcs: list[int], lines: bool, stats: SymbolizeStats) -> dict[int, tuple]:
        """Entries for pcs (function, start, frames) with names demangled."""
        raw: dict[int, tuple] = {}
        mangled: set[str] = set()
        dwarf = self.dwarf() if lines else None
        for pc in sorted(pcs):
            symbol = self._functions.find(pc)
            chain: list[tuple[str, str | None, int, int | None]] = []  # outermost first: name, file, line, size
            if dwarf is not None:
                try:
                    chain = self._dwarf_frames(pc, stats)
                except (DWARFError, ELFError, ValueError, KeyError, IndexError, AssertionError,
                        NotImplementedError, struct.error):
                    chain = []
            if symbol is None and not chain:
                continue
            if symbol is not None:
                mangled.add(symbol[1])
            mangled.update(link[0] for link in chain if link[0].startswith("_Z"))
            raw[pc] = (symbol, chain)
        names = dict(zip(sorted(mangled), demangle_many(sorted(mangled))))
        entries = {}
        for pc, (symbol, chain) in raw.items():
            function = start = None
            if symbol is not None:
                start, function = symbol[0], _strip_cold(names.get(symbol[1], symbol[1]))
            frames = []
            for depth, (name, file, line, size) in enumerate(reversed(chain)):
                outermost = depth == len(chain) - 1
                label = names.get(name, name)
                if outermost and function is not None:
                    label = function  # the symbol table names the out-of-line function
                frames.append((label, file, line, not outermost, size))
            if not frames and function is not None:
                frames.append((function, None, 0, False, None))
            if function is None and chain:
                function = frames[-1][0]
            entries[pc] = (function, start, tuple(frames))
        return entries

    # --- units --------------------------------------------------------------------

    def _unit_for(self, pc: int, stats: SymbolizeStats) -> "_Unit | None":
        offset = None
        if self._aranges is not None:
            try:
                offset = self._aranges.cu_offset_at_addr(pc)
            except (DWARFError, ValueError, struct.error):
                offset = None
        if offset is None:
            offset = self._unit_by_scan(pc)
        if offset is None:
            return None
        unit = self._units.get(offset)
        if unit is None:
            unit = _Unit(self._dwarf, self._dwarf.get_CU_at(offset))
            self._units[offset] = unit
            stats.units += 1
        return unit

    def _unit_by_scan(self, pc: int) -> int | None:
        """Without (complete) .debug_aranges: the units' own ranges, read once."""
        if self._unit_ranges is None:
            ranges = []
            for cu in self._dwarf.iter_CUs():
                try:
                    top = cu.get_top_DIE()
                    for low, high in _die_ranges(self._dwarf, cu, top, None):
                        ranges.append((low, high, cu.cu_offset))
                except (DWARFError, ValueError, KeyError, AssertionError, struct.error):
                    continue
            ranges.sort()
            self._unit_ranges = ranges
        index = bisect.bisect_right(self._unit_ranges, (pc, float("inf"), 0)) - 1
        for low, high, offset in reversed(self._unit_ranges[max(0, index - 63): index + 1]):
            if low <= pc < high:
                return offset
        return None

    def _dwarf_frames(self, pc: int, stats: SymbolizeStats) -> list[tuple[str, str | None, int, int | None]]:
        """Functions at pc, outermost first, each with the line inside it."""
        unit = self._unit_for(pc, stats)
        if unit is None:
            return []
        return unit.frames(pc)


def _separate_debug_files(path: str, elf: ELFFile) -> list[str]:
    candidates = []
    build_id = None
    for section in elf.iter_sections():
        if section["sh_type"] == "SHT_NOTE":
            for note in section.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID":
                    build_id = str(note["n_desc"])
    if build_id and len(build_id) > 2:
        for root in DEBUG_ROOTS:
            candidates.append(os.path.join(root, ".build-id", build_id[:2], build_id[2:] + ".debug"))
    link = elf.get_section_by_name(".gnu_debuglink")
    if link is not None:
        data = link.data()
        name = data[: data.find(b"\0")].decode("utf-8", "replace")
        if name:
            directory = os.path.dirname(os.path.realpath(path))
            candidates += [os.path.join(directory, name), os.path.join(directory, ".debug", name)]
            candidates += [os.path.join(root + directory, name) for root in DEBUG_ROOTS]
    return [c for c in candidates if os.path.isfile(c) and os.path.realpath(c) != os.path.realpath(path)]


def _attr_int(die, name: str) -> int | None:
    attr = die.attributes.get(name)
    return None if attr is None else attr.value


def _die_ranges(dwarf, cu, die, base: int | None) -> list[tuple[int, int]]:
    """The [low, high) address ranges of a DIE (low_pc/high_pc or DW_AT_ranges)."""
    attrs = die.attributes
    low = attrs.get("DW_AT_low_pc")
    if "DW_AT_ranges" in attrs:
        range_lists = dwarf.range_lists()
        if range_lists is None:
            return []
        if base is None:
            top = cu.get_top_DIE()
            base = _attr_int(top, "DW_AT_low_pc") or 0
        out = []
        for entry in range_lists.get_range_list_at_offset(attrs["DW_AT_ranges"].value, cu=cu):
            if hasattr(entry, "base_address"):
                base = entry.base_address
            elif entry.is_absolute:
                out.append((entry.begin_offset, entry.end_offset))
            else:
                out.append((base + entry.begin_offset, base + entry.end_offset))
        return [(lo, hi) for lo, hi in out if hi > lo]
    if low is None:
        return []
    high = attrs.get("DW_AT_high_pc")
    if high is None:
        return [(low.value, low.value + 1)]
    if high.form in ("DW_FORM_addr", "DW_FORM_addrx", "DW_FORM_addrx1", "DW_FORM_addrx2", "DW_FORM_addrx3",
                     "DW_FORM_addrx4"):
        return [(low.value, high.value)]
    return [(low.value, low.value + high.value)]


class _Unit:
    """One compilation unit: its line table and its functions' address ranges."""

    def __init__(self, dwarf, cu):
        self.dwarf = dwarf
        self.cu = cu
        try:  # parses the unit's abbreviations once, for itself and for pyelftools
            self._scanner: _SubprogramScanner | None = _SubprogramScanner(dwarf, cu)
        except (_ScanError, IndexError, KeyError, struct.error, AttributeError):
            self._scanner = None
        top = cu.get_top_DIE()
        self.base = _attr_int(top, "DW_AT_low_pc") or 0
        self.comp_dir = _text(top.attributes.get("DW_AT_comp_dir"))
        # Only C++ (and the like) nest functions in scopes whose names a
        # function DIE without a linkage name needs; C does not.
        self.scoped = _attr_int(top, "DW_AT_language") not in _FLAT_LANGUAGES
        self._line_program = None
        self._files: list[str | None] | None = None
        self._sequences: list[tuple[int, int, list[int], list[int], list[int]]] | None = None
        self._seq_starts: list[int] = []
        self._functions: list[tuple[int, int, int]] | None = None  # (low, high, die offset)
        self._function_lows: list[int] = []
        self._names: dict[int, str] = {}

    # --- lines --------------------------------------------------------------------

    def _load_lines(self) -> None:
        self._sequences = []
        self._files = []
        top = self.cu.get_top_DIE()
        if "DW_AT_stmt_list" not in top.attributes:
            return
        program = self.dwarf.line_program_for_CU(self.cu)
        if program is None:
            return
        self._line_program = program
        self._files = _file_names(program, self.comp_dir)
        data = _section_bytes(self.dwarf, "debug_line_sec")
        self._sequences = _decode_line_program(program, data, self.cu.structs.address_size)
        self._sequences.sort(key=lambda s: s[0])
        self._seq_starts = [s[0] for s in self._sequences]

    def line_at(self, pc: int) -> tuple[str | None, int]:
        if self._sequences is None:
            self._load_lines()
        index = bisect.bisect_right(self._seq_starts, pc) - 1
        while index >= 0:
            start, end, addresses, files, lines = self._sequences[index]
            if start <= pc < end:
                row = bisect.bisect_right(addresses, pc) - 1
                return self.file_name(files[row]), lines[row]
            index -= 1
            if index >= 0 and self._sequences[index][1] <= start:
                break
        return None, 0

    def file_name(self, index: int) -> str | None:
        if self._files is None:
            self._load_lines()
        return self._files[index] if 0 <= index < len(self._files) else None

    # --- functions ----------------------------------------------------------------

    def _load_functions(self) -> None:
        try:
            if self._scanner is None:
                raise _ScanError("no scanner")
            found = self._scanner.scan()
            for offset in found.pop("ranges"):
                die = self.cu.get_DIE_from_refaddr(offset)
                found["pcs"] += [(low, high, offset) for low, high in _die_ranges(self.dwarf, self.cu, die, self.base)]
            found = found["pcs"]
        except (_ScanError, IndexError, KeyError, struct.error):
            found = []  # a form this scanner does not know: fall back to pyelftools
            self._collect(self.cu.get_top_DIE(), found)
        found.sort()
        self._functions = found
        self._function_lows = [f[0] for f in found]

    def _collect(self, die, found: list) -> None:
        for child in die.iter_children():
            tag = child.tag
            if tag == "DW_TAG_subprogram":
                for low, high in _die_ranges(self.dwarf, self.cu, child, self.base):
                    found.append((low, high, child.offset))
            elif tag in _CONTAINERS:
                self._collect(child, found)

    def frames(self, pc: int) -> list[tuple[str, str | None, int, int | None]]:
        if self._functions is None:
            self._load_functions()
        index = bisect.bisect_right(self._function_lows, pc) - 1
        subprogram = None
        while index >= 0:
            low, high, offset = self._functions[index]
            if low <= pc < high:
                subprogram = self.cu.get_DIE_from_refaddr(offset)
                break
            index -= 1
            if pc - low > 1 << 24:
                break
        file, line = self.line_at(pc)
        if subprogram is None:
            return []
        scopes = [subprogram]
        die = subprogram
        while True:
            inner = None
            for child in die.iter_children():
                if child.tag in _CODE_SCOPES and any(lo <= pc < hi for lo, hi in
                                                     _die_ranges(self.dwarf, self.cu, child, self.base)):
                    inner = child
                    break
            if inner is None:
                break
            if inner.tag == "DW_TAG_inlined_subroutine" or inner.tag == "DW_TAG_subprogram":
                scopes.append(inner)
            die = inner
        # Lines: the innermost frame's from the line table; each outer frame's is
        # where it called (inlined) the frame inside it.
        out = []
        for i, scope in enumerate(scopes):
            if i + 1 < len(scopes):
                inner = scopes[i + 1]
                call_file = _attr_int(inner, "DW_AT_call_file")
                call_line = _attr_int(inner, "DW_AT_call_line") or 0
                where = (self.file_name(call_file) if call_file is not None else None, call_line)
            else:
                where = (file, line)
            name = self.name_of(scope)
            size = None
            if scope.tag == "DW_TAG_inlined_subroutine" and any(k in name for k in _SIZED_FRAMES):
                size = self.template_argument_size(scope)
            out.append((name, *where, size))
        return out

    def _origins(self, die) -> list:
        """The DIE, then what its abstract origin / specification point to."""
        out, current = [], die
        while current is not None and len(out) < 8:
            out.append(current)
            nxt = None
            for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
                if key in current.attributes:
                    try:
                        nxt = current.get_DIE_from_attribute(key)
                    except (DWARFError, ValueError, KeyError, AssertionError, NotImplementedError):
                        nxt = None
                    break
            current = nxt
        return out

    def template_argument_size(self, die) -> int | None:
        """sizeof the first template type argument of a function (or its class)."""
        try:
            origins = self._origins(die)
            for candidate in origins:
                size = self._first_type_param_size(candidate)
                if size is not None:
                    return size
            # A member function: its class is the type `this` points to (cheaper than
            # pyelftools' search for a parent DIE, which reads the whole unit).
            for candidate in origins:
                if not candidate.has_children:
                    continue
                for child in candidate.iter_children():
                    if child.tag == "DW_TAG_formal_parameter" and "DW_AT_artificial" in child.attributes:
                        pointer = child.get_DIE_from_attribute("DW_AT_type")
                        while pointer.tag in ("DW_TAG_const_type", "DW_TAG_pointer_type") \
                                and "DW_AT_type" in pointer.attributes:
                            pointer = pointer.get_DIE_from_attribute("DW_AT_type")
                            if pointer.tag in ("DW_TAG_class_type", "DW_TAG_structure_type"):
                                return self._first_type_param_size(pointer)
                        break
            parent = origins[-1].get_parent()
            if parent is not None and parent.tag in ("DW_TAG_class_type", "DW_TAG_structure_type",
                                                     "DW_TAG_union_type"):
                return self._first_type_param_size(parent)
        except (DWARFError, ValueError, KeyError, AssertionError, NotImplementedError, IndexError):
            return None
        return None

    def _first_type_param_size(self, die) -> int | None:
        if not die.has_children:
            return None
        for child in die.iter_children():
            if child.tag == "DW_TAG_template_type_param":
                return _byte_size(child)
        return None

    def name_of(self, die) -> str:
        """A function DIE's mangled linkage name, else its (qualified) source name."""
        cached = self._names.get(die.offset)
        if cached is not None:
            return cached
        name = None
        source_name, source_die = None, None
        current, hops = die, 0
        while current is not None and hops < 8:
            attrs = current.attributes
            for key in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
                if key in attrs:
                    name = _text(attrs[key])
                    break
            if name:
                break
            if source_name is None and "DW_AT_name" in attrs:
                source_name, source_die = _text(attrs["DW_AT_name"]), current
            nxt = None
            for key in ("DW_AT_abstract_origin", "DW_AT_specification"):
                if key in attrs:
                    try:
                        nxt = current.get_DIE_from_attribute(key)
                    except (DWARFError, ValueError, KeyError, AssertionError):
                        nxt = None
                    break
            current, hops = nxt, hops + 1
        if not name:
            if not source_name:
                name = "<unknown function>"
            else:
                name = _qualified(source_die, source_name) if self.scoped else source_name
        self._names[die.offset] = name
        return name


def _byte_size(die) -> int | None:
    """The byte size of the type a DIE refers to (through typedefs and qualifiers)."""
    current = die
    for _ in range(16):
        if "DW_AT_type" not in current.attributes:
            return None
        current = current.get_DIE_from_attribute("DW_AT_type")
        size = _attr_int(current, "DW_AT_byte_size")
        if size is not None:
            return size
        # T[] (std::make_unique<T[]>): the element's size
        if current.tag not in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                               "DW_TAG_restrict_type", "DW_TAG_atomic_type", "DW_TAG_array_type"):
            return None
    return None


def _qualified(die, name: str) -> str:
    parts = [name]
    try:
        parent = die.get_parent()
        while parent is not None and parent.tag in _NAME_SCOPES:
            scope = _text(parent.attributes.get("DW_AT_name")) or "(anonymous namespace)"
            parts.append(scope)
            parent = parent.get_parent()
    except (DWARFError, ValueError, KeyError, AssertionError):
        pass
    return "::".join(reversed(parts))


def _text(attr) -> str | None:
    if attr is None:
        return None
    value = attr.value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _file_names(program, comp_dir: str | None) -> list[str | None]:
    header = program.header
    version = header["version"]
    dirs = [d.decode("utf-8", "replace") if isinstance(d, bytes) else str(d)
            for d in header["include_directory"]]
    names: list[str | None] = []
    if version < 5:
        names.append(None)  # file numbers start at 1
    for entry in header["file_entry"]:
        name = entry.name.decode("utf-8", "replace") if isinstance(entry.name, bytes) else str(entry.name)
        dir_index = entry.dir_index
        if version >= 5:
            directory = dirs[dir_index] if 0 <= dir_index < len(dirs) else None
        elif dir_index == 0:
            directory = comp_dir
        else:
            directory = dirs[dir_index - 1] if dir_index - 1 < len(dirs) else None
        if directory and not os.path.isabs(name):
            if not os.path.isabs(directory) and comp_dir:
                directory = os.path.join(comp_dir, directory)
            name = os.path.join(directory, name)
        names.append(os.path.normpath(name))
    return names


def _decode_line_program(program, data, address_size: int):
    """The rows of a DWARF line program, as sequences.

    Returns [(start, end, addresses, files, lines)]: from addresses[i] on, the
    code is at files[i]:lines[i].  A hand-written state machine: pyelftools' own
    decoder builds objects per row and is several times slower on large units.
    Sequences at address 0 (code the linker discarded) are dropped.
    """
    header = program.header
    opcode_base = header["opcode_base"]
    line_base = header["line_base"]
    line_range = header["line_range"]
    min_inst = header["minimum_instruction_length"]
    lengths = list(header["standard_opcode_lengths"])
    pos, end = program.program_start_offset, program.program_end_offset
    address_format = "<Q" if address_size == 8 else "<I"
    special_address = [((op - opcode_base) // line_range) * min_inst if op >= opcode_base else 0
                       for op in range(256)]
    special_line = [line_base + (op - opcode_base) % line_range if op >= opcode_base else 0 for op in range(256)]
    const_add_pc = ((255 - opcode_base) // line_range) * min_inst

    sequences = []
    address, file, line = 0, 1, 1
    addresses: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    last = -1

    while pos < end:
        opcode = data[pos]
        pos += 1
        if opcode >= opcode_base:  # special opcode: a new row (most of any program)
            address += special_address[opcode]
            line += special_line[opcode]
            if address != last:
                addresses.append(address)
                files.append(file)
                lines.append(line)
                last = address
            else:  # a later row at the same address wins
                files[-1] = file
                lines[-1] = line
        elif opcode == 0:
            length, pos = _uleb(data, pos)
            if length == 0:
                continue
            sub = data[pos]
            body = pos + 1
            pos += length
            if sub == 1:  # DW_LNE_end_sequence
                if addresses and addresses[0] != 0 and address > addresses[0]:
                    sequences.append((addresses[0], address, addresses, files, lines))
                address, file, line, last = 0, 1, 1, -1
                addresses, files, lines = [], [], []
            elif sub == 2:  # DW_LNE_set_address
                if length - 1 >= address_size:
                    address = struct.unpack_from(address_format, data, body)[0]
                else:
                    address = int.from_bytes(bytes(data[body:pos]), "little")
        elif opcode == 1:  # DW_LNS_copy
            if address != last:
                addresses.append(address)
                files.append(file)
                lines.append(line)
                last = address
            else:
                files[-1] = file
                lines[-1] = line
        elif opcode == 2:  # advance_pc
            value, pos = _uleb(data, pos)
            address += value * min_inst
        elif opcode == 3:  # advance_line
            value, pos = _sleb(data, pos)
            line += value
        elif opcode == 4:  # set_file
            file, pos = _uleb(data, pos)
        elif opcode == 5:  # set_column
            _, pos = _uleb(data, pos)
        elif opcode in (6, 7, 10, 11):  # negate_stmt, basic_block, prologue_end, epilogue_begin
            pass
        elif opcode == 8:  # const_add_pc
            address += const_add_pc
        elif opcode == 9:  # fixed_advance_pc
            address += data[pos] | (data[pos + 1] << 8)
            pos += 2
        elif opcode == 12:  # set_isa
            _, pos = _uleb(data, pos)
        else:  # an opcode this version does not know: skip its operands
            for _ in range(lengths[opcode - 1] if opcode - 1 < len(lengths) else 0):
                _, pos = _uleb(data, pos)
    return sequences


# --------------------------------------------------------------------------
# A raw DIE scanner for the one hot loop: finding a unit's functions
#
# pyelftools parses every attribute of every DIE into objects; a unit of a large
# C or C++ file has thousands of top-level DIEs (declarations from headers) ahead
# of its functions. This scanner decodes only the tag, the address range and the
# sibling link of each DIE and skips everything else by its form.

class _ScanError(Exception):
    pass


_SIBLING, _LOW_PC, _HIGH_PC, _RANGES = 0x01, 0x11, 0x12, 0x55
_TAG_SUBPROGRAM = 0x2E
_TAG_CONTAINERS = {0x39, 0x02, 0x13, 0x17, 0x1E}  # namespace, class, structure, union, module
_FIXED_FORMS = {0x0C: 1, 0x0B: 1, 0x11: 1, 0x25: 1, 0x29: 1, 0x05: 2, 0x12: 2, 0x26: 2, 0x2A: 2, 0x27: 3,
                0x2B: 3, 0x06: 4, 0x13: 4, 0x28: 4, 0x2C: 4, 0x1C: 4, 0x07: 8, 0x14: 8, 0x20: 8, 0x24: 8,
                0x1E: 16, 0x19: 0, 0x21: 0}
_OFFSET_FORMS = {0x0E, 0x1F, 0x17, 0x1D, 0x1F20, 0x1F21}
_ULEB_FORMS = {0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02}
_ADDRX_FORMS = {0x1B: None, 0x29: 1, 0x2A: 2, 0x2B: 3, 0x2C: 4}
_ABBREV_CACHE: dict[tuple[int, int], dict] = {}


def _uleb(data, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _sleb(data, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


class _SubprogramScanner:
    def __init__(self, dwarf, cu):
        self.dwarf = dwarf
        self.cu = cu
        self.info = _section_bytes(dwarf, "debug_info_sec")
        header = cu.header
        self.version = header["version"]
        self.address_size = header["address_size"]
        self.offset_size = 8 if cu.structs.dwarf_format == 64 else 4
        self.abbrevs = self._abbrevs(header["debug_abbrev_offset"])

    def _abbrevs(self, offset: int) -> dict:
        key = (id(self.dwarf), offset)
        table = _ABBREV_CACHE.get(key)
        if table is not None:
            return table
        data = _section_bytes(self.dwarf, "debug_abbrev_sec")
        table = {}
        pos = offset
        while True:
            code, pos = _uleb(data, pos)
            if code == 0:
                break
            tag, pos = _uleb(data, pos)
            children = data[pos] != 0
            pos += 1
            specs, consts = [], []
            while True:
                attr, pos = _uleb(data, pos)
                form, pos = _uleb(data, pos)
                if attr == 0 and form == 0:
                    break
                const = None
                if form == 0x21:  # implicit_const: the value lives here
                    const, pos = _sleb(data, pos)
                specs.append((attr, form))
                consts.append(const)
            table[code] = (tag, children, tuple(specs), tuple(consts))
        if len(_ABBREV_CACHE) > 4096:
            _ABBREV_CACHE.clear()
        _ABBREV_CACHE[key] = table
        _share_abbrevs(self.dwarf, offset, table)
        return table

    def scan(self) -> dict:
        """{"pcs": [(low, high, die offset)], "ranges": [die offsets with DW_AT_ranges]}."""
        self.pcs: list = []
        self.ranges: list = []
        cu_end = self.cu.cu_offset + self.cu.size
        pos = self.cu.cu_die_offset
        code, pos = _uleb(self.info, pos)
        if code == 0:
            return {"pcs": [], "ranges": []}
        tag, children, specs, _ = self.abbrevs[code]
        pos, _ = self._attributes(pos, specs)
        if children:
            self._children(pos, cu_end, True)
        return {"pcs": self.pcs, "ranges": self.ranges}

    def _children(self, pos: int, end: int, record: bool) -> int:
        data, abbrevs, cu_offset = self.info, self.abbrevs, self.cu.cu_offset
        while pos < end:
            start = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = _uleb(data, pos)
            if code == 0:
                return pos
            try:
                tag, children, specs, _ = abbrevs[code]
            except KeyError:
                raise _ScanError(f"abbreviation {code} missing") from None
            pos, values = self._attributes(pos, specs)
            if record and tag == _TAG_SUBPROGRAM:
                self._record(start, values)
            if children:
                if record and tag in _TAG_CONTAINERS:
                    pos = self._children(pos, end, True)
                elif _SIBLING in values:
                    pos = cu_offset + values[_SIBLING]
                else:
                    pos = self._children(pos, end, False)
        return pos

    def _record(self, offset: int, values: dict) -> None:
        if _RANGES in values:
            self.ranges.append(offset)
            return
        low = values.get(_LOW_PC)
        if low is None:
            return
        low_value, low_form = low
        if low_form in _ADDRX_FORMS:
            low_value = self.dwarf.get_addr(self.cu, low_value)
        if not low_value:
            return  # code the linker dropped
        high = values.get(_HIGH_PC)
        if high is None:
            self.pcs.append((low_value, low_value + 1, offset))
            return
        high_value, high_form = high
        if high_form == 0x01:
            self.pcs.append((low_value, high_value, offset))
        elif high_form in _ADDRX_FORMS:
            self.pcs.append((low_value, self.dwarf.get_addr(self.cu, high_value), offset))
        else:
            self.pcs.append((low_value, low_value + high_value, offset))

    def _attributes(self, pos: int, specs) -> tuple[int, dict]:
        data = self.info
        values = {}
        for attr, form in specs:
            while form == 0x16:  # indirect
                form, pos = _uleb(data, pos)
            wanted = attr in (_SIBLING, _LOW_PC, _HIGH_PC, _RANGES)
            size = _FIXED_FORMS.get(form)
            if size is not None:
                if wanted and size:
                    value = int.from_bytes(data[pos:pos + size], "little")
                    values[attr] = value if attr == _SIBLING else (value, form)
                pos += size
            elif form == 0x01:  # addr
                if wanted:
                    values[attr] = (int.from_bytes(data[pos:pos + self.address_size], "little"), form)
                pos += self.address_size
            elif form in _OFFSET_FORMS or form == 0x10:
                size = self.address_size if (form == 0x10 and self.version == 2) else self.offset_size
                if wanted:
                    value = int.from_bytes(data[pos:pos + size], "little")
                    values[attr] = value if attr == _SIBLING else (value, form)
                    if form == 0x10 and attr == _SIBLING:
                        values[attr] = value - self.cu.cu_offset
                pos += size
            elif form in _ULEB_FORMS:
                value, pos = _uleb(data, pos)
                if wanted:
                    values[attr] = value if attr == _SIBLING else (value, form)
            elif form == 0x0D:  # sdata
                value, pos = _sleb(data, pos)
                if wanted:
                    values[attr] = (value, form)
            elif form == 0x08:  # string
                pos = data.index(b"\0", pos) + 1
            elif form == 0x0A:  # block1
                pos += 1 + data[pos]
            elif form == 0x03:  # block2
                pos += 2 + int.from_bytes(data[pos:pos + 2], "little")
            elif form == 0x04:  # block4
                pos += 4 + int.from_bytes(data[pos:pos + 4], "little")
            elif form in (0x09, 0x18):  # block, exprloc
                length, pos = _uleb(data, pos)
                pos += length
            else:
                raise _ScanError(f"form {form:#x}")
        return pos, values


_SECTION_BYTES: dict[tuple[int, str], bytes] = {}


def _section_bytes(dwarf, name: str) -> bytes:
    key = (id(dwarf), name)
    data = _SECTION_BYTES.get(key)
    if data is None:
        section = getattr(dwarf, name)
        data = section.stream.getvalue()
        if len(_SECTION_BYTES) > 64:
            _SECTION_BYTES.clear()
        _SECTION_BYTES[key] = data
    return data


def _share_abbrevs(dwarf, offset: int, table: dict) -> None:
    """Hands the abbreviations this module parsed to pyelftools, which would parse
    them again, slowly (construct), for the few DIEs it reads. Best effort: with a
    pyelftools whose internals differ, it parses them itself."""
    try:
        from elftools.construct.lib.container import Container
        from elftools.dwarf.abbrevtable import AbbrevDecl, AbbrevTable
        from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_TAG

        cache = dwarf._abbrevtable_cache
        if offset in cache:
            return
        names = _ENUM_NAMES.get("tag")
        if names is None:
            names = _ENUM_NAMES["tag"] = {v: k for k, v in ENUM_DW_TAG.items()}
            _ENUM_NAMES["at"] = {v: k for k, v in ENUM_DW_AT.items()}
            _ENUM_NAMES["form"] = {v: k for k, v in ENUM_DW_FORM.items()}
        attrs, forms = _ENUM_NAMES["at"], _ENUM_NAMES["form"]
        decls = {}
        for code, (tag, children, specs, consts) in table.items():
            spec_list = []
            for (attr, form), const in zip(specs, consts):
                entry = Container(name=attrs.get(attr, attr), form=forms.get(form, form))
                if form == 0x21:
                    entry.value = const
                spec_list.append(entry)
            decl = Container(tag=names.get(tag, tag),
                             children_flag="DW_CHILDREN_yes" if children else "DW_CHILDREN_no",
                             attr_spec=spec_list)
            decls[code] = AbbrevDecl(code, decl)
        shared = object.__new__(AbbrevTable)
        shared.structs = dwarf.structs
        shared.stream = dwarf.debug_abbrev_sec.stream
        shared.offset = offset
        shared._abbrev_map = decls
        cache[offset] = shared
    except Exception:  # noqa: BLE001 - any mismatch: pyelftools parses on its own
        return


_ENUM_NAMES: dict[str, dict] = {}


def build_id(path: str) -> str | None:
    """The GNU build id of an ELF file, as hex; None when it has none."""
    return _read_build_id(path)
