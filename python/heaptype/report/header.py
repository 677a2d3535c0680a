"""What every text report starts with: the profile, the program, its totals."""

from __future__ import annotations

from ..profile import Profile
from ..units import format_bytes, format_count, format_seconds


def header_lines(profile: Profile) -> list[str]:
    t = profile.totals
    lines = [
        f"HeapType profile {profile.path}",
        f"  program    {' '.join(profile.argv) or profile.executable} (pid {profile.pid})",
        f"  allocated  {format_count(t.allocations)} blocks, {format_bytes(t.bytes)} in all",
        f"  peak       {format_bytes(t.peak_bytes)} live at {format_seconds(t.peak_time_us)}",
        f"  at exit    {format_bytes(t.live_bytes)} still live in {format_count(t.live_blocks)} blocks",
    ]
    per_block = profile.registry_bytes_per_live_block()
    if per_block is not None:
        end = profile.runtime_summary
        lines.append(f"  overhead   {format_bytes(profile.bookkeeping_bytes())} of HeapType bookkeeping: "
                     f"{format_bytes(end['buffer_bytes'])} of buffers, and a registry of {per_block:.0f} B "
                     f"per block live at peak ({format_count(t.peak_live_blocks)} blocks)")
    lines += filter_lines(profile)
    return lines


def filter_lines(profile: Profile) -> list[str]:
    f = profile.filters
    lines = []
    if f.types:
        lines.append(f"  types      matching {describe(f.types)}")
    if f.functions:
        lines.append(f"  functions  with {describe(f.functions)} on the call path")
    if f.threads:
        lines.append(f"  threads    {', '.join(str(t) for t in f.threads)}")
    if f:
        s = profile.selected
        lines.append(f"  selected   {format_count(s.allocations)} blocks, {format_bytes(s.bytes)} in all, "
                     f"peak {format_bytes(s.peak_bytes)}")
    return lines


def describe(patterns) -> str:
    return " or ".join(repr(p) for p in patterns)


def report_json_head(profile: Profile, by: str) -> dict:
    """The fields every JSON report starts with."""
    f = profile.filters
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "complete": profile.complete,
        "by": by,
        "filters": {"types": list(f.types), "functions": list(f.functions), "threads": list(f.threads)},
        "totals": profile.totals.as_dict(),
    }
