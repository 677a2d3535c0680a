"""Chrome's trace-event format (the JSON object form), read by Perfetto and
chrome://tracing: the live bytes of the largest types over time as one counter
track (a counter event per timeline point, one argument per type, which both tools
draw stacked), the total as a second track, and the peak as an instant event.

Only aggregated figures go in: the points of ``Profile.timeline`` (at most 2,000,
each at the moment its span's total was highest, so the peak is exact).
"""

from __future__ import annotations

import json

from .units import format_bytes

TOP_TYPES = 10
TRACK = "live bytes by type"
TOTAL_TRACK = "live bytes"


def _event(name: str, phase: str, ts_us: float, pid: int, **fields) -> dict:
    return {"name": name, "ph": phase, "ts": ts_us, "pid": pid, "tid": 0, **fields}


def chrome_trace(profile, *, top: int = TOP_TYPES) -> dict:
    """The trace as a dict (``json.dumps`` it); ts in microseconds."""
    timeline = profile.timeline("type", top)
    pid = profile.pid or 1
    program = " ".join(profile.argv) or profile.executable or profile.path
    events = [
        _event("process_name", "M", 0, pid, args={"name": f"{program} (heaptype)"}),
        _event("thread_name", "M", 0, pid, args={"name": "heap"}),
    ]
    for i, seconds in enumerate(timeline.times_s):
        ts = round(seconds * 1e6, 3)
        events.append(_event(TRACK, "C", ts, pid, args={s.name: s.bytes[i] for s in timeline.series}))
        events.append(_event(TOTAL_TRACK, "C", ts, pid, args={"total": timeline.totals[i]}))
    if timeline.times_s:
        events.append(_event(f"peak {format_bytes(timeline.peak_bytes)}", "i", round(timeline.peak_time_s * 1e6, 3),
                             pid, s="p", args={"bytes": timeline.peak_bytes}))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"profile": profile.path, "program": program, "peak_bytes": timeline.peak_bytes,
                          "peak_time_s": timeline.peak_time_s}}


def chrome_trace_text(profile, *, top: int = TOP_TYPES) -> str:
    return json.dumps(chrome_trace(profile, top=top), separators=(",", ":"))
