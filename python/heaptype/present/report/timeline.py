"""The timeline: live bytes over time, stacked by group, as JSON or as a small
terminal graph (one row of bars per group, all on the scale of the peak)."""

from __future__ import annotations

from typing import Sequence

from ...analyze.profile import Profile, Timeline
from ..units import format_bytes
from .header import header_lines, report_json_head

BARS = " ▁▂▃▄▅▆▇█"
WIDTH = 64


def timeline_json(profile: Profile, by: str = "type", top: int = 10, *, infer: bool = True) -> dict:
    return timelines_json(profile, (by,), top, infer=infer)[by]


def timelines_json(profile: Profile, groupings: Sequence[str], top: int = 10, *, infer: bool = True) -> dict:
    """``timeline_json`` of several groupings, by grouping, from one pass."""
    timelines = profile.timelines(groupings, top, infer=infer)  # first: its pass serves the head's totals too
    out = {}
    for by, timeline in timelines.items():
        out[by] = report_json_head(profile, f"timeline by {by}")
        out[by].update(timeline.as_dict())
        out[by]["warnings"] = profile.warnings
    return out


def _columns(timeline: Timeline, values: list[int], width: int) -> list[int]:
    """The highest value of each of `width` equal spans of time."""
    if not timeline.times_s:
        return [0] * width
    start, end = timeline.times_s[0], timeline.times_s[-1]
    span = (end - start) or 1.0
    columns = [0] * width
    for t, v in zip(timeline.times_s, values):
        k = min(width - 1, int((t - start) / span * width))
        columns[k] = max(columns[k], v)
    return columns


def sparkline(values: list[int], scale: int) -> str:
    if scale <= 0:
        return " " * len(values)
    return "".join(BARS[min(len(BARS) - 1, (v * (len(BARS) - 1) + scale - 1) // scale)] if v > 0 else " "
                   for v in values)


def render_timeline_text(profile: Profile, by: str = "type", top: int = 10, *, infer: bool = True) -> str:
    timeline = profile.timeline(by, top, infer=infer)
    lines = header_lines(profile) + [""]
    if not timeline.times_s:
        return "\n".join(lines + ["(no allocations)"])
    start, end = timeline.times_s[0], timeline.times_s[-1]
    lines.append(f"Live bytes over time by {by}, {start:.3f} s to {end:.3f} s, each row on the scale of the peak "
                 f"({format_bytes(timeline.peak_bytes)} at {timeline.peak_time_s:.3f} s):")
    scale = timeline.peak_bytes
    name_width = min(48, max(len(s.name) for s in timeline.series + [type("S", (), {"name": "total"})]))
    rows = [("total", timeline.totals, timeline.peak_bytes)] + [(s.name, s.bytes, s.peak_bytes)
                                                                 for s in timeline.series]
    for name, values, peak in rows:
        label = name if len(name) <= name_width else name[: name_width - 3] + "..."
        lines.append(f"  {label:<{name_width}} |{sparkline(_columns(timeline, values, WIDTH), scale)}| "
                     f"peak {format_bytes(peak)}")
    if timeline.stack_peak_bytes:
        lines += ["", f"Stack depth of all threads, on its own scale (deepest {format_bytes(timeline.stack_peak_bytes)}):",
                  f"  {'stack':<{name_width}} |"
                  f"{sparkline(_columns(timeline, timeline.stack_bytes, WIDTH), timeline.stack_peak_bytes)}|"]
    return "\n".join(lines)
