"""The merged call tree: frames merged by name across threads and call sites, the
allocated types as its leaves, exact peaks at every node. Text is indented by depth
(capped, with the depth shown past the cap); JSON is the core's nested tree. Neither
recurses: a recursion 100,000 frames deep prints."""

from __future__ import annotations

import json

from ...analyze.labels import INFERRED_NOTE
from ...analyze.profile import Profile, sort_attribute
from ..tables import render_table
from ..units import format_bytes, format_count, format_percent
from .functions import NO_CONTEXT_NOTE
from .header import header_lines, report_json_head

INDENT = "  "
MAX_INDENT = 40


def callpaths_json_text(profile: Profile, sort: str = "bytes", top: int | None = None, *, bottom_up: bool = False,
                        inlined: bool = False, infer: bool = True) -> str:
    """The JSON report as text: the tree is written by the core, whatever its depth
    (Python's json module recurses, one level per tree level)."""
    sort_attribute(sort)
    analysis = profile.analysis(call_tree=True, bottom_up=bottom_up, inlined=inlined, infer=infer)
    head = report_json_head(profile, "callpath")
    head["direction"] = "bottom-up" if bottom_up else "top-down"
    head["warnings"] = profile.warnings
    tree = analysis.tree_json(bottom_up=bottom_up, sort=sort, top=top or 0)
    text = json.dumps(head, indent=2)
    return text[:-2] + ',\n  "tree": ' + tree + "\n}"


def callpaths_json(profile: Profile, sort: str = "bytes", top: int | None = None, **options) -> dict:
    """The JSON report as a dict (a tree thousands of frames deep needs a deep stack
    to load: prefer ``callpaths_json_text``)."""
    return json.loads(callpaths_json_text(profile, sort, top, **options))


def _recursion_run(node, attribute: str):
    """A directly recursive function: the node at the end of the run of frames with
    the same name, each with that one frame child and nothing allocated itself."""
    run, current = 1, node
    while True:
        children = current.children
        frames = [c for c in children if c.kind == "frame"]
        if len(children) != 1 or len(frames) != 1 or frames[0].name != node.name:
            return current, run
        current = frames[0]
        run += 1


def _push_children(stack: list, children: list, top: int | None, depth: int, whole: int) -> None:
    """Children go on the stack in reverse (the largest pops first), after a
    "... N more" line for those beyond ``top``."""
    shown = children[:top] if top else children
    if len(children) > len(shown):
        rest = children[len(shown):]
        rest_bytes = sum(c.total.bytes for c in rest)
        more = (format_count(sum(c.total.allocations for c in rest)), format_bytes(rest_bytes),
                format_percent(rest_bytes, whole), "", INDENT * min(depth + 1, MAX_INDENT) + f"... {len(rest)} more (--top)")
        stack.append((more, None))
    for child in reversed(shown):
        stack.append((child, depth + 1))


def tree_rows(root, sort: str, top: int | None, whole: int, mark_peaks: bool = False) -> list[tuple]:
    attribute = sort_attribute(sort)

    def ordered(children):
        return sorted(children, key=lambda c: (-getattr(c.total, attribute), c.kind != "type", c.name))

    rows: list[tuple] = []
    stack: list = []
    _push_children(stack, ordered(root.children), top, -1, whole)
    while stack:
        node, depth = stack.pop()
        if isinstance(node, tuple):  # "... N more" line
            rows.append(node)
            continue
        indent = INDENT * min(depth, MAX_INDENT) + (f"[{depth}] " if depth > MAX_INDENT else "")
        if node.kind == "type":
            name = f"[{node.name}]"
            current = node
        else:
            current, run = _recursion_run(node, attribute)
            name = node.name + (" [inlined]" if node.inlined else "") + (f" (x{run}, recursive)" if run > 1 else "")
        f = node.total
        rows.append((format_count(f.allocations), format_bytes(f.bytes), format_percent(f.bytes, whole),
                     format_bytes(f.peak_bytes) + ("*" if mark_peaks else ""), indent + name))
        _push_children(stack, ordered(current.children), top, depth, whole)
    return rows


def render_callpaths_text(profile: Profile, sort: str = "bytes", top: int | None = None, *, bottom_up: bool = False,
                          inlined: bool = False, infer: bool = True) -> str:
    """The merged call tree, one line per frame, indented by depth; ``[T]`` lines are
    the types a frame allocated. ``top`` keeps the largest N children of each node."""
    root = profile.call_tree(bottom_up=bottom_up, inlined=inlined, infer=infer)
    direction = ("bottom-up: the functions that allocate, then their callers" if bottom_up
                 else "top-down: from the threads' first functions to the allocated types")
    lines = header_lines(profile) + ["", f"Call paths, {direction}"]
    body = tree_rows(root, sort, top, root.total.bytes, mark_peaks=profile.aggregated)
    lines += render_table(("allocations", "bytes", "%", "peak", "call path"), body, numeric=range(0, 4))
    if not root.children:
        lines.append("(no allocations)")
    if "(inferred)" in "\n".join(row[4] for row in body):
        lines += ["", INFERRED_NOTE]
    if not profile.has_call_paths:
        lines += ["", NO_CONTEXT_NOTE]
    return "\n".join(lines)
