"""Figures per span of time, so that the page can show any time range the reader
brushes without carrying a single event.

The run is cut into ``count`` equal spans ("buckets"); one pass of the core gives
every bucket's figures (``Profile.spans``). A window's figures compose exactly over
adjacent buckets: allocations, objects, bytes and temporaries add up; a group's peak
over several buckets is the largest of their peaks (each bucket's peak counts what
was live as it opened); live figures are those at the last bucket's end. The page
snaps a brushed range to bucket edges and says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the flame module is imported when a page is made, not with every command's parser
    from .flame import KeptTree

DEFAULT_RANGES = 24
TYPE_FIGURES = ("allocations", "objects", "bytes", "peak_bytes", "live_bytes", "live_blocks",
                "temporary_allocations")
FUNCTION_FIGURES = ("allocations", "bytes", "peak_bytes", "live_bytes", "temporary_allocations")
NODE_FIGURES = ("allocations", "bytes", "peak_bytes", "temporary_allocations")


def default_ranges(profile) -> int:
    """How many buckets to cut the run into (one pass makes them all)."""
    return DEFAULT_RANGES


def bucket_ticks(duration_ticks: int, count: int) -> list[int]:
    """Edges, in clock ticks, of at most ``count`` equal buckets covering ticks 0 to
    ``duration_ticks`` (each bucket at least one tick wide); [] when the run is
    shorter than two ticks (nothing to brush)."""
    ticks = duration_ticks + 1
    count = min(count, ticks)
    if count < 2:
        return []
    return [k * ticks // count for k in range(count + 1)]


def _tick_us(profile) -> float:
    """The clock tick in microseconds, at least one: spans end on whole microseconds."""
    return max(1.0, (profile.raw.clock_tick_ns or 1000) / 1000.0)


def bucket_windows(profile, count: int) -> list[tuple[int, int]]:
    """(first tick, last tick), inclusive, of each bucket of the profile's run."""
    duration_ticks = int(profile.totals.duration_us / _tick_us(profile))
    edges = bucket_ticks(duration_ticks, count)
    return [(edges[k], edges[k + 1] - 1) for k in range(len(edges) - 1)]


def range_figures(profile, count: int, type_labels: list[str], function_names: list[str],
                  kept: KeptTree) -> dict | None:
    """Per bucket, the figures of the page's types (by label), functions (self and
    total), kept call-tree nodes and of everything selected; None when the run is
    too short to cut."""
    windows = bucket_windows(profile, count)
    if not windows:
        return None
    tick_us = _tick_us(profile)
    types = [{name: [] for name in TYPE_FIGURES} for _ in type_labels]
    functions = [{"self": {name: [] for name in FUNCTION_FIGURES}, "total": {name: [] for name in FUNCTION_FIGURES}}
                 for _ in function_names]
    nodes = [{name: [] for name in NODE_FIGURES} for _ in range(len(kept))]
    selected = {name: [] for name in TYPE_FIGURES}
    from .flame import match_nodes

    matched = match_nodes(kept, profile.analysis(call_tree=True, functions=True).tree)
    ids = [node.id if node is not None else 2**32 - 1 for node in matched]
    spans = profile.spans([int((last + 1) * tick_us) - 1 for _, last in windows], nodes=ids)
    type_ids = {g.id: g.label for g in spans.types}
    function_ids = {g.id: g.function for g in spans.functions}
    for bucket in spans.buckets():
        _append([selected], [None], {None: bucket["selected"]}, TYPE_FIGURES)
        _append(types, type_labels, {type_ids[i]: f for i, f in bucket["types"].items()}, TYPE_FIGURES)
        for part in ("self", "total"):
            figures = {function_ids[i]: f for i, f in bucket[f"function_{part}"].items()}
            _append([f[part] for f in functions], function_names, figures, FUNCTION_FIGURES)
        _append(nodes, range(len(kept)), dict(enumerate(bucket["nodes"])), NODE_FIGURES)
    return {
        "edges_s": [first * tick_us / 1e6 for first, _ in windows] + [(windows[-1][1] + 1) * tick_us / 1e6],
        "types": types,
        "functions": functions,
        "nodes": nodes,
        "selected": selected,
    }


def _append(columns: list[dict[str, list[int]]], keys, figures: dict, names) -> None:
    """One bucket's value of each figure, for each group (0 where the window has none)."""
    for column, key in zip(columns, keys):
        f = figures.get(key)
        for name in names:
            column[name].append(f[name] if f is not None else 0)
