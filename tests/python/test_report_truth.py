"""Reports of compiled programs against their known figures (tests/cpp/lifetimes.cpp,
tests/cpp/deep_recursion.cpp), through the command line as users run it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading

import pytest

import heaptype

from callpath_programs import callpath_programs  # noqa: F401 (fixture)


def heaptype_command() -> list[str]:
    path = shutil.which("heaptype")
    return [path] if path else [sys.executable, "-m", "heaptype"]


def cli(*args: str) -> str:
    done = subprocess.run([*heaptype_command(), *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def cli_bytes(*args: str) -> bytes:
    done = subprocess.run([*heaptype_command(), *args], capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


# --- lifetimes.cpp: f() x100, g(10) held, h() 50 temporaries, leak() ---------------------------

@pytest.fixture(scope="module")
def lifetimes(callpath_programs):
    return str(callpath_programs.profile_path("lifetimes"))


def test_function_peaks_are_peaks_not_sums(lifetimes):
    """main calls f() 100 times (1 KiB made and freed each time), then g() (ten 1 KiB
    held at once): main's peak of Kilo is 10 KiB; a sum of f's and g's would be 11 KiB."""
    report = json.loads(cli("report", lifetimes, "--by", "function", "--type", "Kilo", "--format", "json"))
    functions = {f["function"]: f for f in report["functions"]}
    assert functions["main"]["total"]["peak_bytes"] == 10240
    assert functions["main"]["total"]["allocations"] == 110
    assert functions["f()"]["total"]["peak_bytes"] == functions["f()"]["self"]["peak_bytes"] == 1024
    assert functions["g(int)"]["total"]["peak_bytes"] == 10240
    assert functions["f()"]["self"]["temporary_allocations"] == 100


def test_call_tree_json_carries_exact_peaks(lifetimes):
    report = json.loads(cli("report", lifetimes, "--by", "callpath", "--format", "json"))
    (main,) = [node for node in report["tree"] if node["frame"] == "main"]
    assert set(main) >= {"frame", "allocations", "bytes", "peak_bytes", "live_bytes", "children"}
    children = {c["frame"]: c for c in main["children"]}
    kilo_f = next(c for c in children["f()"]["children"] if c.get("type") == "Kilo")
    kilo_g = next(c for c in children["g(int)"]["children"] if c.get("type") == "Kilo")
    assert (kilo_f["allocations"], kilo_f["peak_bytes"], kilo_f["temporary_allocations"]) == (100, 1024, 100)
    assert (kilo_g["allocations"], kilo_g["peak_bytes"], kilo_g["live_bytes"]) == (10, 10240, 0)
    leaked = next(c for c in children["leak()"]["children"] if c.get("type") == "Leaked")
    assert (leaked["allocations"], leaked["live_bytes"], leaked["live_blocks"]) == (3, 144, 3)


def test_types_and_temporaries(lifetimes):
    rows = {r["label"]: r for r in json.loads(cli("report", lifetimes, "--format", "json"))["rows"]}
    assert (rows["Kilo"]["peak_bytes"], rows["Kilo"]["temporary_allocations"]) == (10240, 100)
    assert (rows["Quarter"]["allocations"], rows["Quarter"]["temporary_allocations"]) == (50, 50)
    assert (rows["Leaked"]["live_bytes"], rows["Leaked"]["temporary_allocations"]) == (144, 0)


def test_function_filter_keeps_what_has_it_on_the_path(lifetimes):
    rows = {r["label"]: r for r in json.loads(cli("report", lifetimes, "--function", "g*", "--format", "json"))["rows"]}
    assert {label: r["allocations"] for label, r in rows.items()} == {"Kilo": 10, "(untyped)": 1}  # + g's malloc


# --- call paths 40,000 frames deep -------------------------------------------------------------

def nested_depth(text: str) -> int:
    """How deep the "children" lists of a JSON report nest, without parsing it."""
    depth = best = 0
    for token in re.finditer(r'"children": \[|\]', text[text.index('"tree": '):]):
        if token.group(0) == "]":
            depth -= 1
        else:
            depth += 1
            best = max(best, depth)
    return best


def parse_deep_json(text: str):
    """json.loads recurses once per level of nesting: give it a stack to match."""
    result = {}
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1_000_000)
    threading.stack_size(1 << 30)
    try:
        worker = threading.Thread(target=lambda: result.setdefault("value", json.loads(text)))
        worker.start()
        worker.join()
    finally:
        threading.stack_size(0)
        sys.setrecursionlimit(old_limit)
    return result["value"]


def check_every_view(path: str, depth: int, leaf_type: str) -> None:
    functions = json.loads(cli("report", path, "--by", "function", "--format", "json"))
    assert functions["functions"]
    text = cli("report", path, "--by", "callpath", "--format", "json")
    assert nested_depth(text) >= depth
    assert parse_deep_json(text)["by"] == "callpath"
    tree_text = cli("report", path, "--by", "callpath")
    assert leaf_type in tree_text
    assert max(int(m) for m in re.findall(r"\[(\d+)\] ", tree_text)) >= depth - 2
    assert cli("report", path, "--by", "callpath", "--bottom-up", "--top", "2")
    assert leaf_type in cli("report", path)
    assert cli("report", path, "--by", "thread")
    folded = cli("export", path, "--format", "folded")
    deepest = max(folded.splitlines(), key=lambda line: line.count(";"))
    assert deepest.count(";") >= depth - 1
    assert cli_bytes("export", path, "--format", "pprof")[:2] == b"\x1f\x8b"
    assert cli("export", path, "--format", "pprof-text").startswith("heap profile: ")


def test_every_view_of_a_40000_frame_mutual_recursion(tmp_path):
    """A synthetic profile (names unknown: every frame is an address) whose paths run
    40,000 frames through two alternating functions."""
    from heaptype import _core

    b = _core.ProfileBuilder()
    b.thread(1, 1, "main")
    node = 0
    for level in range(40_000):
        node = b.node(1, node, 0x1000 + 0x100 * (level % 2), 0x1010 + 0x100 * ((level + 1) % 2))
    for site, size in enumerate((32, 64)):
        b.site(1, size, 1, 0xA0, 0x1020, node if site == 0 else node // 2)
    for t in range(1, 11):
        b.alloc(1, t, t % 2)
    path = tmp_path / "deep.htp"
    path.write_bytes(b.finish())
    check_every_view(str(path), 40_000, "unknown type 0xa0")


def test_every_view_of_a_compiled_deep_recursion(callpath_programs):
    """deep_recursion.cpp recurses 40,000 frames; the runtime's shadow stack records
    the outermost 1,024 of them, and the views must carry what it recorded."""
    path = str(callpath_programs.profile_path("deep"))
    check_every_view(path, 1_000, "Bottom")
    functions = json.loads(cli("report", path, "--by", "function", "--type", "Level", "--format", "json"))
    assert {f["function"]: f["total"]["allocations"] for f in functions["functions"]}["ping(int)"] == 4


# --- time and questions (lifetimes.cpp) ------------------------------------------------------------

def test_timeline_reaches_the_exact_peaks(lifetimes):
    timeline = json.loads(cli("timeline", lifetimes, "--format", "json"))
    kilo = next(s for s in timeline["series"] if s["name"] == "Kilo")
    assert max(kilo["bytes"]) == 10240
    stacked = [sum(s["bytes"][i] for s in timeline["series"]) for i in range(len(timeline["times_s"]))]
    assert max(stacked) == timeline["peak_bytes"] == max(timeline["totals"])
    assert len(timeline["times_s"]) <= 2000 and timeline["times_s"] == sorted(timeline["times_s"])
    assert timeline["times_s"][stacked.index(max(stacked))] == pytest.approx(timeline["peak_time_s"])
    text = cli("timeline", lifetimes, "--top", "3")
    assert "Kilo" in text and "peak 10 KiB" in text


def test_snapshot_at_the_peak(lifetimes):
    rows = {r["label"]: r for r in json.loads(cli("report", lifetimes, "--type", "Kilo", "--at", "peak",
                                                  "--format", "json"))["rows"]}
    assert (rows["Kilo"]["live_bytes"], rows["Kilo"]["live_blocks"]) == (10240, 10)
    assert "live at peak" in cli("report", lifetimes, "--type", "Kilo", "--at", "peak")


def test_leaks_show_the_leaking_function(lifetimes):
    report = json.loads(cli("leaks", lifetimes, "--type", "Leaked", "--format", "json"))
    (leak,) = report["leaks"]
    assert (leak["type"], leak["blocks"], leak["bytes"]) == ("Leaked", 3, 144)
    assert leak["stack"][:2] == ["main", "leak()"]
    assert "leak()" in cli("leaks", lifetimes)


def test_untyped_blocks_by_the_function_that_called_the_allocator(lifetimes):
    """g(int) mallocs its array of ten pointers (80 B): the one untyped block, named by
    its caller in the JSON report; the text report names callers only when untyped
    blocks are a large share of the bytes (here, once the view keeps only them)."""
    report = json.loads(cli("report", lifetimes, "--format", "json"))
    assert [(c["function"], c["allocations"], c["bytes"], c["live_bytes"]) for c in report["untyped_callers"]] == \
        [("g(int)", 1, 80, 0)]
    assert "called the allocator" not in cli("report", lifetimes)
    assert "(untyped) 100.0% of the bytes, by the function that called the allocator: g(int) 100.0%" in \
        cli("report", lifetimes, "--type", "(untyped)")


# --- leaks_merged.cpp: live blocks of two sites and four threads on three call paths ------------

def _leak_figures(rows) -> set:
    return {(r.path, r.type_label, r.live_blocks, r.live_bytes) for r in rows}


def test_leaks_merge_sites_and_threads_by_function_names(callpath_programs):
    """Blocks live at exit from two new-expressions in hold(int), called by three
    threads and by main: one row per call path of function names (leaks_merged.cpp)."""
    path = str(callpath_programs.profile_path("leaks_merged"))
    leaks = json.loads(cli("leaks", path, "--type", "Held", "--format", "json"))["leaks"]
    by_start = {"main" if r["stack"][0] == "main" and r["stack"][1] == "hold(int)" else
                "main > worker" if r["stack"][0] == "main" else "threads": r for r in leaks}
    assert sorted(by_start) == ["main", "main > worker", "threads"], leaks
    assert (by_start["threads"]["blocks"], by_start["threads"]["bytes"]) == (15, 600)
    assert by_start["threads"]["stack"][-2:] == ["worker()", "hold(int)"]
    assert (by_start["main > worker"]["blocks"], by_start["main > worker"]["bytes"]) == (5, 200)
    assert by_start["main > worker"]["stack"] == ["main", "worker()", "hold(int)"]
    assert (by_start["main"]["blocks"], by_start["main"]["bytes"]) == (3, 120)
    assert "Spare" not in cli("leaks", path)


def test_leaks_without_the_call_tree_equal_the_trees_leaves(callpath_programs):
    """The leaks view names only the paths with live blocks after a pass without the
    call tree; a pass with the tree gives the same rows. And call_paths(), counted on
    the tree's leaves alone, gives every figure of the full tree's leaves, peaks too."""
    path = callpath_programs.profile_path("leaks_merged")
    without_tree = heaptype.load(path)
    live = without_tree.live_call_paths()
    with_tree = heaptype.load(path)
    with_tree.analysis(call_tree=True)
    assert _leak_figures(live) == _leak_figures(with_tree.live_call_paths())
    at_peak, at_peak_with_tree = heaptype.load(path).at("peak"), heaptype.load(path).at("peak")
    at_peak_with_tree.analysis(call_tree=True)
    assert _leak_figures(at_peak.live_call_paths()) == _leak_figures(at_peak_with_tree.live_call_paths())
    assert len(live) >= 3 and all(r.live_blocks > 0 for r in live)
    leaves = heaptype.load(path).call_paths()
    assert [r.as_dict() for r in leaves] == [r.as_dict() for r in with_tree.call_paths()]
    (main_worker,) = [r for r in leaves if r.path == ("main", "worker()", "hold(int)") and r.type_label == "Held"]
    assert (main_worker.allocations, main_worker.peak_bytes, main_worker.live_bytes) == (9, 360, 200)


def test_diff_of_runs_holding_10_and_20(callpath_programs):
    ten = str(callpath_programs.profile_path("lifetimes", "auto", ("10",)))
    twenty = str(callpath_programs.profile_path("lifetimes", "auto", ("20",)))
    report = json.loads(cli("diff", ten, twenty, "--format", "json"))
    kilo = next(r for r in report["rows"] if r["type"] == "Kilo")
    assert (kilo["a"]["peak_bytes"], kilo["b"]["peak_bytes"], kilo["delta"]["peak_bytes"]) == (10240, 20480, 10240)
    assert kilo["growth_percent"] == 100.0
    over = subprocess.run([*heaptype_command(), "diff", ten, twenty, "--threshold", "50"], capture_output=True)
    assert over.returncode == 1
    within = subprocess.run([*heaptype_command(), "diff", ten, twenty, "--threshold", "150", "--type", "Kilo"],
                            capture_output=True)
    assert within.returncode == 0, within.stdout
    by_function = json.loads(cli("diff", ten, twenty, "--by", "function", "--format", "json"))
    assert next(r for r in by_function["rows"] if r["name"] == "g(int)")["delta"]["allocations"] == 10


def test_one_filter_model_everywhere(lifetimes):
    sized = {r["label"] for r in json.loads(cli("report", lifetimes, "--size", "200:300", "--format", "json"))["rows"]}
    assert sized == {"Quarter"}
    live = {r["label"] for r in json.loads(cli("report", lifetimes, "--live", "--format", "json"))["rows"]}
    assert "Leaked" in live and "Kilo" not in live
    threads = json.loads(cli("report", lifetimes, "--by", "thread", "--format", "json"))["threads"]
    name = threads[0]["name"]
    by_name = json.loads(cli("report", lifetimes, "--thread", name, "--by", "thread", "--format", "json"))
    assert [t["thread"] for t in by_name["threads"] if t["allocations"]] == [threads[0]["thread"]]
    functions = json.loads(cli("timeline", lifetimes, "--function", "h()", "--format", "json"))
    assert {s["name"] for s in functions["series"]} == {"Quarter"}
    assert cli("export", lifetimes, "--format", "folded", "--function", "f()").strip().endswith("Kilo 102400")


def test_memory_view_at_the_peak(callpath_programs):
    path = str(callpath_programs.profile_path("lifetimes", addresses=True))
    view = json.loads(cli("memory", path, "--type", "Kilo", "--at", "peak", "--format", "json"))
    runs = [run for region in view["regions"] for run in region["runs"]]
    assert {run["type"] for run in runs} == {"Kilo"}
    assert sum(run["blocks"] for run in runs) == 10 and sum(run["bytes"] for run in runs) == 10240
    blocks = sorted(run["start"] for run in runs)
    assert all(a < b for a, b in zip(blocks, blocks[1:]))
    at_exit = json.loads(cli("memory", path, "--format", "json"))
    leaked = [run for region in at_exit["regions"] for run in region["runs"] if run["type"] == "Leaked"]
    assert sum(run["blocks"] for run in leaked) == 3
    plain = subprocess.run([*heaptype_command(), "memory", str(callpath_programs.profile_path("lifetimes"))],
                           capture_output=True, text=True)
    assert plain.returncode == 2 and "HEAPTYPE_ADDRESSES=1" in plain.stderr


def test_size_and_lifetime_histograms(callpath_programs):
    path = str(callpath_programs.profile_path("lifetimes", addresses=True))
    rows = {r["label"]: r for r in json.loads(cli("report", path, "--format", "json"))["rows"]}
    assert rows["Kilo"]["sizes"] == [{"up_to": 1024, "allocations": 110}]
    assert rows["Quarter"]["sizes"] == [{"up_to": 256, "allocations": 50}]
    assert rows["Leaked"]["sizes"] == [{"up_to": 64, "allocations": 3}]
    lifetimes = rows["Leaked"]["lifetimes"]
    assert lifetimes["never freed"] == 3 and sum(lifetimes.values()) == 3
    assert sum(rows["Kilo"]["lifetimes"].values()) == 110 and rows["Kilo"]["lifetimes"]["never freed"] == 0
    plain = json.loads(cli("report", str(callpath_programs.profile_path("lifetimes")), "--format", "json"))
    assert all(r["lifetimes"] is None for r in plain["rows"])


def test_lifetime_filter_on_a_compiled_program(callpath_programs):
    """lifetimes.cpp's phases are 3 ms apart: f()'s Kilo and h()'s Quarter die at
    once, g()'s Kilo live two phases (6 ms and more), Leaked never dies. Whatever the
    split, the short-lived and the long-lived blocks add up to all of them."""
    path = str(callpath_programs.profile_path("lifetimes", addresses=True))

    def rows(*args):
        report = json.loads(cli("report", path, *args, "--format", "json"))
        return {r["label"]: r["allocations"] for r in report["rows"] if r["allocations"]}

    everything = rows()
    short, long = rows("--lifetime", ":2ms"), rows("--lifetime", "2001us:")
    assert {k: short.get(k, 0) + long.get(k, 0) for k in everything} == everything
    assert (short["Kilo"], short["Quarter"], "Leaked" in short) == (100, 50, False)
    assert (long["Kilo"], long["Leaked"], "Quarter" in long) == (10, 3, False)
    for split_us in (0, 500, 5000):
        low, high = rows("--lifetime", f":{split_us}us"), rows("--lifetime", f"{split_us + 1}us:")
        assert {k: low.get(k, 0) + high.get(k, 0) for k in everything} == everything
    plain = subprocess.run([*heaptype_command(), "report", str(callpath_programs.profile_path("lifetimes")),
                            "--lifetime", ":1ms"], capture_output=True, text=True)
    assert plain.returncode == 2 and "HEAPTYPE_ADDRESSES=1" in plain.stderr and "Traceback" not in plain.stderr
    bad = subprocess.run([*heaptype_command(), "report", path, "--lifetime", "1parsec:"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--lifetime" in bad.stderr


@pytest.mark.parametrize("name", ["deep", "deep-frame-pointer"])
def test_stack_peak_of_a_deep_recursion_in_every_run(callpath_programs, tmp_path, name):
    """A recursion 20,000 frames deep that allocates at its bottom went at least 20,000
    return addresses deep, in every one of 20 runs (the deepest tick is the last one:
    it must not be lost when the profile is finished), with -finstrument-functions
    and with frame pointers walked at each allocation."""
    program = callpath_programs.program(name)
    peaks = []
    for run in range(20):
        output = tmp_path / f"{run}.htp"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
        done = subprocess.run([str(program), "20000"], env={**env, "HEAPTYPE_OUTPUT": str(output)},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        peaks.append(heaptype.load(output).totals.stack_peak_bytes)
    assert all(20_000 * 16 <= peak <= 8 << 20 for peak in peaks), peaks


def test_stack_depth_over_time(callpath_programs, lifetimes):
    """deep_recursion.cpp recurses 40,000 frames before it allocates: its stack went
    at least 40,000 return addresses deep, and no deeper than the 8 MiB stack limit."""
    deep = json.loads(cli("timeline", str(callpath_programs.profile_path("deep")), "--format", "json"))
    assert 40_000 * 16 <= deep["stack_peak_bytes"] <= 8 << 20
    assert max(deep["stack_bytes"]) == deep["stack_peak_bytes"]
    shallow = json.loads(cli("timeline", lifetimes, "--format", "json"))
    assert 0 < shallow["stack_peak_bytes"] < 64 << 10
    assert "Stack depth of all threads" in cli("timeline", str(callpath_programs.profile_path("deep")))


def test_overhead_line_tells_headers_from_blocks_the_profile_does_not_count(callpath_programs, tmp_path):
    """untracked_live.cpp: 100 blocks made before recording started and 3 after, all
    live at exit. The registry holds 103 headers (1,648 B); the overhead line gives the
    3 counted blocks their 16 B each and names the other 1,600 B, rather than dividing
    everything by the 3 (549 B per block)."""
    program = callpath_programs.program("untracked_live")
    output = tmp_path / "untracked.htp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    env.update(HEAPTYPE_OUTPUT=str(output), HEAPTYPE_START="stopped")
    done = subprocess.run([str(program)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(str(output))
    assert profile.totals.live_blocks == 3
    assert profile.registry_bytes_at_exit() == 103 * 16
    (overhead,) = [line for line in cli("report", str(output)).splitlines() if line.strip().startswith("overhead")]
    assert overhead.endswith("1.61 KiB beside the blocks live at exit (16 B for each of the 3, 1.56 KiB for blocks "
                             "the profile does not count, over-aligned padding and tagged memory)"), overhead


def test_overhead_line_of_counted_blocks_only(lifetimes):
    (overhead,) = [line for line in cli("report", lifetimes).splitlines() if line.strip().startswith("overhead")]
    assert overhead.endswith("(16 B per block)"), overhead


def test_timeline_rows_name_each_groups_own_peak(cpp_programs, tmp_path):
    """A timeline's series hold each group's bytes at the moments the total was highest
    (so that they stack up to it); a block that lives between those moments is 0 there.
    The row named its peak from those points: "peak 0 B" beside the report's 1 KiB
    (tests/cpp/short_lived.cpp; a forked nginx worker's stdio buffer showed so). The peak
    is the group's own."""
    from conftest import run_profiled

    output = tmp_path / "short.htp"
    done = run_profiled(cpp_programs.program("short_lived"), output)
    assert done.returncode == 0, done.stderr
    assert heaptype.load(output).type_row("Small").peak_bytes == 1024
    timeline = json.loads(cli("timeline", str(output), "--format", "json"))
    small = next(s for s in timeline["series"] if s["name"] == "Small")
    assert max(small["bytes"]) == 0 and small["peak_bytes"] == 1024
    row = next(line for line in cli("timeline", str(output)).splitlines() if line.strip().startswith("Small "))
    assert row.endswith("| peak 1 KiB"), row
