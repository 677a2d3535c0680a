"""heaptype diff's rows: groups of two profiles matched by name (present/report/diff.py)."""

from __future__ import annotations

from types import SimpleNamespace

from heaptype.present.report.diff import FIELDS, diff_rows, over_threshold


def group(label: str, peak: int, allocations: int, at_heap_peak: bool = False):
    figures = dict.fromkeys(FIELDS, 0)
    figures.update(peak_bytes=peak, bytes=peak, allocations=allocations)
    return SimpleNamespace(label=label, peak_at_heap_peak=at_heap_peak, **figures)


def profile(*groups, aggregated: bool = False):
    return SimpleNamespace(by_type=lambda infer=True: list(groups), aggregated=aggregated, path="p.htp")


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


def test_an_aggregated_rows_peak_at_the_heaps_peak_is_marked_and_no_growth():
    """A full profile against an aggregated one of the same run: the untyped row's peak
    in the aggregated profile is what it had live at the heap's peak (fmt's format-test:
    `(untyped)` 4.92 KiB -> 472 B shown as a plain change). Marked, and --threshold
    leaves it out; a typed row's own peak is compared as ever."""
    from heaptype.present.report.diff import diff_json, render_diff_text

    full = profile(group("(untyped)", 5000, 40), group("Node", 64, 2))
    aggregated = profile(group("(untyped)", 472, 40, at_heap_peak=True), group("Node", 640, 2), aggregated=True)
    rows = {r.name: r for r in diff_rows(aggregated, full)}
    assert rows["(untyped)"].peak_approximate and not rows["Node"].peak_approximate
    assert [r.name for r in over_threshold(list(rows.values()), 50)] == []
    assert [r.name for r in over_threshold(diff_rows(full, aggregated), 50)] == ["Node"]
    text = render_diff_text(aggregated, full)
    assert "472 B*" in text and "* an aggregated profile keeps no own peak for this row" in text
    json_rows = {r["type"]: r for r in diff_json(aggregated, full)["rows"]}
    assert json_rows["(untyped)"]["peak_approximate"] is True and "peak_approximate" not in json_rows["(untyped)"]["a"]
