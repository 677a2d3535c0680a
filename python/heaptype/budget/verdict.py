"""Verdicts as text: failure messages with the top call paths of a type, and the
rows of the tables that show figures beside their limits."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ..analyze.labels import TOTAL
from ..present.tables import render_table
from .baseline import Change
from .evaluate import Evaluation, sort_labels
from .model import Limit
from .values import FIELD_LABEL, FIELDS, LIMIT_FIELDS, format_value

CALL_PATH_SORT = {"peak": ("peak", "peak_bytes"), "bytes": ("bytes", "bytes"),
                  "allocations": ("allocations", "allocations"), "leaked": ("live", "live_bytes")}
FOLD_LONGER_THAN = 20   # template argument lists longer than this fold to <…>
PATH_WIDTH = 100        # call paths fold across lines at this width
MEASURED_LARGEST = 5    # rows by peak a verdict's table shows beside those with limits


@dataclass(frozen=True)
class CallPath:
    """One call path of a type, root first, and its figure (already formatted)."""

    value: str
    frames: tuple[str, ...]


CallPaths = Callable[[str, str], "list[CallPath] | None"]


def profile_call_paths(profile, top: int = 3) -> CallPaths:
    """``(type label, field) -> call paths``: the top call paths of a type in a loaded
    profile, sorted by the figure that is over; None when the profile has no calling
    contexts. Only asked for when a test fails: a passing test never pays for them."""

    def paths(label: str, field_name: str) -> list[CallPath] | None:
        if not getattr(profile, "has_call_paths", False) or field_name not in CALL_PATH_SORT:
            return None
        sort, attribute = CALL_PATH_SORT[field_name]
        try:
            rows = profile.call_paths(types=[label], sort=sort, infer=False)
        except Exception as e:  # noqa: BLE001 - call paths only explain a verdict: never hide it
            return [CallPath("(the call paths could not be read:", (f"{type(e).__name__}: {e})",))]
        rows = [r for r in rows if r.type_label == label][:top]
        return [CallPath(f"{format_value(field_name, getattr(r, attribute))} {FIELD_LABEL[field_name]}",
                         tuple(r.path)) for r in rows]

    return paths


def fold_templates(name: str, longer_than: int = FOLD_LONGER_THAN) -> str:
    """``std::map<std::__cxx11::basic_string<char, ...>, int>`` as ``std::map<…>``: every
    template argument list longer than ``longer_than`` characters folds, so that a
    name reads at a glance (``--heap-full-names`` keeps names whole)."""
    out: list[str] = []
    depth, opened = 0, 0
    i = 0
    while i < len(name):
        c = name[i]
        if c == "<" and not _is_operator(name, i):
            if depth == 0:
                opened = len(out)
            depth += 1
        elif c == ">" and depth > 0 and not _is_operator(name, i):
            depth -= 1
            if depth == 0:
                inner = "".join(out[opened + 1:])
                if len(inner) > longer_than:
                    del out[opened + 1:]
                    out.append("…")
        out.append(c)
        i += 1
    return "".join(out) if depth == 0 else name  # unbalanced (operator<, a cut name): as it is


def _is_operator(name: str, i: int) -> bool:
    """Whether the bracket at ``i`` belongs to ``operator<``, ``operator<<``, ``operator->``..."""
    before = name[:i].rstrip("<>=-")
    return before.endswith("operator")


def fold_path(frames: Iterable[str], *, prefix: str, indent: int, width: int = PATH_WIDTH) -> list[str]:
    """A call path as lines: ``prefix`` then the frames joined by " > ", folded before a
    frame that would pass ``width``; continuation lines start with "> " at ``indent``."""
    frames = list(frames) or ["(no frames)"]
    lines, line = [], prefix + frames[0]
    for frame in frames[1:]:
        if len(line) + 3 + len(frame) > width:
            lines.append(line)
            line = " " * indent + "> " + frame
        else:
            line += " > " + frame
    return lines + [line]


def format_path(frames: Iterable[str]) -> str:
    """`main > run > make<Small>`: a call path on one line, root first."""
    return " > ".join(frames) or "(no frames)"


def failure_text(evaluation: Evaluation, *, call_paths: CallPaths | None = None, top_paths: int = 3,
                 regressions: Iterable["Change"] = (), baseline: str | None = None, full_names: bool = False) -> str:
    """The text of a failed budget: test, type, limit, measured value, by how much it is
    over, where the limit was set, the top call paths of that type (whole, folded across
    lines), and the profile kept for inspection. ``call_paths(type)`` gives call paths
    when the profile has them. Long template names fold to ``<…>`` unless ``full_names``."""
    name = (lambda text: text) if full_names else fold_templates
    lines = []
    if evaluation.violations:
        lines.append(f"heap budget exceeded: {evaluation.test}")
        for label in sort_labels({v.type for v in evaluation.violations}):
            over = [v for v in evaluation.violations if v.type == label]
            for v in over:
                lines.append(f"  {name(v.type)}: {v.headline()}")
                lines.append(f"      limit set at {v.limit.origin}")
            lines += _call_path_lines(label, over[0].field, call_paths, top_paths, name)
    regressions = list(regressions)
    if regressions:
        lines.append(f"heap regression against the baseline {baseline}: {evaluation.test}")
        lines += [f"  {name(change.type)}: {change.detail()}" for change in regressions]
    if not evaluation.complete:
        lines.append("  note: the profile was cut short (the program did not finish): figures cover what "
                     "was written before that; `leaked` limits are not checked")
    if evaluation.profile_path:
        lines.append(f"  profile kept: {evaluation.profile_path}")
        lines.append(f"      heaptype report {shlex.quote(str(evaluation.profile_path))}")
    return "\n".join(lines)


def _call_path_lines(label: str, field_name: str, call_paths: CallPaths | None, top: int, name) -> list[str]:
    if label == TOTAL:
        return []
    paths = call_paths(label, field_name) if call_paths else None
    if paths is None:
        return ["      call paths: not recorded in this profile (build with HeapType's call stacks: "
                "`heaptype --cflags` adds them unless --callstack none)"]
    if not paths:
        return ["      call paths: none recorded for this type"]
    lines = [f"      top call paths of {name(label)}:"]
    for i, path in enumerate(paths[:top], 1):
        prefix = f"        {i}. {path.value}: "
        lines += fold_path([name(frame) for frame in path.frames], prefix=prefix, indent=len(prefix) - 2)
    return lines


# --- tables ------------------------------------------------------------------------------------

FIGURE_HEADER = tuple(FIELD_LABEL[f] for f in FIELDS)
TABLE_HEADER = ("test", "type") + FIGURE_HEADER + ("limit", "verdict")
MEASURED_HEADER = ("type",) + FIGURE_HEADER + ("limit", "verdict")


def limits_text(limits: Mapping[str, Any]) -> str:
    """`peak<=64 KiB, leaked<=0 B`: the limits of one row, values or Limit objects."""
    parts = []
    for name in LIMIT_FIELDS:
        if name in limits:
            value = limits[name].value if isinstance(limits[name], Limit) else limits[name]
            parts.append(f"{name}<={format_value(name, value)}")
    return ", ".join(parts)


def evaluation_rows(evaluation: "Evaluation", labels: Iterable[str], full_names: bool = True) -> list[list[str]]:
    """Table rows (without the test column) for some rows of an evaluation."""
    over = {(v.type, v.field) for v in evaluation.violations}
    rows = []
    for label in labels:
        figs = evaluation.figures[label]
        limits = evaluation.limits.get(label, {})
        verdict = "OVER" if any((label, f) in over for f in LIMIT_FIELDS) else ("ok" if limits else "")
        shown = label if full_names else fold_templates(label)
        rows.append([shown] + [format_value(f, figs.get(f)) for f in FIELDS] + [limits_text(limits), verdict])
    return rows


def measured_lines(evaluation: "Evaluation", budget=None, *, largest: int = MEASURED_LARGEST, full_names: bool = False) -> list[str]:
    """The table of a verdict: the rows with limits, and the largest rows by peak (a
    crash or a regression is easier to read next to what the program held)."""
    labels = set(evaluation.shown_labels(budget))
    by_peak = sorted((label for label in evaluation.figures if label != TOTAL),
                     key=lambda label: (-evaluation.figures[label].peak, label))
    labels |= set(by_peak[:largest])
    rows = evaluation_rows(evaluation, sort_labels(labels), full_names=full_names)
    return render_table(MEASURED_HEADER, rows, numeric=(1, 2, 3, 4))
