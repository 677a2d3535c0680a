"""The report by thread: one row per thread that allocated."""

from __future__ import annotations

from ...analyze.profile import Profile
from ..tables import render_table
from ..units import format_bytes, format_count
from .header import header_lines, live_column, peak_cell, report_json_head


def _names(profile: Profile) -> dict[int, str]:
    return {t["number"]: t["name"] for t in profile.threads}


def _groups(profile: Profile, sort: str, live: bool) -> list:
    groups = profile.by_thread(sort)
    return [g for g in groups if g.live_blocks] if live else groups


def threads_json(profile: Profile, sort: str = "peak", top: int | None = None, *, live: bool = False) -> dict:
    names = _names(profile)
    groups = _groups(profile, sort, live)
    out = report_json_head(profile, "thread")
    out["threads"] = [{"thread": g.thread, "name": names.get(g.thread, ""), **g.figures.as_dict()}
                      for g in (groups[:top] if top else groups)]
    out["warnings"] = profile.warnings
    return out


def render_threads_text(profile: Profile, sort: str = "peak", top: int | None = None, *, live: bool = False) -> str:
    names = _names(profile)
    groups = _groups(profile, sort, live)
    shown = groups[:top] if top else groups
    lines = header_lines(profile) + [""]
    header = ("thread", "allocations", "bytes", "peak", live_column(profile), "name")
    body = [(str(g.thread), format_count(g.allocations), format_bytes(g.bytes), peak_cell(profile, g),
             format_bytes(g.live_bytes), names.get(g.thread, "")) for g in shown]
    lines += render_table(header, body, numeric=range(0, 5))
    return "\n".join(lines)
