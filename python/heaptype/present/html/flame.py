"""The merged call tree as the page's flame graph holds it: the core's nodes, cut to
the ones that matter, flattened into columns (parents before children).

A page cannot carry every path of a large program, nor draw a recursion 40,000
frames deep, so the tree is cut: a node stays when one of its figures is at least
``MIN_SHARE`` of the whole, and the largest such nodes are kept first, up to
``MAX_NODES``. Figures of kept nodes are the core's, unchanged: a node whose
children were cut simply shows them as part of its own width.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

MAX_NODES = 4000
MIN_SHARE = 0.001
# What the flame graph can be drawn by, and what the tables need besides.
NODE_FIGURES = ("allocations", "bytes", "peak_bytes", "temporary_allocations", "live_bytes", "live_blocks")


@dataclass
class KeptTree:
    """Nodes in the order kept (a parent before its children): ``parents[i]`` is the
    index of node i's parent (-1: a child of the root), ``keys[i]`` its (kind, name),
    ``core_nodes[i]`` the core's node it came from."""

    parents: list[int] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    inlined: list[bool] = field(default_factory=list)
    core_nodes: list = field(default_factory=list)
    cut: int = 0  # nodes of the core's tree left out

    def __len__(self) -> int:
        return len(self.keys)


def _weight(node, whole: dict[str, int]) -> float:
    """The largest share of the whole any of a node's figures holds."""
    f = node.total
    return max((getattr(f, name) / amount for name, amount in whole.items() if amount), default=0.0)


def keep_nodes(root, *, max_nodes: int = MAX_NODES, min_share: float = MIN_SHARE) -> KeptTree:
    """The nodes of the core's tree under ``root`` worth drawing, largest first."""
    whole = {name: getattr(root.total, name) for name in ("allocations", "bytes", "peak_bytes",
                                                          "temporary_allocations", "live_bytes")}
    kept = KeptTree()
    candidates: list = []
    order = 0  # ties keep the core's order, so the result does not depend on hashing

    def offer(children, parent: int) -> None:
        nonlocal order
        for child in children:
            weight = _weight(child, whole)
            if weight >= min_share:
                heapq.heappush(candidates, (-weight, order, parent, child))
                order += 1
            else:
                kept.cut += 1

    offer(root.children, -1)
    while candidates and len(kept) < max_nodes:
        _, _, parent, node = heapq.heappop(candidates)
        kept.parents.append(parent)
        kept.keys.append((node.kind, node.name))
        kept.inlined.append(bool(node.inlined))
        kept.core_nodes.append(node)
        offer(node.children, len(kept) - 1)
    kept.cut += len(candidates)
    return kept


def figures_of(nodes, names=NODE_FIGURES) -> dict[str, list[int]]:
    """Columns of the nodes' total figures (None, a node absent: zeros)."""
    return {name: [getattr(n.total, name) if n is not None else 0 for n in nodes] for name in names}


def match_nodes(kept: KeptTree, root) -> list:
    """The nodes of another tree of the same profile (another pass, e.g. a time
    window) at the kept nodes' paths, or None where that tree has no such path."""
    matched: list = []
    children_of: dict[int, dict] = {}  # kept index (-1: root) -> {(kind, name): node}

    def children(index: int, node) -> dict:
        if index not in children_of:
            children_of[index] = {} if node is None else {(c.kind, c.name): c for c in node.children}
        return children_of[index]

    for parent, key in zip(kept.parents, kept.keys):
        parent_node = root if parent < 0 else matched[parent]
        matched.append(children(parent, parent_node).get(key) if parent_node is not None else None)
    return matched


def tree_columns(kept: KeptTree) -> dict:
    """The kept tree's shape as the page reads it: names once, then columns."""
    names: dict[str, int] = {}
    name_index = [names.setdefault(name, len(names)) for _, name in kept.keys]
    return {
        "names": list(names),
        "parent": kept.parents,
        "kind": [1 if kind == "type" else 0 for kind, _ in kept.keys],
        "name": name_index,
        "inlined": [int(i) for i in kept.inlined],
        "cut": kept.cut,
    }


def flame_json(kept: KeptTree) -> dict:
    """The kept tree with its nodes' figures."""
    return {**tree_columns(kept), "figures": figures_of(kept.core_nodes)}
