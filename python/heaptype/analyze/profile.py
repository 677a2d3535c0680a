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
from dataclasses import dataclass, field
from typing import Sequence

from .. import _core
from .labels import type_label
from .naming import NamingError, code_names, rebuilt_modules
from .patterns import as_list


# How much of the call tree a cached pass holds (its key's first item: True, "leaves" or False).
_NO_TREE, _LEAVES, _TREE = 0, 1, 2
_TREE_KEYS = {_NO_TREE: False, _LEAVES: "leaves", _TREE: True}


def _tree_level(has_tree) -> int:
    return _TREE if has_tree is True else _LEAVES if has_tree == "leaves" else _NO_TREE


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
    path, made by one of ``threads``, of a block size within ``sizes`` (bytes, either
    end None for open), and what happened within ``time`` (microseconds): allocations
    made then, peaks reached then, live figures at its end. ``lifetime``
    (microseconds, either end None for open) keeps the blocks that lived that long
    from allocation to free; a block never freed lives forever (profiles recorded
    with addresses). ``stop_after_events`` stops the reading there (a snapshot, e.g.
    at the peak). Empty means everything."""

    types: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    threads: tuple[int, ...] = ()
    sizes: tuple[int | None, int | None] = (None, None)
    time: tuple[int | None, int | None] = (None, None)
    stop_after_events: int = 0
    lifetime: tuple[int | None, int | None] = (None, None)

    def __bool__(self) -> bool:
        return bool(self.types or self.functions or self.threads or self.sizes != (None, None)
                    or self.time != (None, None) or self.stop_after_events or self.lifetime != (None, None))

    def and_(self, types=None, functions=None, threads=None, sizes=None, time=None,
             stop_after_events: int = 0, lifetime=None) -> "Filters":
        def narrower(old, new):
            if new is None:
                return old
            low = max(x for x in (old[0], new[0]) if x is not None) if old[0] is not None or new[0] is not None \
                else None
            high = min(x for x in (old[1], new[1]) if x is not None) if old[1] is not None or new[1] is not None \
                else None
            return (low, high)

        return Filters(self.types + tuple(as_list(types)), self.functions + tuple(as_list(functions)),
                       self.threads + tuple(int(t) for t in (threads or ())), narrower(self.sizes, sizes),
                       narrower(self.time, time), stop_after_events or self.stop_after_events,
                       narrower(self.lifetime, lifetime))

    def core_options(self) -> dict:
        return dict(types=list(self.types), functions_on_path=list(self.functions), threads=list(self.threads),
                    min_size=self.sizes[0] or 0, max_size=self.sizes[1] if self.sizes[1] is not None else 2**64 - 1,
                    begin_us=self.time[0], end_us=self.time[1], stop_after_events=self.stop_after_events,
                    min_lifetime_us=self.lifetime[0], max_lifetime_us=self.lifetime[1])


def _microseconds(span: tuple[float | None, float | None] | None) -> tuple[int | None, int | None] | None:
    """A (low, high) span in seconds, in whole microseconds."""
    return None if span is None else tuple(None if t is None else int(round(t * 1e6)) for t in span)


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


TIMELINE_GROUPINGS = ("type", "thread", "function", "callpath")


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
    def mode(self) -> str:
        """How the runtime came into the process: "linked" (built with HeapType),
        "preloaded" (LD_PRELOAD into a plain program) or "attached" (heaptype attach)."""
        return self._raw.mode

    @property
    def snapshot_times_us(self) -> list[float]:
        """When the program was asked for a snapshot (HEAPTYPE_SIGNAL), in microseconds."""
        return [t * self._raw.clock_tick_ns / 1000 for t in self._raw.snapshots]

    @property
    def end_cause(self) -> str:
        """What ended the profile, and so when its "live at the end" blocks were live:
        "exit", "exec" (an exec replaced the process's image), "dump" (heaptype_dump()'s
        copy of a running process) or "cut-off": a profile without an end (the process
        was killed, crashed, or still runs), whose live blocks are those of its last
        records (of its last set of counts, aggregated)."""
        end = self._raw.end
        return end.get("cause", "exit") if end else "cut-off"

    @property
    def runtime_summary(self) -> dict | None:
        """What the runtime reported at exit: its own counts and bookkeeping cost."""
        return self._raw.end

    @property
    def warnings(self) -> list[str]:
        """What went wrong reading or naming the profile, warnings of the views so far included."""
        seen = list(self._warnings)
        if self.symbolizer is not None:
            seen += [w for w in self.symbolizer.warnings if w not in seen]
        for analysis in self._cache.values():
            seen += [w for w in analysis.warnings if w not in seen]
        return seen

    def bookkeeping_bytes(self) -> int | None:
        """The most memory the runtime's buffers and tables took (None: no end record)."""
        end = self._raw.end
        return end["buffer_bytes"] if end else None

    @property
    def file_bytes(self) -> int:
        """The profile's size on disk."""
        return self._raw.file_size

    @property
    def compressed(self) -> bool:
        """The profile is a zstd stream (the runtime's default; HEAPTYPE_COMPRESS=0: plain),
        or goes on as one after its first 256 KiB (an aggregated profile that grew large)."""
        return self._raw.compressed

    @property
    def aggregated(self) -> bool:
        """The profile holds counts per site, not events (HEAPTYPE_MODE=aggregate, ``heaptype run
        --aggregate``): totals, types, call paths, leaks and the peak are exact; a typed row's
        peak is its own, every other group's is what it had live at the heap's peak; views
        that replay events (timelines, time spans, lifetimes, addresses) are not available."""
        return self._raw.aggregated

    def require_events(self, what: str) -> None:
        """Raises ProfileError when this is an aggregated profile: ``what`` needs its events."""
        if self.aggregated:
            raise ProfileError(f"{self.path}: an aggregated profile (HEAPTYPE_MODE=aggregate) holds counts per "
                               f"call site, not events: {what} needs the events; record the program again without "
                               "--aggregate (HEAPTYPE_MODE=full)")

    def bookkeeping_uses(self) -> dict[str, int]:
        """bookkeeping_bytes() by what the memory was for ("call paths", "sites", "event
        buffers", ...), at the runtime's peak; empty for profiles written before it was kept."""
        end = self._raw.end
        return dict(end.get("buffer_uses", {})) if end else {}

    def registry_bytes_at_exit(self) -> int | None:
        """What the runtime kept beside the blocks live at exit: their headers (and
        its table of memory it did not allocate). None: no end record."""
        end = self._raw.end
        return end["registry_bytes"] if end else None

    # --- views --------------------------------------------------------------------------

    def filter(self, types: str | Sequence[str] | None = None, functions: str | Sequence[str] | None = None,
               threads: Sequence[int | str] | None = None, sizes: tuple[int | None, int | None] | None = None,
               time: tuple[float | None, float | None] | None = None,
               lifetime: tuple[float | None, float | None] | None = None) -> "Profile":
        """This profile with more filters (see Filters): every view of the result keeps
        only the allocations of a matching type (glob on the name or label), with a
        matching function anywhere on their call path, made by one of the threads
        (numbers, or names globbed), of a block size within ``sizes``, whose block
        lived within ``lifetime`` (seconds; never freed is forever; needs a profile
        recorded with addresses); ``time`` (in seconds) keeps what happened in that span."""
        if time is not None and time != (None, None):
            self.require_events("a time span")
        if lifetime is not None and lifetime != (None, None):
            self.require_events("the lifetime filter")
        if lifetime is not None and lifetime != (None, None) and not self.has_addresses:
            raise ProfileError(f"{self.path}: recorded without addresses, so lifetimes are unknown: run the "
                               "program with HEAPTYPE_ADDRESSES=1 to filter by lifetime")
        return self._with(self.filters.and_(types, functions, self._thread_numbers(threads), sizes,
                                            _microseconds(time), lifetime=_microseconds(lifetime)))

    def at(self, when: str | float) -> "Profile":
        """This profile as it stood at one moment: ``"peak"`` (the moment the kept
        allocations peaked) or a time in seconds. Live figures are what was live then."""
        if when == "peak":
            # Aggregated profiles: what was live at the heap's peak (the counts up to it are not kept).
            event = self.analysis().totals.peak_event
            return self._with(self.filters.and_(stop_after_events=max(event, 1)))
        self.require_events("a moment other than the peak")
        return self._with(self.filters.and_(time=(None, int(round(float(when) * 1e6)))))

    def _with(self, filters: Filters) -> "Profile":
        return Profile(self.path, self._raw, self._names, self._warnings, filters, self._cache, self.symbolizer)

    def _thread_numbers(self, threads) -> list[int] | None:
        if not threads:
            return None
        from .patterns import matches

        numbers = []
        for thread in threads:
            if isinstance(thread, int) or str(thread).isdigit():
                numbers.append(int(thread))
                continue
            named = [t["number"] for t in self.threads if matches(str(thread), t["name"])]
            if not named:
                raise ProfileError(f"{self.path}: no thread named {thread!r} "
                                   f"(threads: {', '.join(t['name'] or str(t['number']) for t in self.threads)})")
            numbers += named
        return numbers

    def analysis(self, *, call_tree: bool = False, bottom_up: bool = False, functions: bool = False,
                 inlined: bool = False, infer: bool = True, types: str | Sequence[str] | None = None,
                 progress: bool = False, path_leaves: bool = False) -> "_core.Analysis":
        """The core's pass over the file with these options, made once: a pass that
        computed more (a call tree, the bottom-up tree) serves requests for less.
        ``path_leaves``: only the call tree's leaves (one per call path and type) are
        needed, whose figures cost a step per event rather than one per frame."""
        f = self.filters.and_(types)
        wanted = _TREE if call_tree or functions else _LEAVES if path_leaves else _NO_TREE
        for (has_tree, has_bottom_up, has_inlined, has_infer, has_filters, timeline), analysis in self._cache.items():
            # A timeline's pass computed every figure too.
            plain = timeline is None or (isinstance(timeline, tuple) and timeline[0] == "timeline")
            if (has_inlined, has_infer, has_filters) == (inlined, infer, f) and plain and \
                    _tree_level(has_tree) >= wanted and (has_bottom_up or not bottom_up):
                return analysis
        analysis = self._run(f, tree=wanted == _TREE, path_leaves=wanted == _LEAVES, bottom_up=bottom_up,
                             inlined=inlined, infer=infer, progress=progress)
        self._cache[(_TREE_KEYS[wanted], bottom_up, inlined, infer, f, None)] = analysis
        return analysis

    def require_start(self, what: str) -> None:
        """Raises ProfileError when this view starts later than the program (``time``):
        ``what`` replays the program from its start."""
        if self.filters.time[0] is not None:
            raise ProfileError(f"{self.path}: {what} replays the program from its start: "
                               "a time span that starts later cannot be written to it")

    def heaptrack(self, write, *, inlined: bool = True) -> "_core.Analysis":
        """One pass that writes heaptrack's data file, calling ``write`` with each piece
        of text (bytes) in order (src/core/exports/heaptrack.hpp); returns the pass."""
        self.require_start("heaptrack's format")
        self.require_events("heaptrack's format")
        command = " ".join(self.argv) or self.executable or ""
        return self._run(self.filters, tree=True, inlined=inlined, infer=True, heaptrack_write=write,
                         heaptrack_command=command)

    def _run(self, f: Filters, **options) -> "_core.Analysis":
        tree = options.pop("tree")
        try:
            return _core.Analysis(self._raw, self._names, call_tree=tree, functions=tree, **options,
                                  **f.core_options())
        except (NamingError, _core.SymbolError) as e:
            raise ProfileError(f"{self.path}: cannot name the types: {e}") from None

    def memory_view(self, *, infer: bool = True, gap: int = 1 << 20) -> dict:
        """The blocks live when this profile's view ends (at exit, or at the moment of
        ``at()``) by address: ``regions`` of the address space (blocks closer than
        ``gap`` bytes share one), each with ``runs`` of adjacent blocks of one type.
        Needs a profile recorded with addresses (HEAPTYPE_ADDRESSES=1)."""
        self.require_events("the memory view (the blocks' addresses)")
        if not self.has_addresses:
            raise ProfileError(f"{self.path}: recorded without addresses: run the program with "
                               "HEAPTYPE_ADDRESSES=1 for a memory view")
        analysis = self._address_analysis(infer)
        regions: list[dict] = []
        for address, size, group in analysis.live_blocks():
            if not regions or address - regions[-1]["end"] > gap:
                regions.append({"start": address, "end": address + size, "bytes": 0, "blocks": 0, "runs": []})
            region = regions[-1]
            runs = region["runs"]
            if runs and runs[-1]["type"] == group.label and address - runs[-1]["end"] <= 32:
                runs[-1]["end"] = address + size
                runs[-1]["blocks"] += 1
                runs[-1]["bytes"] += size
            else:
                runs.append({"start": address, "end": address + size, "type": group.label, "blocks": 1,
                             "bytes": size})
            region["end"] = max(region["end"], address + size)
            region["bytes"] += size
            region["blocks"] += 1
        return {"time_s": self._view_time_us(analysis) / 1e6, "regions": regions,
                "mappings": [{"start": m.start, "end": m.end, "path": m.path} for m in _core.parse_module_map(self.modules)]}

    def _address_analysis(self, infer: bool) -> "_core.Analysis":
        key = (False, False, False, infer, self.filters, "addresses")
        analysis = self._cache.get(key)
        if analysis is None:
            analysis = self._cache[key] = self._run(self.filters, tree=False, bottom_up=False, inlined=False,
                                                    infer=infer, addresses=True)
        return analysis

    def spans(self, ends_us: Sequence[int], *, nodes: Sequence[int] = (), infer: bool = True,
              inlined: bool = False) -> "_core.Analysis":
        """One pass that cuts the run into spans ending at ``ends_us`` (inclusive,
        ascending): its ``buckets()`` give, per span, every type's and function's
        figures (counts made in the span, the span's peak, live at its end) and those
        of the call-tree nodes ``nodes`` (ids of ``analysis(call_tree=True)``'s tree with
        the same infer and inlined). Its other figures have per-span peaks: use it for
        its buckets only."""
        key = (True, False, inlined, infer, self.filters, ("spans", tuple(ends_us), tuple(nodes)))
        analysis = self._cache.get(key)
        if analysis is None:
            analysis = self._cache[key] = self._run(self.filters, tree=True, bottom_up=False, inlined=inlined,
                                                    infer=infer, bucket_ends_us=list(ends_us),
                                                    bucket_nodes=list(nodes))
        return analysis

    def lifetimes(self, *, infer: bool = True) -> dict[str, dict[str, int]] | None:
        """Per type label, how many blocks lived how long (under 1 us ... at least 1 s,
        never freed); None for a profile recorded without addresses (each free must
        say which block it frees). Times are as fine as the clock (HEAPTYPE_CLOCK_US)."""
        if not self.has_addresses:
            return None
        return {g.label: g.lifetime_histogram for g in self._address_analysis(infer).types if g.allocations}

    def _view_time_us(self, analysis: "_core.Analysis") -> int:
        """When this view's live figures stand: its time filter's end, the peak, or the end."""
        if self.filters.time[1] is not None:
            return self.filters.time[1]
        if self.filters.stop_after_events:
            return analysis.selected.peak_time_us
        return analysis.totals.duration_us

    def timeline(self, by: str = "type", top: int = 10, *, points: int = 2000, infer: bool = True,
                 inlined: bool = False) -> "Timeline":
        """Live bytes over time, stacked: the ``top`` groups (by peak) of a grouping
        (type, thread, function: what each allocated itself, callpath: path and type),
        then "other". At most ``points`` points; each keeps the moment its total was
        highest, so the stacked maximum is the exact peak."""
        return self.timelines((by,), top, points=points, infer=infer, inlined=inlined)[by]

    def timelines(self, groupings: Sequence[str] = TIMELINE_GROUPINGS, top: int = 10, *, points: int = 2000,
                  infer: bool = True, inlined: bool = False) -> dict[str, "Timeline"]:
        """``timeline()`` of several groupings, by grouping, from one pass over the
        events: each grouping's series follow the same decoded events. A pass made for
        more groupings serves fewer; one with function or callpath has the call tree,
        and serves ``analysis(call_tree=True)`` too."""
        self.require_events("a timeline")
        unknown = [by for by in groupings if by not in TIMELINE_GROUPINGS]
        if unknown:
            raise ValueError(f"unknown timeline grouping {unknown[0]!r}: use one of {', '.join(TIMELINE_GROUPINGS)}")
        analysis = self._timeline_analysis(tuple(dict.fromkeys(groupings)), points, infer, inlined)
        return {by: _timeline_of(analysis, by, top) for by in groupings}

    def _timeline_analysis(self, groupings: tuple[str, ...], points: int, infer: bool,
                           inlined: bool) -> "_core.Analysis":
        """A pass following at least these groupings (one pass follows every group of
        each; the top ones are picked after it): one made already, else a new one."""
        for key, analysis in self._cache.items():
            followed = key[5]
            if key[2:5] == (inlined, infer, self.filters) and isinstance(followed, tuple) and \
                    followed[0] == "timeline" and followed[2] == points and set(groupings) <= set(followed[1]):
                return analysis
        tree = any(by in ("function", "callpath") for by in groupings)
        analysis = self._run(self.filters, tree=tree, bottom_up=False, inlined=inlined, infer=infer,
                             timeline=list(groupings), timeline_points=points)
        self._cache[(tree, False, inlined, infer, self.filters, ("timeline", groupings, points))] = analysis
        return analysis

    def _any_analysis(self) -> "_core.Analysis":
        """A pass over the whole file already made, for what every such pass knows
        alike (totals); else a new one."""
        for key, analysis in self._cache.items():
            filters = key[4]
            spans = isinstance(key[5], tuple) and key[5][:1] == ("spans",)
            if filters.time == (None, None) and not filters.stop_after_events and not spans:
                return analysis
        return self._with(Filters()).analysis()  # the views' default pass: they reuse it

    @property
    def totals(self) -> "_core.Totals":
        """Figures of the whole profile (filters do not apply)."""
        return self._any_analysis().totals

    @property
    def selected(self) -> "_core.Figures":
        """Figures of the allocations this profile's filters keep."""
        return self.analysis().selected

    @property
    def findings(self) -> list[dict]:
        """Releases the program got wrong, as the runtime recorded them (the whole
        profile; filters do not apply), grouped by kind, types and the release's call
        path, most frequent first. Each a dict: ``kind`` ("mismatched_delete": deleted
        as a static type whose size disagrees with the block's, seen only in the
        type-aware capture mode; "mismatched_free": free(), delete or delete[] of a
        block another family allocated), ``allocated``, ``allocated_bytes``,
        ``deleted`` and ``deleted_bytes`` or ``allocated_with`` and ``released_with``,
        ``count``, ``stack`` (the release's call path, root first) and
        ``allocation_stack``."""
        return self._any_analysis().findings

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

    def untyped_callers(self, *, infer: bool = False) -> list[tuple[str, "_core.Figures"]]:
        """The blocks of no type (the "(untyped)" row) by the function that called the
        allocator, most bytes first; peaks are not summed over functions (0)."""
        return self.analysis(infer=infer).untyped_callers()

    def type_row(self, name: str | None) -> "_core.TypeGroup | None":
        """The group of one type by exact name (None: the untyped group)."""
        return next((g for g in self.by_type() if g.type == name), None)

    def by_thread(self, sort: str = "peak") -> list["_core.ThreadGroup"]:
        attribute = sort_attribute(sort)
        return sorted(self.analysis().threads, key=lambda g: (-getattr(g, attribute), g.thread))

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
                   infer: bool = True, live_only: bool = False) -> list[CallPathRow]:
        """One row per call path and type, largest first (``live_only``: only those with
        blocks live at the end, the leaks)."""
        attribute = sort_attribute(sort)
        analysis = self.analysis(path_leaves=True, inlined=inlined, infer=infer, types=types)
        rows = _call_path_rows(analysis.type_paths(live_only))
        return sorted(rows, key=lambda r: (-getattr(r.figures, attribute), r.path, r.type_label))

    def live_call_paths(self, *, infer: bool = True) -> list[CallPathRow]:
        """One row per call path and type that holds blocks live at the end (the leaks),
        of which only ``live_blocks`` and ``live_bytes`` are sure to be set. Made from a
        pass without the call tree (the one the report makes) unless one with it was
        made already: only the paths that hold live blocks are named then, where the
        tree names and counts every path of the run."""
        has_paths = any(_tree_level(key[0]) >= _LEAVES and key[2:5] == (False, infer, self.filters)
                        for key in self._cache)
        if has_paths or self.filters.lifetime != (None, None):
            return self.call_paths(infer=infer, sort="live", live_only=True)
        rows = _call_path_rows(self.analysis(infer=infer).live_type_paths())
        return sorted(rows, key=lambda r: (-r.figures.live_bytes, r.path, r.type_label))


def _call_path_rows(leaves) -> list[CallPathRow]:
    """Rows of the core's (frames, TypeGroup, Figures) leaves."""
    return [CallPathRow(tuple(frames), group.type, group.inferred, figures) for frames, group, figures in leaves]


@dataclass
class TimelineSeries:
    """A group's bytes at each point: at the moment the total was highest in the point's
    span, so that the series stack up to the total. ``peak_bytes`` is the group's own
    peak, which a block shorter than a span reaches between those moments (a forked
    worker's stdio buffer: its series is 0 throughout, its peak 4 KiB)."""

    name: str
    bytes: list[int]
    peak_bytes: int = 0


@dataclass
class Timeline:
    """Live bytes over time: ``times_s`` (each point's moment), one series per group
    (and "other"), the ``totals`` they stack up to, and the exact peak. Beside the
    heap, ``stack_bytes``: how deep the threads' stacks went together at each point
    (the deepest within its span; all 0 when the runtime recorded no stack depths)."""

    by: str
    times_s: list[float]
    series: list[TimelineSeries]
    totals: list[int]
    peak_bytes: int
    peak_time_s: float
    stack_bytes: list[int] = field(default_factory=list)
    stack_peak_bytes: int = 0

    def as_dict(self) -> dict:
        return {"by": self.by, "times_s": self.times_s, "series": [{"name": s.name, "bytes": s.bytes,
                                                                   "peak_bytes": s.peak_bytes}
                                                                  for s in self.series],
                "totals": self.totals, "peak_bytes": self.peak_bytes, "peak_time_s": self.peak_time_s,
                "stack_bytes": self.stack_bytes, "stack_peak_bytes": self.stack_peak_bytes}


def _timeline_of(analysis: "_core.Analysis", by: str, top: int) -> Timeline:
    """The timeline of grouping ``by`` of a pass that followed it: its ``top`` groups by
    peak, then "other"."""
    groups = _timeline_groups(analysis, by)
    groups.sort(key=lambda g: (-g[2], g[1]))
    chosen = groups[:top]
    raw = analysis.timeline([g[0] for g in chosen], by)
    series = [TimelineSeries(name, values, max(peak, max(values, default=0)))
              for (_, name, peak), values in zip(chosen, raw["series"])]
    if len(groups) > len(chosen) or any(raw["other"]):
        series.append(TimelineSeries("other", raw["other"], max(raw["other"], default=0)))
    return Timeline(by, [t / 1e6 for t in raw["times_us"]], series, raw["totals"],
                    analysis.selected.peak_bytes, analysis.selected.peak_time_us / 1e6, raw["stack"],
                    analysis.totals.stack_peak_bytes)


def _timeline_groups(analysis: "_core.Analysis", by: str) -> list[tuple[int, str, int]]:
    """(id, name, peak) of every group of a grouping in one analysis."""
    if by == "type":
        return [(g.id, g.label, g.peak_bytes) for g in analysis.types if g.allocations]
    if by == "thread":
        return [(g.id, str(g.thread), g.peak_bytes) for g in analysis.threads if g.allocations]
    if by == "function":
        return [(g.id, g.function, g.self.peak_bytes) for g in analysis.functions if g.self.allocations]
    return [(node_id, " > ".join(frames) + f" [{group.label}]", figures.peak_bytes)
            for node_id, (frames, group, figures) in zip(analysis.type_path_ids(), analysis.type_paths())
            if figures.allocations]


def load(path: str | os.PathLike, map_files: dict[str, str] | None = None, *, naming=code_names) -> Profile:
    """Open the profile at ``path``: its header and chunk index are read now, its
    events by the first view asked for.

    ``map_files`` maps module paths (or base names) to linker map files, for
    stripped binaries; the key "" stands for the profiled executable. A file cut
    short loads up to its last whole chunk, with a warning in ``Profile.warnings``.
    ``naming(raw, map_files) -> (code names, symbolizer)`` names its addresses (a
    ``heaptype.budget.session.SessionNames`` reuses per-binary tables across profiles).
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
    names, symbolizer = naming(raw, map_files)
    return Profile(path, raw, names, warnings, symbolizer=symbolizer)
