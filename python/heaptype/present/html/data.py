"""What the page of one profile shows, assembled from the report views (report/):
the JSON the CLI prints for types, functions, the timelines (stacked by type,
function, call path and thread, as `heaptype timeline --by`), leaks and findings, plus the
kept call tree (flame.py), the figures per time bucket (ranges.py) and the memory
view (memory.py). Nothing here computes a figure: the core does; this only picks
and shapes.

One pass with the call tree serves the types, the functions, the tree, the leaks and
every timeline grouping (the core follows the groupings side by side on the same
events); the time buckets take one more (``ranges``).
"""

from __future__ import annotations

from ...analyze.profile import TIMELINE_GROUPINGS
from ..report import functions_json, leaks_json, timelines_json, types_json
from ..report.findings import findings_json
from ..report.header import header_lines
from .flame import flame_json, keep_nodes
from .memory import memory_json
from .ranges import default_ranges, range_figures

TOP_SERIES = 10       # groups stacked in a timeline, the rest is "other" (as `heaptype timeline`)
MAX_TYPES = 2000      # table rows a page carries; the rest is counted
MAX_FUNCTIONS = 2000
MAX_LEAKS = 500
MEMORY_SNAPSHOTS = 8  # memory views besides the one at the peak


def head_json(profile) -> dict:
    """The page's heading: the text report's header lines, and what the page needs to know."""
    return {
        "lines": header_lines(profile),
        "program": " ".join(profile.argv) or profile.executable,
        "has_call_paths": profile.has_call_paths,
        "has_addresses": profile.has_addresses,
        "warnings": profile.warnings,
    }


def _capped(rows: list, limit: int) -> tuple[list, int]:
    return rows[:limit], max(0, len(rows) - limit)


def _memory_moments(ranges: dict | None) -> list:
    """The peak, then the ends of a few evenly spread buckets."""
    times: list = ["peak"]
    if ranges:
        ends = ranges["edges_s"][1:]
        step = max(1, len(ends) // MEMORY_SNAPSHOTS)
        times += ends[step - 1::step]
    return times


AGGREGATED_TIMELINE_NOTE = ("an aggregated profile (heaptype run --aggregate) keeps counts per call site, not "
                            "events: no timeline; record without --aggregate to see one")


def report_data(profile, *, ranges: int | None = None, top: int = TOP_SERIES) -> dict:
    """Everything the page of ``profile`` shows, as JSON-ready data. ``ranges``: time
    buckets a brushed range snaps to (None: by the file's size; 0: none)."""
    if profile.aggregated:  # counts, no events: no timelines, no time ranges
        ranges = 0
        timelines = {"type": {"times_s": [], "series": [], "peak_bytes": profile.totals.peak_bytes,
                              "note": AGGREGATED_TIMELINE_NOTE}}
    else:
        if ranges is None:
            ranges = default_ranges(profile)
        # First: this one pass (with the call tree, for the function and callpath groupings)
        # serves every view below but the ranges. By type first: the page draws it first,
        # and the types' colours follow its series.
        timelines = timelines_json(profile, TIMELINE_GROUPINGS, top)
    types = types_json(profile)
    types["rows"], types["rows_cut"] = _capped(types["rows"], MAX_TYPES)
    functions = functions_json(profile, inlined=False)
    functions["functions"], functions["rows_cut"] = _capped(functions["functions"], MAX_FUNCTIONS)
    leaks = leaks_json(profile, top=MAX_LEAKS)
    kept = keep_nodes(profile.call_tree())
    buckets = range_figures(profile, ranges, [r["label"] for r in types["rows"]],
                            [f["function"] for f in functions["functions"]], kept) if ranges else None
    return {
        "kind": "report",
        "head": head_json(profile),
        "selected": profile.selected.as_dict(),
        "types": types,
        "functions": functions,
        "leaks": leaks,
        "timelines": timelines,
        "findings": findings_json(profile),
        "flame": flame_json(kept),
        "ranges": buckets,
        "ranges_requested": ranges,
        "memory": memory_json(profile, _memory_moments(buckets)),
    }
