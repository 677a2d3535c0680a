"""A profile, loaded: the Python face of the C++ analysis core.

    >>> import heaptype
    >>> p = heaptype.load("heaptype.app.1234.htp")
    >>> p.totals.peak_bytes
    >>> for t in p.by_type(): print(t.label, t.allocations, t.peak_bytes)
    >>> for f in p.by_function(): print(f.function, f.self.bytes, f.total.peak_bytes)
    >>> root = p.call_tree(); [c.name for c in root.children]
    >>> p.filter(types="std::vector<*>").by_function()

Every view is one streaming pass of the core (``heaptype._core.Analysis``) over the
file, with the profile's filters applied as it reads; views are computed when first
asked for and kept. Peaks are exact per group: the most bytes that group held live
at any one moment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

from . import _core
from .labels import type_label
from .naming import NamingError, code_names, rebuilt_modules
from .patterns import as_list


class ProfileError(Exception):
    """A profile cannot be read; the message names the file and the problem."""


SORT_KEYS = ("peak", "bytes", "allocations", "objects", "live", "temporary")
_SORT_ATTRIBUTES = {"peak": "peak_bytes", "bytes": "bytes", "allocations": "allocations", "objects": "objects",
                    "live": "live_bytes", "temporary": "temporary_allocations"}


def sort_attribute(sort: str) -> str:
    """The Figures attribute a sort key orders by."""
    try:
        return _SORT_ATTRIBUTES[sort]
    except KeyError:
        raise ValueError(f"unknown sort key {sort!r}: use one of {', '.join(SORT_KEYS)}") from None


@dataclass(frozen=True)
class Filters:
    """What a profile's views keep: allocations whose type matches one of ``types``
    (by name or label), with a frame matching one of ``functions`` on their call
    path, made by one of ``threads``. Empty means everything."""

    types: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    threads: tuple[int, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.types or self.functions or self.threads)

    def and_(self, types=None, functions=None, threads=None) -> "Filters":
        return Filters(self.types + tuple(as_list(types)), self.functions + tuple(as_list(functions)),
                       self.threads + tuple(int(t) for t in (threads or ())))


@dataclass(frozen=True)
class CallPathRow:
    """One call path (frame names, root first) and one type, with its figures."""

    path: tuple[str, ...]
    type: str | None
    inferred: bool
    figures: "_core.Figures"

    @property
    def type_label(self) -> str:
        return type_label(self.type, self.inferred)

    def __getattr__(self, name):  # allocations, bytes, peak_bytes ... of the figures
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.figures, name)

    def as_dict(self) -> dict:
        return {"path": list(self.path), "type": self.type, "inferred": self.inferred, **self.figures.as_dict()}


class Profile:
    """A profile file and the views of its allocations (see the module's docstring)."""

    def __init__(self, path: str, raw: "_core.ProfileFile", names: "_core.CodeNames", warnings: list[str],
                 filters: Filters = Filters(), cache: dict | None = None, symbolizer=None):
        self.path = path
        self._raw = raw
        self._names = names
        self.symbolizer = symbolizer  # names code addresses for every view of this file
        self._warnings = warnings
        self.filters = filters
        self._cache: dict = {} if cache is None else cache  # shared by filtered views of one file

    # --- what the file says of itself -------------------------------------------------

    @property
    def executable(self) -> str:
        return self._raw.executable

    @property
    def argv(self) -> list[str]:
        return list(self._raw.argv)

    @property
    def pid(self) -> int:
        return self._raw.pid

    @property
    def threads(self) -> list[dict]:
        return list(self._raw.threads)

    @property
    def modules(self) -> str:
        return self._raw.modules

    @property
    def raw(self) -> "_core.ProfileFile":
        return self._raw

    @property
    def complete(self) -> bool:
        """True when the process finished the profile (it was not cut short)."""
        return self._raw.end is not None and self._raw.dropped_bytes == 0

    @property
    def dropped_bytes(self) -> int:
        return self._raw.dropped_bytes

    @property
    def has_addresses(self) -> bool:
        return self._raw.has_addresses

    @property
    def runtime_summary(self) -> dict | None:
        """What the runtime reported at exit: its own counts and bookkeeping cost."""
        return self._raw.end

    @property
    def warnings(self) -> list[str]:
        """What went wrong reading or naming the profile, warnings of the views so far included."""
        seen = list(self._warnings)
        for analysis in self._cache.values():
            seen += [w for w in analysis.warnings if w not in seen]
        return seen

    def bookkeeping_bytes(self) -> int | None:
        """Memory the runtime used for itself: buffers, tables and the registry."""
        end = self._raw.end
        return end["buffer_bytes"] + end["registry_bytes"] if end else None

    def registry_bytes_per_live_block(self) -> float | None:
        """The registry's memory over the most blocks live at once."""
        end = self._raw.end
        peak = self.totals.peak_live_blocks
        return end["registry_bytes"] / peak if end and peak else None

    # --- views --------------------------------------------------------------------------

    def filter(self, types: str | Sequence[str] | None = None, functions: str | Sequence[str] | None = None,
               threads: Sequence[int] | None = None) -> "Profile":
        """This profile with more filters: every view of the result keeps only the
        allocations of a matching type (glob on the name or label), with a matching
        function anywhere on their call path, made by one of the threads."""
        return Profile(self.path, self._raw, self._names, self._warnings,
                       self.filters.and_(types, functions, threads), self._cache, self.symbolizer)

    def analysis(self, *, call_tree: bool = False, bottom_up: bool = False, functions: bool = False,
                 inlined: bool = False, infer: bool = True, types: str | Sequence[str] | None = None,
                 progress: bool = False) -> "_core.Analysis":
        """The core's pass over the file with these options, made once: a pass that
        computed more (a call tree, the bottom-up tree) serves requests for less."""
        f = self.filters.and_(types)
        tree = call_tree or functions
        for (has_tree, has_bottom_up, has_inlined, has_infer, has_filters), analysis in self._cache.items():
            if (has_inlined, has_infer, has_filters) == (inlined, infer, f) and (has_tree or not tree) \
                    and (has_bottom_up or not bottom_up):
                return analysis
        try:
            analysis = _core.Analysis(self._raw, self._names, call_tree=tree, bottom_up=bottom_up, functions=tree,
                                      inlined=inlined, infer=infer, types=list(f.types),
                                      functions_on_path=list(f.functions), threads=list(f.threads),
                                      progress=progress)
        except NamingError as e:
            raise ProfileError(str(e)) from None
        self._cache[(tree, bottom_up, inlined, infer, f)] = analysis
        return analysis

    def _any_analysis(self) -> "_core.Analysis":
        """A pass already made, for what every pass knows alike (totals, threads)."""
        return next(iter(self._cache.values())) if self._cache else self.analysis(infer=False)

    @property
    def totals(self) -> "_core.Totals":
        """Figures of the whole profile (filters do not apply)."""
        return self._any_analysis().totals

    @property
    def selected(self) -> "_core.Figures":
        """Figures of the allocations this profile's filters keep."""
        return self.analysis(infer=False).selected

    @property
    def has_call_paths(self) -> bool:
        """True when the runtime recorded calling contexts (any mode but none)."""
        return self._any_analysis().has_call_paths

    def by_type(self, sort: str = "peak", *, infer: bool = False,
                types: str | Sequence[str] | None = None) -> list["_core.TypeGroup"]:
        """One group per type, largest first. ``infer``: untyped allocations at a
        standard allocator or factory get the type its name says, marked inferred."""
        attribute = sort_attribute(sort)
        groups = [g for g in self.analysis(infer=infer, types=types).types if g.allocations or g.live_blocks]
        return sorted(groups, key=lambda g: (-getattr(g, attribute), g.label))

    def type_row(self, name: str | None) -> "_core.TypeGroup | None":
        """The group of one type by exact name (None: the untyped group)."""
        return next((g for g in self.by_type() if g.type == name), None)

    def by_thread(self, sort: str = "peak") -> list["_core.ThreadGroup"]:
        attribute = sort_attribute(sort)
        return sorted(self.analysis(infer=False).threads, key=lambda g: (-getattr(g, attribute), g.thread))

    def by_function(self, sort: str = "bytes", *, types: str | Sequence[str] | None = None, inlined: bool = True,
                    infer: bool = True) -> list["_core.FunctionGroup"]:
        """One group per function: ``self`` the allocations it called the allocator
        for, ``total`` those made while it was on the stack. ``inlined``: functions
        inlined at the call site (DWARF) count as frames of their own, as pprof counts."""
        attribute = sort_attribute(sort)
        groups = self.analysis(functions=True, inlined=inlined, infer=infer, types=types).functions
        return sorted(groups, key=lambda g: (-getattr(g.self, attribute), -getattr(g.total, attribute), g.function))

    def call_tree(self, *, types: str | Sequence[str] | None = None, bottom_up: bool = False,
                  inlined: bool = False, infer: bool = True) -> "_core.Node":
        """The root of the merged call tree: frames merged by name, types as leaves;
        ``bottom_up`` starts at the allocating functions and goes to their callers."""
        analysis = self.analysis(call_tree=True, bottom_up=bottom_up, inlined=inlined, infer=infer, types=types)
        return analysis.bottom_up_tree if bottom_up else analysis.tree

    def call_paths(self, *, types: str | Sequence[str] | None = None, sort: str = "bytes", inlined: bool = False,
                   infer: bool = True) -> list[CallPathRow]:
        """One row per call path and type, largest first."""
        attribute = sort_attribute(sort)
        analysis = self.analysis(call_tree=True, inlined=inlined, infer=infer, types=types)
        rows = [CallPathRow(tuple(frames), group.type, group.inferred, figures)
                for frames, group, figures in analysis.type_paths()]
        return sorted(rows, key=lambda r: (-getattr(r.figures, attribute), r.path, r.type_label))


def load(path: str | os.PathLike, map_files: dict[str, str] | None = None) -> Profile:
    """Open the profile at ``path``: its header and chunk index are read now, its
    events by the first view asked for.

    ``map_files`` maps module paths (or base names) to linker map files, for
    stripped binaries; the key "" stands for the profiled executable. A file cut
    short loads up to its last whole chunk, with a warning in ``Profile.warnings``.
    """
    path = os.fspath(path)
    try:
        raw = _core.ProfileFile(path)
    except ValueError as e:  # _core.ProfileError
        raise ProfileError(str(e)) from None
    warnings = list(raw.warnings)
    if raw.damage:
        warnings.append(f"{path}: {raw.damage}; loaded the {raw.file_size - raw.dropped_bytes} bytes "
                        f"before it ({raw.dropped_bytes} bytes dropped)")
    elif raw.end is None:
        warnings.append(f"{path}: the profile was not finished (the process did not exit normally, "
                        "or is still running): figures cover what was written")
    if map_files and "" in map_files:
        map_files = {k: v for k, v in map_files.items() if k} | {raw.executable: map_files[""]}
    warnings += rebuilt_modules(raw)
    names, symbolizer = code_names(raw, map_files)
    return Profile(path, raw, names, warnings, symbolizer=symbolizer)
