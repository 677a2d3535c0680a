"""The Chrome trace-event and massif exports (issue 12), and the memory view's data.

* chrome: checked against the trace-event format (the JSON object form: events with
  name, ph, ts in microseconds, pid, tid; counters with numeric args; instant events
  with a scope; metadata events naming the process and thread), and against the
  profile's exact peak;
* massif: read by valgrind's ms_print, and parsed by the rules of massif-visualizer's
  parser (line by line, one space of indent per tree level, child counts, costs).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from callpath_programs import callpath_programs  # noqa: F401 (fixture)
from html_pages import browser, deep_profile, open_page, synthetic_profile  # noqa: F401 (fixture)
from tooling import require_tool

import heaptype
from heaptype.present.massif import MAX_DEPTH, ROOT_LABEL, pick_points

PHASES = set("BEXIiCMPOsfNDbnepRrTtSFc")  # the trace-event format's phase letters
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}


def export(path, fmt: str, *args: str) -> bytes:
    done = subprocess.run([sys.executable, "-m", "heaptype", "export", str(path), "--format", fmt, *args],
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


@pytest.fixture(scope="module")
def lifetimes(callpath_programs):
    return callpath_programs.profile_path("lifetimes")


# --- Chrome's trace-event format ---------------------------------------------------------------

def check_trace_event_format(trace: dict) -> list[dict]:
    """The trace's events, once each is checked against the format."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    last_ts: dict[str, float] = {}
    for event in trace["traceEvents"]:
        assert isinstance(event["name"], str) and event["ph"] in PHASES
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event.get("ts", 0), (int, float)) and event.get("ts", 0) >= 0
        if event["ph"] == "C":
            assert event["args"] and all(isinstance(v, (int, float)) for v in event["args"].values())
            assert event["ts"] >= last_ts.get(event["name"], 0), "counter samples go forward in time"
            last_ts[event["name"]] = event["ts"]
        elif event["ph"] == "i":
            assert event["s"] in ("g", "p", "t")
        elif event["ph"] == "M":
            assert event["name"] in METADATA and isinstance(event["args"]["name"], str)
    return trace["traceEvents"]


def test_chrome_trace_follows_the_format_and_reaches_the_exact_peak(lifetimes):
    events = check_trace_event_format(json.loads(export(lifetimes, "chrome")))
    peak = heaptype.load(lifetimes).totals.peak_bytes
    totals = [e for e in events if e["ph"] == "C" and e["name"] == "live bytes"]
    by_type = [e for e in events if e["ph"] == "C" and e["name"] == "live bytes by type"]
    assert max(e["args"]["total"] for e in totals) == peak
    at_peak = max(by_type, key=lambda e: sum(e["args"].values()))
    assert sum(at_peak["args"].values()) == peak and at_peak["args"]["Kilo"] == 10240
    assert set(at_peak["args"]) == {"(untyped)", "libstdc++: emergency exception pool", "Kilo", "Quarter", "Leaked"}
    assert [e["args"]["bytes"] for e in events if e["ph"] == "i"] == [peak]


def test_chrome_trace_takes_the_filters(lifetimes):
    events = json.loads(export(lifetimes, "chrome", "--type", "Quarter"))["traceEvents"]
    counters = [e for e in events if e["ph"] == "C" and e["name"] == "live bytes by type"]
    assert {name for e in counters for name in e["args"]} == {"Quarter"}
    assert max(e["args"]["Quarter"] for e in counters) == 256


# --- massif ------------------------------------------------------------------------------------

def parse_massif(text: str) -> list[dict]:
    """Snapshots, read by massif-visualizer's rules: strict header lines, then per
    snapshot fixed fields, and trees whose lines are indented one space per level."""
    lines = text.split("\n")
    assert lines[0].startswith("desc: ") and lines[1].startswith("cmd: ") and lines[2] == "time_unit: ms"
    snapshots, i = [], 3
    while i < len(lines) and lines[i]:
        assert lines[i] == "#-----------" and lines[i + 2] == "#-----------"
        number = int(lines[i + 1].removeprefix("snapshot="))
        fields = dict(line.split("=", 1) for line in lines[i + 3:i + 8])
        snapshot = {"number": number, "time": float(fields["time"]), "heap": int(fields["mem_heap_B"]),
                    "tree": fields["heap_tree"], "nodes": []}
        assert fields["mem_heap_extra_B"] == "0" and fields["mem_stacks_B"] == "0"
        i += 8
        if snapshot["tree"] in ("peak", "detailed"):
            pending = [1]  # nodes still to read at each depth
            while pending:
                match = re.fullmatch(r"( *)n(\d+): (\d+) (.+)", lines[i])
                assert match and len(match[1]) == len(pending) - 1, lines[i]
                snapshot["nodes"].append((len(match[1]), int(match[3]), match[4], int(match[2])))
                pending[-1] -= 1
                pending.append(int(match[2]))
                while pending and pending[-1] == 0:
                    pending.pop()
                i += 1
        else:
            assert snapshot["tree"] == "empty"
        snapshots.append(snapshot)
    return snapshots


def check_costs(nodes: list[tuple[int, int, str, int]]) -> None:
    """Every node holds at least what its children hold."""
    for k, (depth, cost, _, _) in enumerate(nodes):
        children = []
        for later in nodes[k + 1:]:
            if later[0] <= depth:
                break
            if later[0] == depth + 1:
                children.append(later[1])
        assert sum(children) <= cost


def test_ms_print_reads_the_massif_export(lifetimes, tmp_path):
    ms_print = require_tool("ms_print")
    path = tmp_path / "massif.out.lifetimes"
    path.write_bytes(export(lifetimes, "massif"))
    snapshots = parse_massif(path.read_text())
    peak = heaptype.load(lifetimes).totals.peak_bytes
    (at_peak,) = [s for s in snapshots if s["tree"] == "peak"]
    assert at_peak["heap"] == peak == max(s["heap"] for s in snapshots)
    assert at_peak["nodes"][0][1:3] == (peak, ROOT_LABEL)
    check_costs(at_peak["nodes"])
    leaves = {label: cost for depth, cost, label, children in at_peak["nodes"] if children == 0}
    assert leaves["Kilo"] == 10240
    end = snapshots[-1]
    assert end["tree"] == "detailed" and end["heap"] == 144
    assert [label for _, _, label, _ in end["nodes"]] == [ROOT_LABEL, "main", "leak()", "Leaked"]

    done = subprocess.run([ms_print, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"({peak:,}B) {ROOT_LABEL}" in done.stdout
    assert re.search(r"\(10,240B\) Kilo", done.stdout)
    assert "Detailed snapshots: [" in done.stdout and "(peak)" in done.stdout


def test_massif_trees_stop_at_massifs_depth(tmp_path):
    """A path 10,000 frames deep: past MAX_DEPTH frames, the types live below."""
    from heaptype.present.massif import massif

    text = massif(deep_profile(tmp_path / "deep.htp", 10_000, "Deep"))
    nodes = parse_massif(text)[-1]["nodes"]
    assert max(depth for depth, *_ in nodes) == MAX_DEPTH + 1
    assert nodes[-1][1:] == (32, "Deep", 0) and "(deeper frames left out)" in nodes[-2][2]


def test_massif_snapshots_keep_the_highest_points():
    totals = [5, 9, 1, 7, 3, 3, 8, 2]
    assert pick_points(totals, 8) == list(range(8))
    assert pick_points(totals, 4) == [1, 3, 4, 6]
    assert totals.index(max(totals)) in pick_points(totals, 3)


# --- the memory view's data ----------------------------------------------------------------------

def core_view(time_s: float = 0.5) -> dict:
    """A view of the shape Profile.memory_view() returns: two regions far apart."""
    def run(start, end, type_name, blocks):
        return {"start": start, "end": end, "type": type_name, "blocks": blocks, "bytes": end - start}

    heap = [run(0x10000, 0x10000 + 6400, "Node", 100), run(0x20000, 0x20000 + 640, "(untyped)", 10)]
    pages = [run(0x7f0000000000, 0x7f0000000000 + 4 * 4096, "Page", 4)]
    regions = [{"start": r[0]["start"], "end": r[-1]["end"], "bytes": sum(x["bytes"] for x in r),
                "blocks": sum(x["blocks"] for x in r), "runs": r} for r in (heap, pages)]
    return {"time_s": time_s, "regions": regions, "mappings": [{"start": 0x10000, "end": 0x40000, "path": "[heap]"}]}


def test_memory_view_as_the_page_draws_it():
    from heaptype.present.html import memory

    types: dict[str, int] = {}
    shot = memory.page_view(core_view(), types)
    assert memory.types_in_order(types) == ["Node", "(untyped)", "Page"]
    assert (shot["blocks"], shot["bytes"]) == (114, 6400 + 640 + 4 * 4096)
    assert [(r["start"], r["path"]) for r in shot["regions"]] == [(0x10000, "[heap]"), (0x7f0000000000, "")]
    assert shot["runs"] == [[0, 0, 6400, 0], [0, 0x10000, 640, 1], [1, 0, 4 * 4096, 2]]


def test_memory_view_cells_when_runs_are_too_many(monkeypatch):
    from heaptype.present.html import memory

    monkeypatch.setattr(memory, "MAX_RUNS", 4)
    runs = [{"start": 0x1000 + 32 * k, "end": 0x1020 + 32 * k, "type": "AB"[k % 2], "blocks": 1, "bytes": 32}
            for k in range(64)]
    view = {"time_s": 0.0, "regions": [{"start": 0x1000, "end": 0x1800, "bytes": 2048, "blocks": 64, "runs": runs}]}
    shot = memory.page_view(view, {})
    assert len(shot["runs"]) == 4 and sum(run[2] for run in shot["runs"]) == 64 * 32


def test_memory_view_says_why_it_is_missing(tmp_path):
    from heaptype.present.html.memory import memory_json

    plain = synthetic_profile(tmp_path / "plain.htp", functions=["f()"], types=["T"])
    assert "recorded without addresses" in memory_json(plain, ["peak"])["reason"]


def test_memory_view_draws_blocks_by_type(browser, tmp_path):
    """Thirty blocks at known addresses, all live at the peak: 10 of 64 B, 10 of 128 B."""
    from heaptype.present.html import report_html, write_html

    profile = synthetic_profile(tmp_path / "addressed.htp", functions=["f()", "g()"], types=["Node", "Page"],
                                addresses=True)
    opened = open_page(browser, write_html(report_html(profile), tmp_path / "memory.html"))
    opened.page.click("[data-tab=memory]")
    title = opened.page.text_content("#panel-memory .note")
    opened.screenshot("memory-view")
    assert "20 blocks, 1,920 B" in title and opened.errors == []
    assert set(opened.texts("#panel-memory .memory-legend .legend-item > span:last-child")) == {"Node", "Page"}
    painted = opened.page.evaluate("""() => {
        const c = document.getElementById('memory-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] !== 0xf4 || d[i + 1] !== 0xf4) n++;
        return n; }""")
    assert painted > 0
