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

    def as_dict(self) -> dict:
        return asdict(self)


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
                 warnings: list[str]):
        self.path = path
        self._raw = raw
        self._rows = rows
        self.totals = totals
        self.warnings = warnings

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
        total = self.bookkeeping_bytes()
        if total is None or not self.totals.peak_live_blocks:
            return None
        return total / self.totals.peak_live_blocks

    def by_type(self, sort: str = "peak") -> list[TypeRow]:
        """Rows per type, largest first by ``sort`` (peak, bytes, allocations, live)."""
        try:
            key = SORT_KEYS[sort]
        except KeyError:
            raise ValueError(f"unknown sort key {sort!r}: use one of {', '.join(SORT_KEYS)}") from None
        return sorted(self._rows, key=lambda r: (-key(r), r.type or ""))

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
    return Profile(path, raw, rows, totals, warnings)


def _name_types(raw, tags: list[int], map_files, warnings: list[str]) -> dict[int, str]:
    if not tags:
        return {}
    resolver = TypeResolver(parse_proc_maps(raw.modules), map_files)
    try:
        return resolver.resolve(tags)
    except SymbolError as e:
        raise ProfileError(f"{raw.path}: cannot name the types: {e}") from None


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
