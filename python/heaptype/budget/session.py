"""Per-binary work done once per process: the names of a test binary's code and types.

A test suite runs one binary many times (a GoogleTest program per test case), and
every profile is named from the same files. ``heaptype.load`` makes a new symbolizer
for each profile, which reads the binary's symbol table (and, for call paths, its
DWARF or the on-disk cache) again. A ``SessionNames`` keeps the first symbolizer of
each set of files (their identity: path, size, mtime, inode; and the map files) and
names every later profile of those files with a symbolizer made from it
(``Symbolizer.for_modules``): the files' tables are shared in memory, and only the
load addresses, which differ from run to run (ASLR), are worked out again.

The names are the core symbolizer's, the very ones ``heaptype.load`` gives.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import _core


def _file_identity(path: str) -> tuple:
    """What tells a rebuilt file from the one read before."""
    try:
        st = os.stat(path)
    except OSError:
        return (path,)
    return (path, st.st_size, st.st_mtime_ns, st.st_ino)


class SessionNames:
    """Names for every profile loaded in one process (a pytest worker): pass its
    ``code_names`` to ``heaptype.load(path, naming=...)``, or call ``load``."""

    def __init__(self):
        self._first: dict[tuple, "_core.Symbolizer"] = {}  # per set of files: the symbolizer that read them
        self.binaries_read = 0  # sets of files read: one per binary (and its libraries), however many profiles

    def code_names(self, raw: "_core.ProfileFile", map_files: dict[str, str] | None = None):
        """The naming hook of ``heaptype.load``: code names and the symbolizer."""
        mappings = _core.parse_module_map(raw.modules)
        files = tuple(_file_identity(path) for path in sorted({m.path for m in mappings}))
        key = (raw.executable, tuple(sorted((map_files or {}).items())), files)
        first = self._first.get(key)
        if first is None:
            self.binaries_read += 1
            # silent: a test's check must not print progress into the test run's output
            symbolizer = self._first[key] = _core.Symbolizer(mappings, raw.executable, map_files=map_files or {},
                                                              progress=False)
        else:
            symbolizer = first.for_modules(mappings)
        return _core.SymbolizerCodeNames(symbolizer), symbolizer

    def load(self, path: str | Path):
        """``heaptype.load(path)`` with this session's per-binary tables."""
        from ..analyze.profile import load

        return load(path, naming=self.code_names)
