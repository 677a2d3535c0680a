"""The runtime's memory on code with many call paths (issue 23, "Footprint on real code").

tests/cpp/many_paths.cpp walks every path of a binary tree of calls twice: 65,536
distinct paths, each with one Leaf per pass, far more calling-context nodes and
sites than a thread keeps (src/runtime/call_context.hpp, thread_state.hpp). The
runtime forgets them a generation at a time and numbers on; the profile must
still be exact: every path twice, the paths of the second pass merged with those
of the first, and blocks of forgotten sites retyped (heaptype::tag) where they are.
"""

from __future__ import annotations

import pytest

from callpath_programs import callpath_programs  # noqa: F401 (fixture)

LEAVES = 1 << 16
LEAF_SIZE, TAGGED_SIZE = 24, 48
TAGGED = LEAVES // 1024
# What the runtime mapped at most on this program before its tables were bounded: 62 MiB.
BOUND = 6 << 20


@pytest.fixture(scope="module", params=["many_paths", "many_paths-instrument"],
                ids=["frame-pointer", "instrument"])
def many_paths(request, callpath_programs):
    return callpath_programs.load(request.param)


def test_every_path_twice_across_generations(many_paths):
    leaf_paths = many_paths.call_paths(types=["Leaf"])
    assert len(leaf_paths) == LEAVES
    assert {row.allocations for row in leaf_paths} == {2}
    assert {row.bytes for row in leaf_paths} == {2 * LEAF_SIZE}
    # main, walk_all, then 16 x (descend, left or right), the leaf's descend: the
    # left/right frames spell the leaf's number, so each path is another.
    assert {row.path[:2] for row in leaf_paths} == {("main", "walk_all(int)")}
    assert {len(row.path) for row in leaf_paths} == {2 + 2 * 16 + 1}
    assert len({row.path for row in leaf_paths}) == LEAVES


def test_blocks_of_forgotten_sites_are_retyped(many_paths):
    rows = {row.label: row for row in many_paths.by_type()}
    assert rows["Leaf"].allocations == 2 * LEAVES and rows["Leaf"].bytes == 2 * LEAVES * LEAF_SIZE
    assert rows["Tagged"].allocations == TAGGED and rows["Tagged"].objects == TAGGED
    assert rows["Tagged"].bytes == TAGGED * TAGGED_SIZE
    tagged_paths = many_paths.call_paths(types=["Tagged"])
    assert len(tagged_paths) == TAGGED and {row.allocations for row in tagged_paths} == {1}


def test_tables_stay_bounded(many_paths):
    assert many_paths.bookkeeping_bytes() < BOUND
    uses = many_paths.bookkeeping_uses()
    assert uses["call paths"] > 0 and uses["sites"] > 0
    assert sum(uses.values()) == many_paths.bookkeeping_bytes()
