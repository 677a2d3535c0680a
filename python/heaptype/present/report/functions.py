"""The report by function: what each function allocated itself (self) and what was
allocated while it was on the stack (total), with exact peaks for both."""

from __future__ import annotations

from ...analyze.labels import INFERRED_NOTE
from ...analyze.profile import Profile, sort_attribute
from ..tables import render_table
from ..units import format_bytes, format_count, format_percent
from .header import header_lines, peak_cell, report_json_head

NO_CONTEXT_NOTE = ("no calling contexts in this profile (run with HEAPTYPE_CALLSTACK=none, or built with "
                   "--callstack none): paths start at the function that called the allocator")


def _groups(profile: Profile, sort: str, inlined: bool, infer: bool, live: bool) -> list:
    groups = profile.by_function(sort, inlined=inlined, infer=infer)
    return [g for g in groups if g.total.live_blocks] if live else groups


def functions_json(profile: Profile, sort: str = "bytes", top: int | None = None, *, inlined: bool = True,
                   infer: bool = True, live: bool = False) -> dict:
    groups = _groups(profile, sort, inlined, infer, live)
    types = self_type_figures(profile, inlined=inlined, infer=infer)
    out = report_json_head(profile, "function")
    out["functions"] = [{"function": g.function, "self": g.self.as_dict(), "total": g.total.as_dict(),
                         "types": types.get(g.function, [])}
                        for g in (groups[:top] if top else groups)]
    out["warnings"] = profile.warnings
    return out


def self_type_figures(profile: Profile, *, inlined: bool, infer: bool) -> dict[str, list[dict]]:
    """For each function, the types it allocated itself: counts and bytes summed over
    its call paths (peaks are per path: see --by callpath)."""
    fields = ("allocations", "objects", "bytes", "live_bytes", "live_blocks", "temporary_allocations")
    by_function: dict[str, dict[tuple, dict]] = {}
    for row in profile.call_paths(inlined=inlined, infer=infer):
        if not row.path:
            continue
        entry = by_function.setdefault(row.path[-1], {}).setdefault(
            (row.type, row.inferred), {"type": row.type, "inferred": row.inferred, **dict.fromkeys(fields, 0)})
        for name in fields:
            entry[name] += getattr(row.figures, name)
    return {f: sorted(t.values(), key=lambda e: -e["bytes"]) for f, t in by_function.items()}


def self_types(profile: Profile, *, inlined: bool, infer: bool, sort: str) -> dict[str, list[str]]:
    """The types each function allocated itself, largest first (from the call tree's leaves)."""
    attribute = sort_attribute(sort)
    by_function: dict[str, dict[str, int]] = {}
    for row in profile.call_paths(inlined=inlined, infer=infer):
        if row.path:
            amounts = by_function.setdefault(row.path[-1], {})
            amounts[row.type_label] = amounts.get(row.type_label, 0) + getattr(row.figures, attribute)
    return {f: [t for t, _ in sorted(a.items(), key=lambda kv: -kv[1])] for f, a in by_function.items()}


def render_functions_text(profile: Profile, sort: str = "bytes", top: int | None = None, *, inlined: bool = True,
                          infer: bool = True, live: bool = False) -> str:
    groups = _groups(profile, sort, inlined, infer, live)
    shown = groups[:top] if top else groups
    types = self_types(profile, inlined=inlined, infer=infer, sort=sort)
    everything = profile.selected.bytes
    lines = header_lines(profile) + ["", f"Functions, by {sort} allocated in the function itself (self) "
                                         "and under it (total):"]
    body = []
    for g in shown:
        names = types.get(g.function, [])
        note = ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")
        body.append((format_count(g.self.allocations), format_bytes(g.self.bytes),
                     format_percent(g.self.bytes, everything), peak_cell(profile, g.self),
                     format_count(g.total.allocations), format_bytes(g.total.bytes),
                     format_percent(g.total.bytes, everything), peak_cell(profile, g.total), note, g.function))
    header = ("self allocs", "self bytes", "self%", "self peak", "total allocs", "total bytes", "total%",
              "total peak", "self types", "function")
    lines += render_table(header, body, numeric=range(0, 8), widths={8: 40})
    if len(groups) > len(shown):
        lines.append(f"... {len(groups) - len(shown)} more functions (--top to show more)")
    if any("(inferred)" in t for g in shown for t in types.get(g.function, [])):
        lines += ["", INFERRED_NOTE]
    if not groups:
        lines.append("(no allocations)")
    if not profile.has_call_paths:
        lines += ["", NO_CONTEXT_NOTE]
    return "\n".join(lines)
