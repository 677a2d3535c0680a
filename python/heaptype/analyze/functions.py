"""Code addresses to function names, source lines and inlined frames.

A profile records code addresses of the profiled process: the entry address of
each function the instrumentation hooks saw, and the return address of each
call (the call site of an allocation, or of a call in a walked stack).  This
module names them:

* the module (executable or shared library) that holds the address, from the
  process's module map, and the address inside its file (minus the load bias);
* the function, from the ELF symbol tables (``.symtab``, then ``.dynsym``),
  demangled: the same names ``nm -C`` and pprof show;
* the source line and the chain of functions inlined at that address (what
  ``addr2line -i`` shows), from DWARF, in the binary or in a separate debug file.

The work happens in the compiled core (``heaptype._core``, src/core/symbolize,
on elfutils' libdw): only the compilation units holding the addresses are
decoded, and results are cached on disk per binary (its GNU build id, else its
path, size and modification time) under ``$HEAPTYPE_CACHE_DIR`` (default
``$XDG_CACHE_HOME/heaptype``, ``~/.cache/heaptype``), so a second report of the
same build reads no DWARF at all.  ``HEAPTYPE_CACHE_DIR=off`` turns the cache off.

Return addresses are looked up one byte back (``address - 1``), inside the call
instruction: the instruction after a call can belong to the next line, or to the
next function when the call never returns.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from .. import _core
from .symbols import DEFAULT_CACHE, Mapping, SymbolError, core_cache_dir

__all__ = [
    "CodeLocation",
    "SourceFrame",
    "SymbolizeStats",
    "Symbolizer",
    "build_id",
    "cache_dir",
]


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
        """The function's name, or ``module+0xoffset`` / ``0xaddress`` when unknown. A
        function without a name (a stripped program's) is named by its start where its
        call frame information gives it (``function_address``): its frames are one function."""
        if self.function:
            return self.function
        if self.module is not None and self.module_offset is not None:
            offset = self.module_offset
            if self.function_address:
                offset = self.function_address - (self.address - self.module_offset)
            return f"{os.path.basename(self.module)}+{offset:#x}"
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
    dwarf_opened: int = 0         # binaries whose DWARF was opened (0 when the cache answered)
    symbol_tables_read: int = 0   # function symbol tables read (0 when the cache answered)


# --------------------------------------------------------------------------
# Cache location and build ids

def cache_dir() -> Path | None:
    """The symbol cache directory, or None when caching is off."""
    configured = _core.default_cache_dir()
    return None if configured is None else Path(configured)


def build_id(path: str) -> str | None:
    """The GNU build id of an ELF file in hex; None when it has none or cannot be read."""
    try:
        return _core.build_id(os.fspath(path)) or None
    except SymbolError:
        return None


# --------------------------------------------------------------------------
# The symbolizer

class Symbolizer:
    """Names code addresses of one profiled process.

    ``mappings`` is the process's module map (``/proc/self/maps`` text, or the
    list :func:`heaptype.analyze.symbols.parse_proc_maps` makes of it).  ``cache`` is the
    cache directory (None: no cache).  ``lines=False`` skips DWARF: names from
    the symbol tables only.
    """

    def __init__(self, mappings: list[Mapping] | str, *, cache=DEFAULT_CACHE, lines: bool = True):
        if not isinstance(mappings, str):
            mappings = list(mappings)
        self._core = _core.Symbolizer(mappings, "", cache_dir=core_cache_dir(cache), lines=lines)
        self._results: dict[tuple[int, bool], CodeLocation] = {}
        self._frames: dict[tuple, tuple[SourceFrame, ...]] = {}

    def functions(self, addresses: Iterable[int]) -> dict[int, CodeLocation]:
        """Entry addresses of functions (as the instrumentation hooks give them)."""
        return self._resolve(addresses, calls=False)

    def call_sites(self, addresses: Iterable[int]) -> dict[int, CodeLocation]:
        """Return addresses (looked up at ``address - 1``, inside the call)."""
        return self._resolve(addresses, calls=True)

    @property
    def stats(self) -> SymbolizeStats:
        s = self._core.stats
        return SymbolizeStats(s.addresses, s.from_cache, s.decoded, s.units, s.modules, s.seconds,
                              list(s.cache_files), s.dwarf_opened, s.symbol_tables_read)

    @property
    def warnings(self) -> list[str]:
        """Modules that could not be read (their addresses are named module+offset)
        or have no debug info."""
        return list(self._core.warnings)

    def _resolve(self, addresses: Iterable[int], calls: bool) -> dict[int, CodeLocation]:
        addresses = list(addresses)
        wanted = [a for a in dict.fromkeys(addresses) if (a, calls) not in self._results]
        if wanted:
            located = self._core.call_site_tuples(wanted) if calls else self._core.function_tuples(wanted)
            for address, location in zip(wanted, located):
                self._results[(address, calls)] = self._code_location(location)
            self._core.save_cache()
        return {a: self._results[(a, calls)] for a in addresses}

    def _code_location(self, location: tuple) -> CodeLocation:
        address, module, offset, function, function_address, frames = location
        return CodeLocation(address, module, offset, function, function_address, self._source_frames(frames))

    def _source_frames(self, frames: tuple) -> tuple[SourceFrame, ...]:
        # One object per distinct chain of frames: the call sites of one source
        # line share theirs, and inlined allocator frames repeat everywhere.
        known = self._frames.get(frames)
        if known is None:
            known = self._frames[frames] = tuple(SourceFrame(*frame) for frame in frames)
        return known
