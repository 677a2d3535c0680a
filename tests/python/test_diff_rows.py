"""heaptype diff's rows: groups of two profiles matched by name (present/report/diff.py)."""

from __future__ import annotations

from types import SimpleNamespace

from heaptype.present.report.diff import FIELDS, diff_rows, over_threshold


def group(label: str, peak: int, allocations: int):
    figures = dict.fromkeys(FIELDS, 0)
    figures.update(peak_bytes=peak, bytes=peak, allocations=allocations)
    return SimpleNamespace(label=label, **figures)


def profile(*groups):
    return SimpleNamespace(by_type=lambda infer=True: list(groups))


def test_a_type_inferred_in_one_profile_and_exact_in_the_other_is_one_row():
    """The same program preloaded (`heaptype run`: strings' buffers inferred) and built
    with HeapType (exact): one row per type, named for where it was inferred, not a
    row gone and a row new for every type (ninja's leveldb build: every row changed)."""
    preloaded = profile(group("char[] of std::string (inferred)", 1000, 10), group("Node", 64, 2))
    linked = profile(group("char[] of std::string", 1000, 10), group("Node", 64, 2))
    rows = {r.name: r for r in diff_rows(preloaded, linked)}
    assert set(rows) == {"char[] of std::string (inferred in A)", "Node"}
    assert rows["char[] of std::string (inferred in A)"].delta["peak_bytes"] == 0
    assert over_threshold(list(rows.values()), 50) == []
    backwards = {r.name for r in diff_rows(linked, preloaded)}
    assert backwards == {"char[] of std::string (inferred in B)", "Node"}


def test_rows_both_profiles_name_alike_stay_apart():
    """A profile holding both the exact and the inferred row of a type keeps both."""
    a = profile(group("Buf (inferred)", 10, 1), group("Buf", 20, 2))
    b = profile(group("Buf", 30, 3))
    rows = {r.name: (r.a["peak_bytes"], r.b["peak_bytes"]) for r in diff_rows(a, b)}
    assert rows == {"Buf": (20, 30), "Buf (inferred)": (10, 0)}
