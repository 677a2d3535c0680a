"""What the diff page of two profiles shows: the per-type and per-function deltas of
``heaptype diff`` (report/diff.py), both timelines' totals, and one call tree
holding both profiles' figures, matched by path, for the red/green flame graph."""

from __future__ import annotations

from ..report import diff_json, timeline_json
from .data import head_json
from .flame import KeptTree, figures_of, keep_nodes, match_nodes, tree_columns

MAX_ROWS = 2000


def union_tree(a: KeptTree, b: KeptTree) -> KeptTree:
    """The kept paths of either tree, in one tree (parents before children)."""
    union = KeptTree(cut=max(a.cut, b.cut))
    index: dict[tuple, int] = {}  # (parent index, kind, name) -> index
    for tree in (a, b):
        local: list[int] = []  # this tree's index -> union index
        for parent, key, inlined in zip(tree.parents, tree.keys, tree.inlined):
            union_parent = local[parent] if parent >= 0 else -1
            slot = index.get((union_parent, *key))
            if slot is None:
                slot = index[(union_parent, *key)] = len(union.keys)
                union.parents.append(union_parent)
                union.keys.append(key)
                union.inlined.append(inlined)
                union.core_nodes.append(None)
            local.append(slot)
    return union


def diff_tree_json(a, b) -> dict:
    """The union of both kept call trees, with A's and B's figures for every node."""
    union = union_tree(keep_nodes(a.call_tree()), keep_nodes(b.call_tree()))
    return {**tree_columns(union), "a": figures_of(match_nodes(union, a.call_tree())),
            "b": figures_of(match_nodes(union, b.call_tree()))}


def _timeline_totals(profile) -> dict:
    timeline = timeline_json(profile, "type", 0)
    return {"times_s": timeline["times_s"], "totals": timeline["totals"], "peak_bytes": timeline["peak_bytes"],
            "peak_time_s": timeline["peak_time_s"]}


def diff_data(a, b) -> dict:
    """Everything the diff page of A (before) and B (after) shows."""
    for profile in (a, b):
        profile.analysis(call_tree=True, functions=True)
    by_type = diff_json(a, b, "type", top=MAX_ROWS)
    by_function = diff_json(a, b, "function", top=MAX_ROWS)
    return {
        "kind": "diff",
        "a": {"path": a.path, "head": head_json(a), "timeline": _timeline_totals(a)},
        "b": {"path": b.path, "head": head_json(b), "timeline": _timeline_totals(b)},
        "types": by_type,
        "functions": by_function,
        "flame": diff_tree_json(a, b),
    }
