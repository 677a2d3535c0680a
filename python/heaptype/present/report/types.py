"""The report by type: one row per C++ type."""

from __future__ import annotations

from ...analyze.labels import INFERRED_NOTE
from ...analyze.profile import Profile
from ..tables import render_table
from ..units import format_bytes, format_count, format_percent
from .findings import findings_json, render_findings_lines
from .header import header_lines, live_column, peak_cell, report_json_head

TYPE_COLUMN_WIDTH = 70
UNTYPED_SHARE = 0.25   # of all bytes: then the text report names who allocated the untyped blocks
UNTYPED_CALLERS = 20   # rows of the JSON report's untyped_callers


def _groups(profile: Profile, sort: str, infer: bool, live: bool) -> list:
    groups = profile.by_type(sort, infer=infer)
    return [g for g in groups if g.live_blocks] if live else groups


def types_json(profile: Profile, sort: str = "peak", top: int | None = None, *, infer: bool = True,
               live: bool = False) -> dict:
    groups = _groups(profile, sort, infer, live)
    lifetimes = profile.lifetimes(infer=infer) or {}
    out = report_json_head(profile, "type")
    out["rows"] = [{"type": g.type, "inferred": g.inferred, "label": g.label, **g.figures.as_dict(),
                    **({"peak_at_heap_peak": g.peak_at_heap_peak} if profile.aggregated else {}),
                    "sizes": [{"up_to": size, "allocations": n} for size, n in g.size_histogram],
                    "lifetimes": lifetimes.get(g.label)}
                   for g in (groups[:top] if top else groups)]
    out["untyped_callers"] = [{"function": function, **figures.as_dict()}
                              for function, figures in profile.untyped_callers(infer=infer)[:UNTYPED_CALLERS]]
    out.update(findings_json(profile))
    out["warnings"] = profile.warnings
    return out


def untyped_callers_lines(profile: Profile, groups: list, *, infer: bool) -> list[str]:
    """When blocks of no type make a large share of the bytes (a program built without
    HeapType), the functions that allocated them: where to look next."""
    untyped = next((g for g in groups if g.type is None and not g.inferred), None)
    everything = sum(g.bytes for g in groups)
    if untyped is None or not everything or untyped.bytes < UNTYPED_SHARE * everything:
        return []
    callers = profile.untyped_callers(infer=infer)
    shown = ", ".join(f"{function} {format_percent(figures.bytes, untyped.bytes)}"
                      for function, figures in callers[:3])
    more = f" and {len(callers) - 3} more" if len(callers) > 3 else ""
    return ["", f"(untyped) {format_percent(untyped.bytes, everything)} of the bytes, by the function that "
                f"called the allocator: {shown}{more} (--by function shows their callers)"]


def render_types_text(profile: Profile, sort: str = "peak", top: int | None = None, *, infer: bool = True,
                      live: bool = False) -> str:
    groups = _groups(profile, sort, infer, live)
    shown = groups[:top] if top else groups
    lines = header_lines(profile) + [""]
    # temporary: freed as the program's next allocation event (heaptrack's definition)
    header = ("type", "allocations", "temporary", "objects", "bytes", "peak", live_column(profile))
    body = [(g.label, format_count(g.allocations), format_count(g.temporary_allocations), format_count(g.objects),
             format_bytes(g.bytes), peak_cell(profile, g), format_bytes(g.live_bytes)) for g in shown]
    lines += render_table(header, body, numeric=range(1, 7), widths={0: TYPE_COLUMN_WIDTH})
    if len(groups) > len(shown):
        lines.append(f"... {len(groups) - len(shown)} more types (--top to show more)")
    if any(g.inferred for g in shown):
        lines += ["", INFERRED_NOTE]
    lines += untyped_callers_lines(profile, groups, infer=infer)
    lines += render_findings_lines(profile)
    return "\n".join(lines)
