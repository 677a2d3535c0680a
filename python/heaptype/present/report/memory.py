"""The memory view (the paper's Fig. 4): the blocks live at one moment, by address,
in regions of the address space, runs of adjacent blocks coloured by type."""

from __future__ import annotations

from ...analyze.profile import Profile
from ..tables import render_table
from ..units import format_bytes, format_count
from .header import header_lines, report_json_head


def memory_json(profile: Profile, *, infer: bool = True) -> dict:
    out = report_json_head(profile, "memory")
    out.update(profile.memory_view(infer=infer))
    out["warnings"] = profile.warnings
    return out


def render_memory_text(profile: Profile, *, infer: bool = True) -> str:
    view = profile.memory_view(infer=infer)
    lines = header_lines(profile) + ["", f"Live blocks by address at {view['time_s']:.3f} s:"]
    for region in view["regions"]:
        lines.append("")
        lines.append(f"  region {region['start']:#x}-{region['end']:#x}: {format_bytes(region['bytes'])} in "
                     f"{format_count(region['blocks'])} blocks")
        shares: dict[str, list[int]] = {}
        for run in region["runs"]:
            entry = shares.setdefault(run["type"], [0, 0])
            entry[0] += run["blocks"]
            entry[1] += run["bytes"]
        body = [(format_count(b), format_bytes(n), t) for t, (b, n) in sorted(shares.items(), key=lambda kv: -kv[1][1])]
        lines += ["    " + line for line in render_table(("blocks", "bytes", "type"), body, numeric=(0, 1))]
    if not view["regions"]:
        lines.append("(nothing live)")
    return "\n".join(lines)
