"""Per-binary work done once per process: the type names of a test binary.

A test suite runs one binary many times (a GoogleTest program per test case), and
every profile names its type tags from the same binary. ``heaptype.load`` reads the
binary's symbol table for each profile; a ``SessionNames`` reads it once per binary
(file identity: path, size, mtime, inode) and names the tags of every later profile
of that binary from memory. Only the address at which the binary was loaded differs
between runs (ASLR), so the cache is keyed by link-time address.

Function names already have a cache per binary in the symbolizer (in memory and on
disk per build id); a tag the cache cannot name (a stripped binary named by its map
file, a shared library without its own tags) goes to the profile's own TypeResolver,
so the names are always those ``heaptype.load`` would give.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path

from .. import _core
from ..symbols import Mapping, SymbolError, TypeResolver, elf_type_tags, load_bias, parse_proc_maps

try:  # pyelftools' error, raised by the ELF readers
    from elftools.common.exceptions import ELFError
except ImportError:  # pragma: no cover - pyelftools is a dependency
    ELFError = ValueError


class _BinaryTags:
    """One binary's type tags at link-time addresses, read when first needed."""

    def __init__(self, path: str):
        self.path = path
        self._tags: dict[int, str] | None = None
        # the lowest mapping's start minus the load bias, per file offset of that
        # mapping: the same in every run of the binary, so one ELF read gives the bias
        self.bias_offsets: dict[int, int | None] = {}

    def bias(self, mappings: list[Mapping]) -> int | None:
        """The binary's load bias in one run (runtime address - link-time address)."""
        lowest = min(mappings, key=lambda m: m.start)
        if lowest.offset not in self.bias_offsets:
            try:
                self.bias_offsets[lowest.offset] = lowest.start - load_bias(self.path, mappings)
            except (OSError, ELFError, SymbolError, ValueError):
                self.bias_offsets[lowest.offset] = None
        offset = self.bias_offsets[lowest.offset]
        return None if offset is None else lowest.start - offset

    def tags(self) -> dict[int, str]:
        if self._tags is None:
            try:
                self._tags = elf_type_tags(self.path)
            except (OSError, ELFError, SymbolError, ValueError):
                self._tags = {}  # not ELF, unreadable: the profile's own resolver decides
        return self._tags


class _ProfileTypeNames:
    """``tag -> name`` for one profile: the session's per-binary tables first."""

    def __init__(self, session: "SessionNames", mappings: list[Mapping], map_files: dict[str, str] | None,
                 profile_path: str = ""):
        by_path: dict[str, list[Mapping]] = {}
        for mapping in mappings:
            by_path.setdefault(mapping.path, []).append(mapping)
        self._modules = sorted(by_path.items(), key=lambda item: min(m.start for m in item[1]))
        self._lows = [min(m.start for m in ms) for _, ms in self._modules]
        self._tables: list[tuple[int, dict[int, str]] | None | bool] = [False] * len(self._modules)
        self._session = session
        self._fallback: TypeResolver | None = None
        self._mappings = mappings
        self._map_files = map_files
        self._profile_path = profile_path

    def __call__(self, tag: int) -> str | None:  # called once per type tag of a profile: kept lean
        index = bisect.bisect_right(self._lows, tag) - 1
        if index >= 0:
            table = self._tables[index]
            if table is False:
                table = self._tables[index] = self._table(*self._modules[index])
            if table is not None:
                name = table[1].get(tag - table[0])
                if name is not None:
                    return name
        try:
            return self._resolver().resolve([tag]).get(tag)
        except SymbolError as e:
            from ..naming import NamingError

            raise NamingError(f"{self._profile_path}: cannot name the types: {e}") from None

    def _table(self, path: str, mappings: list[Mapping]) -> tuple[int, dict[int, str]] | None:
        """(load bias in this run, the binary's tags at link-time addresses)."""
        binary = self._session.binary(path)
        bias = binary.bias(mappings)
        return None if bias is None else (bias, binary.tags())

    def _resolver(self) -> TypeResolver:
        if self._fallback is None:
            self._session.fallbacks += 1
            self._fallback = TypeResolver(self._mappings, self._map_files)
        return self._fallback


class SessionNames:
    """Names for every profile loaded in one process (a pytest worker): pass its
    ``code_names`` to ``heaptype.load(path, naming=...)``, or call ``load``."""

    def __init__(self):
        self._binaries: dict[tuple, _BinaryTags] = {}
        self.binaries_read = 0   # symbol tables read: one per binary, however many profiles
        self.fallbacks = 0       # profiles that needed a resolver of their own

    def binary(self, path: str) -> _BinaryTags:
        try:
            st = os.stat(path)
            key = (path, st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            key = (path,)
        tags = self._binaries.get(key)
        if tags is None:
            self.binaries_read += 1
            tags = self._binaries[key] = _BinaryTags(path)
        return tags

    def code_names(self, raw: "_core.ProfileFile", map_files: dict[str, str] | None = None):
        """The naming hook of ``heaptype.load``: code names and the symbolizer."""
        from ..functions import Symbolizer

        mappings = parse_proc_maps(raw.modules)
        symbolizer = Symbolizer(mappings)  # its tables are cached per binary already
        names = _core.PythonCodeNames(lambda a: symbolizer.functions([a])[a],
                                      lambda a: symbolizer.call_sites([a])[a],
                                      _ProfileTypeNames(self, mappings, map_files, raw.path))
        return names, symbolizer

    def load(self, path: str | Path):
        """``heaptype.load(path)`` with this session's per-binary tables."""
        from ..profile import load

        return load(path, naming=self.code_names)
