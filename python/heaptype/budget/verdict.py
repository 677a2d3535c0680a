"""Verdicts as text: failure messages with the top call paths of a type, and the
rows of the tables that show figures beside their limits."""

from __future__ import annotations

import shlex
from typing import Any, Callable, Iterable, Mapping

from ..labels import TOTAL
from ..tables import shorten
from .baseline import Change
from .evaluate import Evaluation, sort_labels
from .model import Limit
from .values import FIELDS, format_value

CallPaths = Callable[[str, str], "list[str] | None"]
CALL_PATH_SORT = {"peak": ("peak", "peak_bytes"), "bytes": ("bytes", "bytes"),
                  "allocations": ("allocations", "allocations"), "leaked": ("live", "live_bytes")}


def profile_call_paths(profile, top: int = 3) -> CallPaths:
    """``(type label, field) -> lines``: the top call paths of a type in a loaded profile,
    sorted by the figure that is over; None when the profile has no calling contexts."""

    def paths(label: str, field_name: str) -> list[str] | None:
        if not getattr(profile, "has_call_paths", False):
            return None
        sort, attribute = CALL_PATH_SORT[field_name]
        try:
            rows = profile.call_paths(types=[label], sort=sort, infer=False)
        except Exception as e:  # noqa: BLE001 - call paths only explain a verdict: never hide it
            return [f"(the call paths could not be read: {type(e).__name__}: {e})"]
        rows = [r for r in rows if r.type_label == label][:top]
        return [f"{format_value(field_name, getattr(r, attribute))} {field_name}: {format_path(r.path)}"
                for r in rows]

    return paths


def format_path(frames: Iterable[str], last: int = 6, width: int = 100) -> str:
    """`main > run > make<Small>`, root first, the allocating frames kept when long."""
    frames = [shorten(frame, width) for frame in frames] or ["(no frames)"]
    return " > ".join((["..."] if len(frames) > last else []) + frames[-last:])


def failure_text(evaluation: Evaluation, *, call_paths: CallPaths | None = None, top_paths: int = 3,
                 regressions: Iterable["Change"] = (), baseline: str | None = None) -> str:
    """The text of a failed budget: test, type, limit, measured value, by how much it is
    over, where the limit was set, the top call paths of that type, and the profile kept
    for inspection. ``call_paths(type)`` gives call paths when the profile has them."""
    lines = []
    if evaluation.violations:
        lines.append(f"heap budget exceeded: {evaluation.test}")
        for label in sort_labels({v.type for v in evaluation.violations}):
            over = [v for v in evaluation.violations if v.type == label]
            for v in over:
                lines.append(f"  {v.headline()}")
                lines.append(f"      limit set at {v.limit.origin}")
            lines += _call_path_lines(label, over[0].field, call_paths, top_paths)
    regressions = list(regressions)
    if regressions:
        lines.append(f"heap regression against the baseline {baseline}: {evaluation.test}")
        lines += [f"  {change.text()}" for change in regressions]
    if not evaluation.complete:
        lines.append("  note: the profile was cut short (the program did not finish): figures cover what "
                     "was written before that; `leaked` limits are not checked")
    if evaluation.profile_path:
        lines.append(f"  profile kept: {evaluation.profile_path}")
        lines.append(f"      heaptype report {shlex.quote(str(evaluation.profile_path))}")
    return "\n".join(lines)


def _call_path_lines(label: str, field_name: str, call_paths: CallPaths | None, top: int) -> list[str]:
    if label == TOTAL:
        return []
    paths = call_paths(label, field_name) if call_paths else None
    if paths is None:
        return ["      call paths: not recorded in this profile (build with HeapType's call stacks: "
                "`heaptype --cflags` adds them unless --callstack none)"]
    if not paths:
        return ["      call paths: none recorded for this type"]
    return [f"      top call paths of {label}:"] + [f"        {i}. {p}" for i, p in enumerate(paths[:top], 1)]


# --- tables ------------------------------------------------------------------------------------

TABLE_HEADER = ("test", "type", "peak", "bytes", "allocations", "leaked", "limit", "verdict")


def limits_text(limits: Mapping[str, Any]) -> str:
    """`peak<=64 KiB, leaked<=0 B`: the limits of one row, values or Limit objects."""
    parts = []
    for name in FIELDS:
        if name in limits:
            value = limits[name].value if isinstance(limits[name], Limit) else limits[name]
            parts.append(f"{name}<={format_value(name, value)}")
    return ", ".join(parts)


def evaluation_rows(evaluation: "Evaluation", labels: Iterable[str]) -> list[list[str]]:
    """Table rows (without the test column) for some rows of an evaluation."""
    over = {(v.type, v.field) for v in evaluation.violations}
    rows = []
    for label in labels:
        figs = evaluation.figures[label]
        limits = evaluation.limits.get(label, {})
        verdict = "OVER" if any((label, f) in over for f in FIELDS) else ("ok" if limits else "")
        rows.append([label] + [format_value(f, figs.get(f)) for f in FIELDS] + [limits_text(limits), verdict])
    return rows
