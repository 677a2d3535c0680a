"""Turn runtime type-tag addresses back into C++ type names.

A profile records, for each heap type T, the runtime address of the one-byte
static ``heaptype::type_id<T>::tag`` together with the process's module map
(``/proc/self/maps``).  This module names those addresses again:

* find the module (executable or shared library) whose image holds the address;
* read that module's tags at link-time addresses, from its ELF symbol table
  (``.symtab``, else ``.dynsym``) or, for a stripped binary, from the linker map
  file written by ``-Wl,-Map=FILE`` (GNU ld.bfd, gold or lld);
* shift them by the module's load bias and look the address up.

The work happens in the compiled core (``heaptype._core``, src/core/symbolize),
which also caches each binary's tag table on disk per build id (see
:func:`heaptype.analyze.functions.cache_dir`); this module is its Python face.
"""

from __future__ import annotations

import os
import subprocess
from typing import Iterable

from .. import _core

__all__ = [
    "DEFAULT_CACHE",
    "Mapping",
    "SymbolError",
    "TypeResolver",
    "collapse_closing_brackets",
    "demangle_many",
    "elf_type_tags",
    "load_bias",
    "map_file_type_tags",
    "parse_proc_maps",
    "split_template_arguments",
    "type_name_from_symbol",
]

# Every tag symbol, and nothing else we care about, starts with this.
MANGLED_TAG_PREFIX = "_ZN8heaptype7type_idI"

# One line of /proc/self/maps that is backed by a file: Mapping(start, end, offset, perms, path).
Mapping = _core.Mapping

# A module that owns tag addresses offers no way to name them (the message names it).
SymbolError = _core.SymbolError

# The ``cache`` argument meaning "the cache directory the environment selects".
DEFAULT_CACHE = _core.DEFAULT_CACHE_DIR


def core_cache_dir(cache) -> str | None:
    """The core's cache_dir for a ``cache`` argument: DEFAULT_CACHE, a path, or None (off)."""
    return None if cache is None else os.fspath(cache)


def parse_proc_maps(text: str) -> list[Mapping]:
    """Parse /proc/self/maps text, keeping only mappings of files.

    Only files can carry symbols: anonymous memory, ``[heap]``, ``[stack]``,
    ``[vdso]`` and the like are dropped, and so are lines that are not maps lines.
    """
    return _core.parse_module_map(text)


def load_bias(binary_path: str, mappings: list[Mapping]) -> int:
    """Return runtime address - link-time address for one module, from its PT_LOAD
    segments and its lines of /proc/self/maps (independent of the page size)."""
    return _core.load_bias(os.fspath(binary_path), list(mappings))


# --------------------------------------------------------------------------
# Names

def demangle_many(names: list[str]) -> list[str]:
    """Demangle a batch of C++ symbols, in order.

    Uses the native ``heaptype._core.demangle_many``; without it (a source tree
    whose extension is not built), one ``c++filt`` process for the whole batch.
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
    renders as ``T [L]``, the form the reports use for labelled allocations;
    ``heaptype::elements_of<E, Owner>`` as ``E[] of Owner`` (``char[] of std::string``).
    """
    return _core.type_name_from_symbol(demangled)


def split_template_arguments(args: str) -> list[str] | None:
    """Split template arguments on top-level commas; None if brackets do not pair.
    Brackets inside parentheses (the demangler's ``(1>2)``) do not count."""
    return _core.split_template_arguments(args)


def collapse_closing_brackets(name: str) -> str:
    """``a<b<c> >`` -> ``a<b<c>>``."""
    return _core.collapse_closing_brackets(name)



def elf_type_tags(binary_path: str) -> dict[int, str]:
    """Map link-time tag address -> type name, from ``.symtab`` then ``.dynsym``.

    GCC's tags are STB_GNU_UNIQUE and so often exported: a stripped binary can
    still name them from ``.dynsym``.  Returns {} when neither table has tags;
    raises SymbolError when the file cannot be read or is not ELF.
    """
    return _core.elf_type_tags(os.fspath(binary_path))


def map_file_type_tags(map_path: str) -> dict[int, str]:
    """Map link-time tag address -> type name, from a GNU ld.bfd, gold or lld map.

    Names may be demangled (the default) or mangled (``--no-demangle``); bfd's
    "Discarded input sections" are skipped.
    """
    return _core.map_file_type_tags(os.fspath(map_path))


# --------------------------------------------------------------------------
# Resolver

class TypeResolver:
    """Names runtime tag addresses of one profiled process.

    ``mappings`` is the process's module map (see :func:`parse_proc_maps`).
    ``map_files`` maps a module path (or its base name) to the linker map file
    to use when that module is stripped; ``<module>.map`` next to the module is
    tried as well.  Each module's tags are read at most once per resolver, and
    cached on disk per build (``cache``: a directory, None for none).
    """

    def __init__(self, mappings: list[Mapping], map_files: dict[str, str] | None = None, *,
                 cache=DEFAULT_CACHE):
        self._core = _core.Symbolizer(list(mappings), "", cache_dir=core_cache_dir(cache),
                                      map_files=dict(map_files or {}), lines=False)

    def resolve(self, addresses: Iterable[int]) -> dict[int, str]:
        """Return {address: type name}; unnamed addresses get ``<unknown type 0x...>``.

        Raises SymbolError when a module owning some of the addresses has
        neither a symbol table with tags nor a linker map file.
        """
        wanted = list(set(addresses))
        names = self._core.type_names(wanted)
        self._core.save_cache()
        return {address: names.get(address) or f"<unknown type {address:#x}>" for address in wanted}

    @property
    def stats(self) -> _core.SymbolizeStats:
        """How many tag tables came from the binaries and how many from the cache."""
        return self._core.stats
