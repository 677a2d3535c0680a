"""Names for a profile: the code names (functions, call sites, type tags) the
analysis core asks for while it reads the events, from the binaries on disk through
the core's symbolizer (ELF symbol tables, DWARF, linker map files; cached per build
id), each address and type tag looked up once."""

from __future__ import annotations

import os
import sys

from .. import _core


class NamingError(Exception):
    """The types of a profile cannot be named (e.g. a stripped binary without its map file)."""


def code_names(raw: "_core.ProfileFile", map_files: dict[str, str] | None = None, *,
               progress: bool | None = None):
    """The code names of the process that wrote ``raw``, and the symbolizer behind
    them. Progress of slow steps goes to stderr (default: when it is a terminal)."""
    show = sys.stderr.isatty() if progress is None else progress
    symbolizer = _core.Symbolizer(raw.modules, raw.executable, map_files=map_files or {}, progress=show)
    return _core.SymbolizerCodeNames(symbolizer), symbolizer


def rebuilt_modules(raw: "_core.ProfileFile") -> list[str]:
    """Names are read from the binaries on disk: one modified after the profile
    started is probably a rebuild, whose symbols need not match the profiled code."""
    started = raw.start_unix_ns
    warnings = []
    for module in sorted({m.path for m in _core.parse_module_map(raw.modules)}):
        try:
            modified = os.stat(module).st_mtime_ns
        except (OSError, ValueError):  # ValueError: a NUL in a damaged map's path; no such file
            continue
        if started and modified > started:
            warnings.append(f"{module} changed after the profile was taken: if it was rebuilt, "
                            "the names of its types and functions may be wrong")
    return warnings
