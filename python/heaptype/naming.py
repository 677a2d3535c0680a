"""Names for a profile: the code names (functions, call sites, type tags) the
analysis core asks for while it reads the events, from the binaries on disk."""

from __future__ import annotations

import os

from . import _core
from .symbols import SymbolError, TypeResolver, parse_proc_maps


class NamingError(Exception):
    """The types of a profile cannot be named (e.g. a stripped binary without its map file)."""


def code_names(raw: "_core.ProfileFile", map_files: dict[str, str] | None = None):
    """The code names of the process that wrote ``raw`` (each address and type tag is
    looked up once, when the core first meets it), and the symbolizer behind them."""
    from .functions import Symbolizer

    mappings = parse_proc_maps(raw.modules)
    resolver = TypeResolver(mappings, map_files)
    symbolizer = Symbolizer(mappings)

    def type_name(tag: int) -> str | None:
        try:
            return resolver.resolve([tag]).get(tag)
        except SymbolError as e:
            raise NamingError(f"{raw.path}: cannot name the types: {e}") from None

    names = _core.PythonCodeNames(lambda a: symbolizer.functions([a])[a], lambda a: symbolizer.call_sites([a])[a],
                                  type_name)
    return names, symbolizer


def rebuilt_modules(raw: "_core.ProfileFile") -> list[str]:
    """Names are read from the binaries on disk: one modified after the profile
    started is probably a rebuild, whose symbols need not match the profiled code."""
    started = raw.start_unix_ns
    warnings = []
    for module in sorted({m.path for m in parse_proc_maps(raw.modules)}):
        try:
            modified = os.stat(module).st_mtime_ns
        except OSError:
            continue
        if started and modified > started:
            warnings.append(f"{module} changed after the profile was taken: if it was rebuilt, "
                            "the names of its types and functions may be wrong")
    return warnings
