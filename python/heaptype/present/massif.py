"""valgrind massif's output format, read by ``ms_print`` and massif-visualizer.

Snapshots are the points of ``Profile.timeline`` (at most ``MAX_SNAPSHOTS``, each the
highest of the points it stands for, so the peak is one of them), plus one at the
end. Two carry a tree: the peak (``heap_tree=peak``: the bytes live at the moment
the selection peaked) and the end (``detailed``: what was never freed). Trees run
from the root callers down to the allocated types, which are their leaves, as in
the folded export; past ``MAX_DEPTH`` frames (massif's own ``--depth`` default) a
node lists the types live below it instead of its callees. The tree's root line
is massif's, so both readers recognise it.
"""

from __future__ import annotations

MAX_SNAPSHOTS = 100  # massif's --max-snapshots default
MAX_DEPTH = 30       # massif's --depth default
ROOT_LABEL = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."


def clean(name: str) -> str:
    """A name as one line ms_print keeps whole: it reads '#' as a comment."""
    return name.replace("\n", " ").replace("\r", " ").replace("#", "%23")


def pick_points(totals: list[int], limit: int = MAX_SNAPSHOTS) -> list[int]:
    """At most ``limit`` point indices: the highest of each run of consecutive points."""
    if len(totals) <= limit:
        return list(range(len(totals)))
    size = -(-len(totals) // limit)
    return [max(range(start, min(start + size, len(totals))), key=lambda i: (totals[i], -i))
            for start in range(0, len(totals), size)]


def _live_children(node) -> list:
    return sorted((c for c in node.children if c.total.live_bytes > 0), key=lambda c: (-c.total.live_bytes, c.name))


def _types_below(node) -> list[tuple[str, int]]:
    """(type, live bytes) of the types live under a node, largest first."""
    amounts: dict[str, int] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        for child in current.children:
            if child.kind == "type":
                amounts[child.name] = amounts.get(child.name, 0) + child.total.live_bytes
            else:
                stack.append(child)
    return sorted(((t, b) for t, b in amounts.items() if b > 0), key=lambda tb: (-tb[1], tb[0]))


def tree_lines(root, total: int) -> list[str]:
    """massif's tree lines (one space of indent per level) of the live bytes under ``root``."""
    top = _live_children(root)
    lines = [f"n{len(top)}: {total} {ROOT_LABEL}"]
    stack: list = [(child, 1) for child in reversed(top)]
    while stack:
        item, depth = stack.pop()
        indent = " " * depth
        if isinstance(item, tuple):  # a type merged below the depth limit
            lines.append(f"{indent}n0: {item[1]} {clean(item[0])}")
            continue
        if item.kind == "frame" and depth >= MAX_DEPTH:
            below = _types_below(item)
            lines.append(f"{indent}n{len(below)}: {item.total.live_bytes} {clean(item.name)} (deeper frames left out)")
            stack += [(entry, depth + 1) for entry in reversed(below)]
            continue
        children = _live_children(item)
        lines.append(f"{indent}n{len(children)}: {item.total.live_bytes} {clean(item.name)}")
        stack += [(child, depth + 1) for child in reversed(children)]
    return lines


def _snapshot(number: int, time_ms: float, heap_bytes: int, tree: str, lines: list[str] | None = None) -> list[str]:
    out = ["#-----------", f"snapshot={number}", "#-----------", f"time={time_ms:.3f}", f"mem_heap_B={heap_bytes}",
           "mem_heap_extra_B=0", "mem_stacks_B=0", f"heap_tree={tree}"]
    return out + (lines or [])


def massif(profile) -> str:
    """The massif file of ``profile`` (its filters apply), as text."""
    timeline = profile.timeline("type", 0)
    points = pick_points(timeline.totals)
    peak_point = max(points, key=lambda i: (timeline.totals[i], -i), default=None)
    at_peak = profile.at("peak")
    program = " ".join(profile.argv) or profile.executable or "(unknown)"
    lines = [f"desc: heaptype export of {clean(profile.path)}", f"cmd: {clean(program)}", "time_unit: ms"]
    for number, i in enumerate(points):
        time_ms = timeline.times_s[i] * 1000
        if i == peak_point:
            peak_live = at_peak.selected.live_bytes
            lines += _snapshot(number, time_ms, peak_live, "peak", tree_lines(at_peak.call_tree(), peak_live))
        else:
            lines += _snapshot(number, time_ms, timeline.totals[i], "empty")
    end_ms = max(profile.totals.duration_us / 1000, timeline.times_s[-1] * 1000 if points else 0.0)
    at_exit = profile.selected.live_bytes
    lines += _snapshot(len(points), end_ms, at_exit, "detailed", tree_lines(profile.call_tree(), at_exit))
    return "\n".join(lines) + "\n"
