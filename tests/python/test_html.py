"""The HTML report (issue 12), driven in headless Chromium: programs with known
figures (tests/cpp/lifetimes.cpp, tests/cpp/phases.cpp) and synthetic profiles
whose names are hostile. Screenshots are kept under artifacts/screenshots/.

lifetimes: f() x100 (one Kilo made and freed each time), g(10) holds ten Kilo
(peak 10,240 B), h() 50 Quarter temporaries, leak() three Leaked never freed. Its
run is shorter than one clock tick, so its timeline is one point.
phases: 100 Alpha, then 50 Beta, then 20 Gamma, each held through a 40 ms sleep.
threads (3 threads, 50,000 each): every worker thread keeps 7 Kept (48 B) to the end.
findings: releases a program gets wrong, the HTML report's findings tab.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from callpath_programs import callpath_programs  # noqa: F401 (fixture)
from conftest import run_profiled
from html_pages import (browser, deep_profile, hover_timeline, open_page, svg_x,  # noqa: F401 (fixture)
                        synthetic_profile)

import heaptype
from heaptype.present.report import timeline_json

LIFETIMES_SERIES = {"(untyped)", "libstdc++: emergency exception pool", "Kilo", "Quarter", "Leaked"}
HOSTILE_TYPES = ["<script>alert('type')</script>", 'Evil"><img src=x onerror=alert("img")>',
                 "</script><script>alert('end')</script><!--"]
HOSTILE_FUNCTIONS = ["<script>alert('function')</script>", "f(\"'</script>)", "g<!--x-->()"]


def heaptype_html(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "heaptype", "html", *args], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("html")


@pytest.fixture(scope="module")
def lifetimes(callpath_programs):
    return callpath_programs.profile_path("lifetimes")


@pytest.fixture(scope="module")
def lifetimes_page(lifetimes, pages) -> Path:
    page = pages / "lifetimes.html"
    heaptype_html(str(lifetimes), "-o", str(page))
    return page


@pytest.fixture(scope="module")
def phases(cpp_programs, pages) -> Path:
    profile = pages / "phases.htp"
    done = run_profiled(cpp_programs.program("phases"), profile)
    assert done.returncode == 0, done.stderr
    return profile


@pytest.fixture(scope="module")
def phases_page(phases, pages) -> Path:
    page = pages / "phases.html"
    heaptype_html(str(phases), "-o", str(page))
    return page


# --- the page of one profile ------------------------------------------------------------

def test_page_loads_without_errors_dialogs_or_network(browser, lifetimes_page):
    opened = open_page(browser, lifetimes_page)
    opened.screenshot("lifetimes")
    assert (opened.errors, opened.dialogs, opened.requests) == ([], [], [])
    assert "<script src" not in lifetimes_page.read_text()


def test_timeline_shows_the_series_and_its_hover_the_exact_peak(browser, lifetimes, lifetimes_page):
    profile = heaptype.load(lifetimes)
    expected = {s["name"] for s in timeline_json(profile)["series"]}
    assert expected == LIFETIMES_SERIES
    opened = open_page(browser, lifetimes_page)
    assert set(opened.attributes("#legend .legend-item", "data-series")) == expected
    assert set(opened.attributes("#timeline path.series", "data-series")) == expected

    lines = hover_timeline(opened, "peak")
    opened.screenshot("lifetimes-hover-peak")
    assert lines["total live"] == f"{profile.totals.peak_bytes:,} B"
    assert lines["Kilo"] == "10,240 B"
    assert "the peak" in lines.values()


def test_flame_graph_holds_the_call_paths_and_types(browser, lifetimes_page):
    opened = open_page(browser, lifetimes_page)
    drawn = set(opened.attributes("#flame g.frame", "data-name"))
    assert {"main", "f()", "g(int)", "h()", "Kilo", "Quarter"} <= drawn
    assert set(opened.attributes("#flame g.frame.type", "data-name")) >= {"Kilo", "Quarter"}
    opened.page.check("#metric-temporary_allocations")
    temporaries = set(opened.attributes("#flame g.frame", "data-name"))
    opened.screenshot("lifetimes-flame-temporaries")
    assert {"f()", "h()", "Kilo", "Quarter"} <= temporaries and "g(int)" not in temporaries
    opened.page.check("#metric-peak_bytes")
    assert "g(int)" in set(opened.attributes("#flame g.frame", "data-name"))


def test_tables_show_the_cli_figures(browser, lifetimes, lifetimes_page):
    opened = open_page(browser, lifetimes_page)
    types = opened.table("types-table")
    # type, allocations, objects, bytes, peak, live at exit, temporaries
    assert types["Kilo"] == ["Kilo", "110", "110", "110 KiB", "10 KiB", "0 B", "100"]
    assert types["Leaked"][5] == "144 B"
    opened.page.click("[data-tab=functions]")
    functions = opened.table("functions-table")
    assert functions["g(int)"][6] == "10.1 KiB"  # total peak: ten Kilo and the 80 B array holding them
    opened.page.click("[data-tab=leaks]")
    assert opened.table("leaks-table")["Leaked main \u2192 leak()"][1:3] == ["3", "144 B"]
    opened.page.click("[data-tab=temporaries]")
    temporaries = opened.table("temporaries-table")
    assert temporaries["Kilo main \u2192 f()"][1] == "100" and temporaries["Quarter main \u2192 h()"][1] == "50"
    opened.page.click("[data-tab=memory]")
    assert "recorded without addresses" in opened.page.text_content("#memory-unavailable")
    opened.page.click("[data-tab=types]")
    opened.page.fill("#panel-types input[type=search]", "qua")
    assert list(opened.table("types-table")) == ["Quarter"]
    assert opened.errors == []


def test_brushing_a_time_range_changes_the_type_table(browser, phases, phases_page):
    profile = heaptype.load(phases)
    peaks = {g.label: g.peak_time_us / 1e6 for g in profile.by_type()}
    opened = open_page(browser, phases_page)
    assert {"Alpha", "Beta", "Gamma"} <= set(opened.table("types-table"))
    chart = opened.page.locator("#timeline svg").bounding_box()
    middle = chart["y"] + chart["height"] / 2
    # From the chart's start to halfway between Alpha's and Beta's allocations.
    start = float(opened.page.get_attribute("#timeline svg", "data-t0"))
    opened.page.mouse.move(svg_x(opened, start) + 1, middle)
    opened.page.mouse.down()
    opened.page.mouse.move(svg_x(opened, (peaks["Alpha"] + peaks["Beta"]) / 2), middle, steps=8)
    opened.page.mouse.up()
    opened.page.wait_for_function("document.querySelector('#selection').textContent.includes(' to ')")
    opened.screenshot("phases-brushed")
    brushed = opened.table("types-table")
    assert "Alpha" in brushed and "Beta" not in brushed and "Gamma" not in brushed
    assert brushed["Alpha"][1:3] == ["100", "100"]  # all 100 allocated in the range
    flame = set(opened.attributes("#flame g.frame.type", "data-name"))
    assert "Alpha" in flame and "Gamma" not in flame
    opened.page.click("#clear-selection")
    assert {"Alpha", "Beta", "Gamma"} <= set(opened.table("types-table"))
    assert opened.errors == []


def test_clicking_a_series_filters_by_its_type(browser, phases_page):
    opened = open_page(browser, phases_page)
    opened.page.click("#legend [data-series=Beta]")
    assert list(opened.table("types-table")) == ["Beta"]
    assert set(opened.attributes("#flame g.frame.type", "data-name")) == {"Beta"}
    opened.page.click("[data-tab=functions]")
    assert "phase_beta()" not in opened.table("functions-table")  # it calls hold<Beta, 50>, which allocates
    assert any("Beta" in name for name in opened.table("functions-table"))
    opened.screenshot("phases-type-beta")
    assert opened.errors == []


# --- timeline groupings and findings (issue 25) ------------------------------------------------

@pytest.fixture(scope="module")
def threads_page(cpp_programs, pages) -> Path:
    profile = pages / "threads.htp"
    done = run_profiled(cpp_programs.program("threads"), profile, "3", "50000")  # ~0.1 s: many clock ticks
    assert done.returncode == 0, done.stderr
    page = pages / "threads-kept.html"
    heaptype_html(str(profile), "--type", "Kept", "-o", str(page))
    return page


@pytest.mark.parametrize("by,series,held", [
    ("function", "void hold<Gamma, 20>()", "20,480 B"),
    ("callpath", "main > void hold<Gamma, 20>() [Gamma]", "20,480 B"),
    ("type", "Gamma", "20,480 B"),
])
def test_the_timeline_stacks_by_the_cores_groupings(browser, phases, phases_page, by, series, held):
    """Each grouping's series are the core's (`heaptype timeline --by`); at the peak,
    phase_gamma's 20 Gamma of 1 KiB are live, held by hold<Gamma, 20>."""
    profile = heaptype.load(phases)
    expected = timeline_json(profile, by)
    assert series in {s["name"] for s in expected["series"]}
    opened = open_page(browser, phases_page)
    opened.page.click(f"#timeline-by-{by}")
    assert opened.page.get_attribute("#timeline svg", "data-by") == by
    assert opened.attributes("#legend .legend-item", "data-series") == [s["name"] for s in expected["series"]]
    assert set(opened.attributes("#timeline path.series", "data-series")) == {s["name"] for s in expected["series"]}
    label = {"callpath": "call path"}.get(by, by)
    assert opened.page.text_content("#timeline-title") == f"Live bytes over time, by {label}"
    lines = hover_timeline(opened, "peak")
    opened.screenshot(f"phases-by-{by}")
    assert lines[series] == held
    assert lines["total live"] == f"{profile.totals.peak_bytes:,} B"
    assert opened.errors == []


def test_the_timeline_by_thread_ends_with_each_workers_kept_blocks(browser, threads_page):
    """threads 3 50000, the page of type Kept: each worker thread (2, 3, 4; the main
    thread is 1) keeps 7 Kept (48 B) to the end: 336 B each."""
    opened = open_page(browser, threads_page)
    opened.page.click("#timeline-by-thread")
    assert set(opened.attributes("#legend .legend-item", "data-series")) == {"2", "3", "4"}
    lines = hover_timeline(opened, "end")
    opened.screenshot("threads-kept-by-thread")
    assert [lines[t] for t in ("2", "3", "4")] == ["336 B"] * 3
    assert lines["total live"] == "1,008 B"
    assert opened.errors == []


def test_a_brushed_range_outlives_a_change_of_grouping(browser, phases, phases_page):
    profile = heaptype.load(phases)
    alpha = next(g for g in profile.by_type() if g.label == "Alpha").peak_time_us / 1e6
    opened = open_page(browser, phases_page)
    chart = opened.page.locator("#timeline svg").bounding_box()
    middle = chart["y"] + chart["height"] / 2
    opened.page.mouse.move(svg_x(opened, float(opened.page.get_attribute("#timeline svg", "data-t0"))) + 1, middle)
    opened.page.mouse.down()
    opened.page.mouse.move(svg_x(opened, alpha) + 40, middle, steps=8)
    opened.page.mouse.up()
    opened.page.wait_for_function("document.querySelector('#selection').textContent.includes(' to ')")
    brushed = opened.table("types-table")
    opened.page.click("#timeline-by-function")
    assert " to " in opened.page.text_content("#selection")
    assert float(opened.page.eval_on_selector("#timeline .brush .selection", "r => r.getAttribute('width')")) > 0
    assert opened.table("types-table") == brushed  # the views keep the range
    # Another grouping's bands do not choose a type: only the type grouping's do.
    opened.page.click("#legend .legend-item >> nth=0")
    assert "type " not in opened.page.text_content("#selection")
    assert opened.errors == []


@pytest.fixture(scope="module")
def findings_page(cpp_programs, pages) -> tuple[Path, Path]:
    """findings.cpp: 7 Counted released with free(), then 5 Plain[4] with delete."""
    profile = pages / "findings.htp"
    done = run_profiled(cpp_programs.program("findings"), profile, "free-new", "7", "delete-array", "5")
    assert done.returncode == 0 and done.stdout == "done=12\n", done.stderr
    page = pages / "findings.html"
    heaptype_html(str(profile), "-o", str(page))
    return profile, page


def test_findings_show_with_their_call_paths(browser, findings_page):
    profile_path, page = findings_page
    profile = heaptype.load(profile_path)
    paths = {f["allocated"]: " \u2192 ".join(f["stack"]) for f in profile.findings}
    allocation_paths = {f["allocated"]: " \u2192 ".join(f["allocation_stack"]) for f in profile.findings}
    assert paths["Counted"].endswith("free_new()") and paths["Plain"].endswith("delete_array()")
    opened = open_page(browser, page)
    assert opened.page.text_content("[data-tab=findings]") == "Findings (12)"
    opened.page.click("[data-tab=findings]")
    opened.screenshot("findings")
    table = opened.table("findings-table")
    # finding, type, times, what happened, release call path, allocation call path
    assert table == {
        f"Counted {paths['Counted']}": ["mismatched free()", "Counted", "7",
                                        "allocated with new (24 B), released with free()", paths["Counted"],
                                        allocation_paths["Counted"]],
        f"Plain {paths['Plain']}": ["mismatched delete", "Plain", "5",
                                    "allocated with new[] (32 B), released with delete", paths["Plain"],
                                    allocation_paths["Plain"]],
    }
    opened.page.click("[data-tab=types]")
    opened.page.click("#types-table tr[data-name=Plain]")  # one type: its findings only
    opened.page.click("[data-tab=findings]")
    assert [cells[1] for cells in opened.table("findings-table").values()] == ["Plain"]
    assert opened.errors == []


def test_a_mismatched_delete_shows_both_types(browser, tmp_path):
    """The type-aware mode's finding (test_findings.findings_profile): two Derived
    (40 B) deleted as Base (4 B) in worker(), one Elem new[] block freed with free()."""
    from test_findings import findings_profile

    from heaptype.present.html import report_html, write_html
    from heaptype.analyze.profile import Profile

    file, names = findings_profile(tmp_path)
    page = write_html(report_html(Profile(file.path, file, names, [])), tmp_path / "deletes.html")
    opened = open_page(browser, page)
    opened.page.click("[data-tab=findings]")
    opened.screenshot("findings-mismatched-delete")
    table = opened.table("findings-table")
    assert table["Derived worker()"] == ["mismatched delete", "Derived", "2",
                                         "deleted as Base (4 B), allocated as Derived (40 B)", "worker()", "main"]
    assert table["Elem worker()"][:4] == ["mismatched free()", "Elem", "1", "allocated with new[] (64 B), released with free()"]
    assert opened.page.text_content("[data-tab=findings]") == "Findings (3)"
    assert opened.errors == []


# --- hostile names ----------------------------------------------------------------------------

def test_names_holding_markup_are_text_and_never_run(browser, tmp_path):
    from heaptype.present.html import report_html, write_html

    profile = synthetic_profile(tmp_path / "evil<b>name.htp", functions=HOSTILE_FUNCTIONS, types=HOSTILE_TYPES,
                                program="/bin/<script>alert('program')</script>")
    page = write_html(report_html(profile), tmp_path / "evil.html")
    opened = open_page(browser, page)
    opened.screenshot("hostile-names")
    assert opened.dialogs == [] and opened.errors == []
    assert set(opened.table("types-table")) == set(HOSTILE_TYPES)
    assert {cells[0] for cells in opened.table("types-table").values()} == set(HOSTILE_TYPES)
    assert set(HOSTILE_FUNCTIONS + HOSTILE_TYPES) <= set(opened.attributes("#flame g.frame", "data-name"))
    assert "<script>alert('program')</script>" in opened.page.text_content("#head-lines")
    assert opened.page.text_content("h1") == "HeapType report: evil<b>name.htp"
    assert opened.page.eval_on_selector_all("img", "n => n.length") == 0
    # Hovering and brushing render names too.
    opened.page.hover("#flame g.frame.type")
    assert opened.dialogs == []


# --- the diff page -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def diff_page(callpath_programs, pages) -> Path:
    ten = callpath_programs.profile_path("lifetimes", "auto", ("10",))
    twenty = callpath_programs.profile_path("lifetimes", "auto", ("20",))
    page = pages / "diff.html"
    heaptype_html("--diff", str(ten), str(twenty), "-o", str(page))
    return page


def test_diff_page_shows_the_delta(browser, diff_page):
    opened = open_page(browser, diff_page)
    opened.screenshot("lifetimes-diff")
    assert opened.errors == []
    kilo = opened.table("diff-types-table")["Kilo"]
    # type, peak A, peak B, peak delta, change, allocs A, allocs B, bytes delta
    assert kilo[1:5] == ["10 KiB", "20 KiB", "+10,240 B", "+100.0%"]
    assert kilo[5:7] == ["110", "120"]
    fill = opened.page.eval_on_selector('#flame g.frame[data-name="g(int)"] rect', "r => getComputedStyle(r).fill")
    red, green, _ = (int(v) for v in re.findall(r"\d+", fill)[:3])
    assert red > green + 60  # grew: red
    unchanged = opened.page.eval_on_selector('#flame g.frame[data-name="h()"] rect', "r => getComputedStyle(r).fill")
    assert unchanged == "rgb(232, 232, 232)"
    opened.page.click("[data-tab=functions]")
    assert opened.table("diff-functions-table")["g(int)"][5:7] == ["11", "21"]  # n Kilo and the array of them


# --- the page's data, without a browser --------------------------------------------------------

def test_embedded_data_cannot_end_its_script_element():
    from heaptype.present.html.render import script_json

    data = {"names": HOSTILE_TYPES + ["\u2028", "a&b"]}
    text = str(script_json(data))
    assert "</" not in text and "<!--" not in text and "<" not in text and "\u2028" not in text
    assert json.loads(text) == data


def test_time_buckets_compose_to_the_whole_run(phases):
    """Counts add up over the buckets, the peak is the largest bucket's, live figures
    are the last bucket's: the whole run's figures, exactly."""
    from heaptype.present.html.data import report_data

    profile = heaptype.load(phases)
    data = report_data(profile, ranges=12)
    edges = data["ranges"]["edges_s"]
    assert len(edges) == 13 and edges == sorted(edges)
    for row, buckets in zip(data["types"]["rows"], data["ranges"]["types"]):
        assert sum(buckets["allocations"]) == row["allocations"]
        assert sum(buckets["bytes"]) == row["bytes"]
        assert max(buckets["peak_bytes"]) == row["peak_bytes"]
        assert buckets["live_bytes"][-1] == row["live_bytes"]
        assert sum(buckets["temporary_allocations"]) == row["temporary_allocations"]
    flame = data["flame"]
    for i, buckets in enumerate(data["ranges"]["nodes"]):
        assert sum(buckets["allocations"]) == flame["figures"]["allocations"][i]
        assert max(buckets["peak_bytes"]) == flame["figures"]["peak_bytes"][i]


def test_the_page_follows_every_grouping_in_the_pass_of_its_tables(phases, monkeypatch):
    """One pass with the call tree makes the tables, the tree and the four timelines, one
    more the time ranges: each timeline is the one its own pass gives, figure for figure
    (`heaptype timeline --by`; type and thread without a call tree)."""
    from heaptype import _core
    from heaptype.present.html.data import report_data
    from heaptype.analyze.profile import TIMELINE_GROUPINGS

    passes = []
    analysis = _core.Analysis

    def counted(*args, **options):
        passes.append(options.get("timeline", ""))
        return analysis(*args, **options)

    monkeypatch.setattr(_core, "Analysis", counted)
    data = report_data(heaptype.load(phases), ranges=12)
    assert passes == [list(TIMELINE_GROUPINGS), ""]  # the ranges' pass follows no timeline
    monkeypatch.setattr(_core, "Analysis", analysis)
    assert list(data["timelines"]) == list(TIMELINE_GROUPINGS)
    for by in TIMELINE_GROUPINGS:
        alone = timeline_json(heaptype.load(phases), by)
        assert data["timelines"][by] == alone, by
    assert {s["name"] for s in data["timelines"]["type"]["series"]} >= {"Alpha", "Beta", "Gamma"}


def test_a_pass_of_more_groupings_serves_fewer(phases, monkeypatch):
    from heaptype import _core

    profile = heaptype.load(phases)
    both = profile.timelines(["thread", "function"], 3)
    monkeypatch.setattr(_core, "Analysis", None)  # no pass may be made from here on
    assert profile.timeline("function", 3) == both["function"]
    assert profile.timeline("thread", 3) == both["thread"]
    assert profile.call_tree().name == profile.analysis(call_tree=True).tree.name
    with pytest.raises(ValueError, match="unknown timeline grouping 'size'"):
        profile.timelines(["type", "size"])


def test_no_time_ranges_on_request(phases):
    from heaptype.present.html.data import report_data

    data = report_data(heaptype.load(phases), ranges=0)
    assert data["ranges"] is None and data["ranges_requested"] == 0


def test_bucket_edges():
    from heaptype.present.html.ranges import bucket_ticks

    assert bucket_ticks(0, 24) == []                      # one tick: nothing to brush
    assert bucket_ticks(1, 24) == [0, 1, 2]               # two ticks: two buckets
    assert bucket_ticks(99, 4) == [0, 25, 50, 75, 100]
    edges = bucket_ticks(1000, 24)
    assert len(edges) == 25 and edges[0] == 0 and edges[-1] == 1001 and all(b > a for a, b in zip(edges, edges[1:]))


def test_a_deep_tree_is_cut_to_what_a_page_carries(tmp_path):
    from heaptype.present.html.flame import MAX_NODES, flame_json, keep_nodes

    profile = deep_profile(tmp_path / "deep.htp", 10_000, "Deep")
    flame = flame_json(keep_nodes(profile.call_tree()))
    assert len(flame["parent"]) == MAX_NODES and flame["cut"] == 1
    assert all(p < i for i, p in enumerate(flame["parent"]))


def test_an_aggregated_profiles_page_shows_its_tables_and_says_why_there_is_no_timeline(browser, cpp_programs,
                                                                                        pages):
    profile, page = pages / "phases-aggregated.htp", pages / "phases-aggregated.html"
    done = run_profiled(cpp_programs.program("phases"), profile, env={"HEAPTYPE_MODE": "aggregate"})
    assert done.returncode == 0, done.stderr
    heaptype_html(str(profile), "-o", str(page))
    opened = open_page(browser, page)
    opened.screenshot("aggregated")
    assert (opened.errors, opened.dialogs, opened.requests) == ([], [], [])
    assert "aggregated profile" in opened.page.text_content("#timeline")
    types = opened.table("types-table")
    # phases: 100 Alpha, 50 Beta, 20 Gamma; a typed row keeps its own peak
    loaded = heaptype.load(profile)
    for name in ("Alpha", "Beta", "Gamma"):
        row = loaded.type_row(name)
        assert types[name][1] == f"{row.allocations:,}" and not row.peak_at_heap_peak
    assert [types[name][1] for name in ("Alpha", "Beta", "Gamma")] == ["100", "50", "20"]
