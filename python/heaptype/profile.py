"""Loading a profile: the Python API over the compiled core.

    >>> import heaptype
    >>> p = heaptype.load("heaptype.app.1234.htp")
    >>> p.totals.peak_bytes
    >>> for row in p.by_type(): print(row.type, row.allocations, row.peak_bytes)

Reading and aggregating the events happens in C++ (``heaptype._core``); this
module names the type tags (``symbols``) and shapes the results.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Iterable

from . import _core
from .symbols import SymbolError, TypeResolver, parse_proc_maps


class ProfileError(Exception):
    """A profile cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class TypeRow:
    """One heap type's figures. ``type`` is None for allocations with no type."""

    type: str | None
    allocations: int
    objects: int
    bytes: int
    peak_bytes: int
    live_bytes: int
    live_blocks: int
    inferred: bool = False  # the type was read from the allocator frames at the call site

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        """The type as reports show it: ``(untyped)``, ``T (inferred)`` or ``T``."""
        if self.type is None:
            return "(untyped)"
        return f"{self.type} (inferred)" if self.inferred else self.type


@dataclass(frozen=True)
class Totals:
    allocations: int
    frees: int
    bytes: int
    peak_bytes: int
    live_bytes: int
    live_blocks: int
    peak_time_us: int
    duration_us: int
    peak_live_blocks: int


SORT_KEYS = {
    "peak": lambda r: r.peak_bytes,
    "bytes": lambda r: r.bytes,
    "allocations": lambda r: r.allocations,
    "live": lambda r: r.live_bytes,
}


class Profile:
    """A loaded profile: totals, per-type rows, and what the file says of itself."""

    def __init__(self, path: str, raw: "_core.ProfileFile", rows: list[TypeRow], totals: Totals,
                 warnings: list[str], aggregate: dict | None = None, row_types: dict | None = None):
        self.path = path
        self._raw = raw
        self._rows = rows
        self.totals = totals
        self.warnings = warnings
        self._aggregate = aggregate or {}
        self._row_types: dict[int, str | None] = row_types or {}
        self._symbolizer = None
        self._call_paths: dict[tuple, object] = {}
        self._inferred_rows: list[TypeRow] | None = None

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
    def complete(self) -> bool:
        """True when the process finished the profile (it was not cut short)."""
        return self._raw.end is not None and self._raw.dropped_bytes == 0

    @property
    def dropped_bytes(self) -> int:
        return self._raw.dropped_bytes

    @property
    def runtime_summary(self) -> dict | None:
        """What the runtime reported at exit: its own counts and bookkeeping cost."""
        return self._raw.end

    def bookkeeping_bytes(self) -> int | None:
        """Memory the runtime used for itself: buffers, tables and the registry."""
        end = self._raw.end
        return end["buffer_bytes"] + end["registry_bytes"] if end else None

    def bookkeeping_bytes_per_live_block(self) -> float | None:
        """All of the runtime's memory over the most blocks live at once."""
        total = self.bookkeeping_bytes()
        if total is None or not self.totals.peak_live_blocks:
            return None
        return total / self.totals.peak_live_blocks

    def registry_bytes_per_live_block(self) -> float | None:
        """The registry's share: what tracking each live block costs, without the
        fixed per-thread buffers that dominate in small programs."""
        end = self._raw.end
        if not end or not self.totals.peak_live_blocks:
            return None
        return end["registry_bytes"] / self.totals.peak_live_blocks

    def by_type(self, sort: str = "peak", *, infer: bool = False,
                types: str | list[str] | None = None) -> list[TypeRow]:
        """Rows per type, largest first by ``sort`` (peak, bytes, allocations, live).

        ``infer=True`` splits the untyped row: allocations whose call site names a
        standard allocator or factory (``std::__new_allocator<T>::allocate``,
        ``std::make_unique<T>`` ...) form rows of their own, marked ``inferred``.
        ``types`` keeps only the types matching a glob (or any of several).
        """
        try:
            key = SORT_KEYS[sort]
        except KeyError:
            raise ValueError(f"unknown sort key {sort!r}: use one of {', '.join(SORT_KEYS)}") from None
        rows = self._rows_with_inferred() if infer else self._rows
        if types:
            from .callpaths import TypeKey, type_filter

            keep = type_filter(types)
            rows = [r for r in rows if keep(TypeKey(r.type, r.inferred))]
        return sorted(rows, key=lambda r: (-key(r), r.type or "", r.inferred))

    # --- calling contexts -------------------------------------------------------

    @property
    def has_call_paths(self) -> bool:
        """True when the runtime recorded calling contexts (any mode but none)."""
        return any(len(tree) > 1 for tree in self._aggregate.get("nodes", {}).values())

    def symbolizer(self):
        """The :class:`heaptype.functions.Symbolizer` of this profile's process."""
        if self._symbolizer is None:
            from .functions import Symbolizer

            self._symbolizer = Symbolizer(parse_proc_maps(self._raw.modules))
        return self._symbolizer

    def call_paths_view(self, *, inlined: bool = False, infer: bool = True):
        """The symbolised calling contexts (:class:`heaptype.callpaths.CallPaths`), built once."""
        key = (inlined, infer)
        if key not in self._call_paths:
            from .callpaths import CallPaths

            self._call_paths[key] = CallPaths(self._aggregate, self._row_types, self.symbolizer(),
                                              inlined=inlined, infer=infer)
        return self._call_paths[key]

    def call_paths(self, *, types: str | list[str] | None = None, sort: str = "bytes", inlined: bool = False,
                   infer: bool = True):
        """Rows per (call path, type): the path is a tuple of function names, root first."""
        return self.call_paths_view(inlined=inlined, infer=infer).rows(types, sort)

    def call_tree(self, *, types: str | list[str] | None = None, bottom_up: bool = False,
                  inlined: bool = False, infer: bool = True):
        """The threads' calling contexts merged into one tree of functions
        (:class:`heaptype.callpaths.CallTree`); ``bottom_up`` starts at the
        functions that allocate and goes to their callers."""
        return self.call_paths_view(inlined=inlined, infer=infer).tree(types, bottom_up)

    def by_function(self, *, types: str | list[str] | None = None, sort: str = "bytes", inlined: bool = True,
                    infer: bool = True):
        """Rows per function (:class:`heaptype.callpaths.FunctionRow`): ``self`` the
        allocations it made, ``total`` those made under it; largest ``self`` first.
        ``inlined``: a function inlined at the call site (``std::__new_allocator<T>::
        allocate``) counts as the function that allocated, as pprof counts it."""
        return self.call_paths_view(inlined=inlined, infer=infer).functions(types, sort)

    def _rows_with_inferred(self) -> list[TypeRow]:
        if self._inferred_rows is not None:
            return self._inferred_rows
        from .callpaths import Figures, inferred_types, iter_type_rows

        inferred = inferred_types(self._aggregate, self._row_types, self.symbolizer()) \
            if self._aggregate.get("contexts") else {}
        if not inferred:
            self._inferred_rows = list(self._rows)
            return self._inferred_rows
        moved: dict = {}
        untyped_objects = 0  # what the untyped row counted as objects for the moved blocks
        for key, figures, objects in iter_type_rows(self._aggregate, self._row_types, inferred):
            moved.setdefault(key.name, Figures()).add(figures)
            untyped_objects += objects
        rows = [r for r in self._rows if r.type is not None]
        untyped = self.type_row(None)
        if untyped is not None:
            # Whatever was not moved stays untyped. Peaks of the parts are bounded by
            # the untyped row's peak (the sum of per-context peaks can exceed it).
            moved_total = Figures()
            for figures in moved.values():
                moved_total.add(figures)
            rest = TypeRow(None, untyped.allocations - moved_total.allocations,
                           untyped.objects - untyped_objects, untyped.bytes - moved_total.bytes,
                           untyped.peak_bytes, untyped.live_bytes - moved_total.live_bytes,
                           max(0, untyped.live_blocks - moved_total.live_blocks))
            if rest.allocations or rest.live_blocks:
                rest_peak = self._untyped_rest_peak(inferred)
                rows.append(TypeRow(None, rest.allocations, rest.objects, rest.bytes,
                                    min(untyped.peak_bytes, rest_peak), rest.live_bytes, rest.live_blocks))
            cap = untyped.peak_bytes
        else:
            cap = None
        for name, f in moved.items():
            peak = f.peak_bytes if cap is None else min(f.peak_bytes, cap)
            rows.append(TypeRow(name, f.allocations, f.objects, f.bytes, peak, f.live_bytes, f.live_blocks,
                                inferred=True))
        self._inferred_rows = rows
        return rows

    def _untyped_rest_peak(self, inferred: dict[int, str]) -> int:
        peak = 0
        for entry in self._aggregate.get("context_rows", []):
            if self._row_types.get(entry[1]) is None and entry[0] not in inferred:
                peak += entry[6]
        return peak

    def type_row(self, name: str | None) -> TypeRow | None:
        """The row of one type by exact name (None: the untyped row)."""
        return next((r for r in self._rows if r.type == name), None)


def load(path: str | os.PathLike, map_files: dict[str, str] | None = None) -> Profile:
    """Read, aggregate and symbolise the profile at ``path``.

    ``map_files`` maps module paths (or base names) to linker map files, for
    stripped binaries; the key "" stands for the profiled executable. A file cut short loads up to its last whole chunk, with a
    warning in ``Profile.warnings``.
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
    result = raw.aggregate_by_type({})
    names = _name_types(raw, [r["type_tag"] for r in result["rows"] if r["type_tag"]], map_files, warnings)
    groups = _groups_for_shared_names(names)
    if groups:
        result = raw.aggregate_by_type(groups)
    warnings += result["warnings"]
    rows = _merge_rows(result["rows"], names)
    t = result["totals"]
    totals = Totals(t["allocations"], t["frees"], t["bytes"], t["peak_bytes"], t["live_bytes"],
                    t["live_blocks"], t["peak_time_us"], t["duration_us"], t["peak_live_blocks"])
    row_types = {i: (names.get(r["type_tag"]) if r["type_tag"] else None) for i, r in enumerate(result["rows"])}
    return Profile(path, raw, rows, totals, warnings, aggregate=result, row_types=row_types)


def _name_types(raw, tags: list[int], map_files, warnings: list[str]) -> dict[int, str]:
    if not tags:
        return {}
    mappings = parse_proc_maps(raw.modules)
    warnings.extend(_rebuilt_modules(raw, mappings))
    resolver = TypeResolver(mappings, map_files)
    try:
        return resolver.resolve(tags)
    except SymbolError as e:
        raise ProfileError(f"{raw.path}: cannot name the types: {e}") from None


def _rebuilt_modules(raw, mappings) -> list[str]:
    """Names are read from the binaries on disk: one modified after the profile
    started is probably a rebuild, whose symbols need not match the profiled code."""
    started = raw.start_unix_ns
    warnings = []
    for module in sorted({m.path for m in mappings}):
        try:
            modified = os.stat(module).st_mtime_ns
        except OSError:
            continue
        if started and modified > started:
            warnings.append(f"{module} changed after the profile was taken: if it was rebuilt, "
                            "the names of its types and functions may be wrong")
    return warnings


def _groups_for_shared_names(names: dict[int, str]) -> dict[int, int]:
    """Row numbers for tags, when two tags carry one name (e.g. a type's tag in an
    executable and in a shared library not unified at load time); {} otherwise."""
    by_name: dict[str, list[int]] = {}
    for tag, name in names.items():
        by_name.setdefault(name, []).append(tag)
    if all(len(tags) == 1 for tags in by_name.values()):
        return {}
    groups: dict[int, int] = {0: 0}
    for row, tags in enumerate(by_name.values(), start=1):
        for tag in tags:
            groups[tag] = row
    return groups


def _merge_rows(raw_rows: Iterable[dict], names: dict[int, str]) -> list[TypeRow]:
    rows = []
    for r in raw_rows:
        if not r["allocations"] and not r["live_blocks"]:
            continue
        rows.append(TypeRow(
            type=names.get(r["type_tag"]) if r["type_tag"] else None,
            allocations=r["allocations"], objects=r["objects"], bytes=r["bytes"],
            peak_bytes=r["peak_bytes"], live_bytes=r["live_bytes"], live_blocks=r["live_blocks"]))
    return rows
