"""The analysis core against a brute-force reference, on generated profiles.

Hundreds of synthetic heap histories (tests/python/synthetic.py): threads handing
blocks to each other, blocks typed late by their own or another thread, chunks of
different threads interleaved in any order in the file, walked and hooked calling
contexts. The core's figures for every type, thread, function (self and total),
call-tree node and (path, type) leaf must equal the reference's, peaks and their
times included: a group's peak is the most bytes that group held live at once.
"""

from __future__ import annotations

import random
import sys
import threading

import pytest

from heaptype import _core
from synthetic import PathIds, Reference, Scenario, folded_ops, generate, write

FIGURES = ("allocations", "objects", "bytes", "peak_bytes", "live_bytes", "live_blocks", "temporary_allocations")


def core_key(f) -> tuple:
    return tuple(getattr(f, name) for name in FIGURES)


def analyse(sc: Scenario, data: bytes, tmp_path, **options) -> "_core.Analysis":
    path = tmp_path / "synthetic.htp"
    path.write_bytes(data)
    return _core.Analysis(_core.ProfileFile(str(path)), sc.code_names(), **options)


def tree_figures(root, path_ids: PathIds) -> tuple[dict, dict]:
    """{path number: total figures} and {(path number, type): figures} of a merged tree."""
    nodes, leaves = {}, {}
    stack = [(child, 0) for child in root.children]
    while stack:
        node, parent = stack.pop()
        if node.kind == "type":
            leaves[(parent, node.name)] = node.total
            continue
        here = path_ids.child(parent, node.name)
        nodes[here] = node.total
        stack += [(child, here) for child in node.children]
    return nodes, leaves


def assert_matches(ref: Reference, a, *, exact_times: bool = True) -> None:
    t = a.totals
    assert (t.allocations, t.bytes, t.frees, t.unmatched_frees) == (
        ref.totals.allocations, ref.totals.bytes, ref.frees, 0)
    assert core_key(t) == ref.totals.key()
    types = {g.label: g for g in a.types if g.allocations or g.live_blocks}
    assert {label: core_key(g) for label, g in types.items()} == \
        {label: g.key() for label, g in ref.types.items() if g.allocations or g.live_blocks}
    threads = {g.thread: core_key(g) for g in a.threads if g.allocations or g.live_blocks}
    assert threads == {t: g.key() for t, g in ref.threads.items() if g.allocations or g.live_blocks}
    functions = {f.function: (core_key(f.self), core_key(f.total)) for f in a.functions}
    expected = {name: (ref.function_self[name].key(), ref.function_total[name].key())
                for name in set(ref.function_total) | set(ref.function_self)}
    assert {k: v for k, v in functions.items() if v[1][0] or v[1][5]} == \
        {k: v for k, v in expected.items() if v[1][0] or v[1][5]}
    nodes, leaves = tree_figures(a.tree, ref.path_ids)
    assert {p: core_key(f) for p, f in nodes.items() if f.allocations or f.live_blocks} == \
        {p: g.key() for p, g in ref.nodes.items() if g.allocations or g.live_blocks}
    assert {k: core_key(f) for k, f in leaves.items() if f.allocations or f.live_blocks} == \
        {k: g.key() for k, g in ref.leaves.items() if g.allocations or g.live_blocks}
    if exact_times:
        assert t.peak_time_us == ref.totals.peak_time
        assert {g.label: g.peak_time_us for g in types.values()} == \
            {label: g.peak_time for label, g in ref.types.items() if g.allocations or g.live_blocks}


@pytest.mark.parametrize("seed", range(240))
def test_generated_histories_match_the_reference(seed, tmp_path):
    rng = random.Random(seed)
    sc = generate(rng, walked=seed % 3 == 2)
    a = analyse(sc, write(sc, rng), tmp_path, call_tree=True, functions=True, infer=False)
    assert_matches(Reference(sc), a)


def reference_timeline(sc: Scenario, points: int, by: str) -> list[tuple[int, int, dict]]:
    """The timeline by brute force: the moments after each event, the bucket width the
    core ends with (the narrowest power of two that fits the run in ``points``), and
    per bucket the first moment of its highest total (a bucket opens at its start with
    what was live before its first event)."""
    key = (lambda thread, site: sc.type_label(thread, site)) if by == "type" else \
        (lambda thread, site: sc.base_site(thread, site)[0])
    live: dict = {}
    moments = []  # (time, total, {group: bytes})
    at: dict = {}
    for op in folded_ops(sc):
        where = (op.stream, op.site)
        if op.kind == "alloc":
            at[op.block] = where
            live[key(*where)] = live.get(key(*where), 0) + sc.size(*where)
        elif op.kind == "free":
            live[key(*at[op.block])] -= sc.size(*at[op.block])
        else:
            live[key(*at[op.block])] -= sc.size(*at[op.block])
            at[op.block] = where
            live[key(*where)] = live.get(key(*where), 0) + sc.size(*where)
        moments.append((op.time, sum(live.values()), dict(live)))
    last = moments[-1][0]
    width = 1
    while last // width >= points:
        width *= 2
    buckets: dict[int, tuple] = {}
    before = (moments[0][0], 0, {})
    for time, total, state in moments:
        k = time // width
        if k not in buckets:
            # skipped buckets and this one open with what was live before the event
            for skipped in range(max(buckets, default=k - 1) + 1, k):
                buckets[skipped] = (skipped * width, before[1], before[2])
            buckets[k] = (k * width, before[1], before[2])
        if total > buckets[k][1]:
            buckets[k] = (time, total, state)
        before = (time, total, state)
    return [buckets[k] for k in sorted(buckets)]


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("points", [7, 64])
@pytest.mark.parametrize("by", ["type", "thread"])
def test_timeline_points_are_the_buckets_highest_moments(seed, points, by, tmp_path):
    """Every group is followed in one pass and stored only where it changed; buckets
    double in width as the run grows. Each point must still be the exact state of
    the first moment its bucket was highest: its time, its total, every group's bytes."""
    rng = random.Random(7000 + seed)
    sc = generate(rng, threads=1 + seed % 4)
    a = analyse(sc, write(sc, rng), tmp_path, infer=False, timeline=by, timeline_points=points)
    groups = a.types if by == "type" else a.threads
    names = [g.label if by == "type" else g.thread for g in groups]
    raw = a.timeline([g.id for g in groups])
    expected = reference_timeline(sc, points, by)
    first = len(raw["totals"]) - len(expected)  # buckets before the first event hold nothing
    assert first >= 0 and all(t == 0 for t in raw["totals"][:first])
    assert raw["totals"][first:] == [total for _, total, _ in expected]
    assert raw["times_us"][first:] == [time for time, _, _ in expected]
    for name, values in zip(names, raw["series"]):
        assert values[first:] == [state.get(name, 0) for _, _, state in expected], name
    assert all(v == 0 for v in raw["other"])
    assert max(raw["totals"]) == a.selected.peak_bytes


GROUPINGS = ("type", "thread", "function", "callpath")


def timeline_by_name(a, by: str) -> dict:
    """A pass's timeline of one grouping with every group asked for, the series by
    group name (ids may differ between passes, names may not)."""
    from heaptype.analyze.profile import _timeline_groups

    groups = _timeline_groups(a, by)
    raw = a.timeline([g[0] for g in groups], by)
    raw["series"] = {name: values for (_, name, _), values in zip(groups, raw["series"])}
    return raw


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("points", [5, 64])
def test_one_pass_follows_each_grouping_as_its_own_pass_would(seed, points, tmp_path):
    """The four groupings followed together on one pass's events: each timeline must be
    the one a pass of its own makes, point by point and group by group, with the call
    tree the function and callpath groupings need and the walked or hooked paths."""
    rng = random.Random(9000 + seed)
    sc = generate(rng, threads=1 + seed % 4, walked=seed % 2 == 1)
    data = write(sc, rng)
    together = analyse(sc, data, tmp_path, infer=False, timeline=list(GROUPINGS), timeline_points=points)
    for by in GROUPINGS:
        alone = analyse(sc, data, tmp_path, infer=False, timeline=by, timeline_points=points)
        expected = timeline_by_name(alone, by)
        assert any(any(values) for values in expected["series"].values()), by  # something to compare
        assert timeline_by_name(together, by) == expected, by
    assert core_key(together.selected) == core_key(alone.selected)


def test_a_grouping_not_followed_has_no_timeline(tmp_path):
    rng = random.Random(9100)
    sc = generate(rng, threads=2)
    a = analyse(sc, write(sc, rng), tmp_path, infer=False, timeline=["thread", "type"])
    assert a.timeline([], "function") is None and a.timeline([], "callpath") is None
    assert a.timeline([], "") == a.timeline([], "thread")  # the first asked for
    assert analyse(sc, write(sc, rng), tmp_path, infer=False).timeline() is None
    with pytest.raises(ValueError, match="unknown timeline grouping size"):
        analyse(sc, write(sc, rng), tmp_path, timeline=["type", "size"])


@pytest.mark.parametrize("seed", range(60))
def test_coarse_clock_keeps_counts_exact(seed, tmp_path):
    """Many events per clock tick across threads: the merge cannot know their order,
    but every count, byte and live figure stays exact, and peaks stay bounded."""
    rng = random.Random(1000 + seed)
    sc = generate(rng, threads=4)
    a = analyse(sc, write(sc, rng, tick=8), tmp_path, call_tree=True, functions=True, infer=False)
    ref = Reference(sc, tick=8)
    assert (a.totals.allocations, a.totals.bytes, a.totals.frees, a.totals.unmatched_frees) == (
        ref.totals.allocations, ref.totals.bytes, ref.frees, 0)
    types = {g.label: g for g in a.types}
    for label, g in ref.types.items():
        if g.allocations or g.live_blocks:
            got = types[label]
            assert (got.allocations, got.objects, got.bytes, got.live_bytes, got.temporary_allocations) == (
                g.allocations, g.objects, g.bytes, g.live_bytes, g.temporary)


@pytest.mark.parametrize("seed", range(30))
def test_many_threads_within_one_tick_keep_counts_exact(seed, tmp_path):
    """Eight threads freeing each other's blocks, hundreds of events per clock tick: a
    free may be counted against another block of its site (frees name sites), and
    the merge may have to break a wait cycle; no count may suffer. Temporaries follow the
    order the merge gives one tick's events (the reference models it: synthetic.merged_order)."""
    rng = random.Random(3000 + seed)
    sc = generate(rng, threads=8, operations=3000, moves=seed % 2 == 0)
    a = analyse(sc, write(sc, rng, tick=500, flush_chance=0.02), tmp_path, infer=False)
    ref = Reference(sc, tick=500)
    assert (a.totals.allocations, a.totals.frees, a.totals.unmatched_frees, a.totals.live_bytes) == (
        ref.totals.allocations, ref.frees, 0, ref.totals.live_bytes)
    assert {g.label: (g.allocations, g.objects, g.bytes, g.live_bytes, g.temporary_allocations)
            for g in a.types if g.allocations or g.live_blocks} == \
        {label: (g.allocations, g.objects, g.bytes, g.live_bytes, g.temporary)
         for label, g in ref.types.items() if g.allocations or g.live_blocks}


def assert_tree_properties(a) -> None:
    """peak <= bytes allocated; a child never exceeds its parent; a function's total
    peak lies between the largest peak of its tree nodes and their sum. (A block typed
    late leaves its untyped group, whose peak keeps the moment it was there: these
    histories have no late types.)"""
    by_function: dict[str, list] = {}
    stack = [(a.tree, None)]
    while stack:
        node, parent = stack.pop()
        f = node.total
        assert f.peak_bytes <= f.bytes and f.live_bytes <= f.peak_bytes
        if parent is not None:
            assert f.allocations <= parent.allocations and f.peak_bytes <= parent.peak_bytes
            assert f.bytes <= parent.bytes
        if node.kind == "frame":
            by_function.setdefault(node.name, []).append(node)
        stack += [(child, f) for child in node.children]
    for group in a.functions:
        nodes = by_function.get(group.function, [])
        outermost = [n for n in nodes if not _has_ancestor_named(n, group.function)]
        peaks = [n.total.peak_bytes for n in outermost]
        assert max(peaks, default=0) <= group.total.peak_bytes <= sum(peaks)
        assert group.total.allocations == sum(n.total.allocations for n in outermost)


def _has_ancestor_named(node, name: str) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.kind == "frame" and parent.name == name:
            return True
        parent = parent.parent
    return False


@pytest.mark.parametrize("tick", [1, 8])
@pytest.mark.parametrize("seed", range(40))
def test_tree_properties_hold(seed, tick, tmp_path):
    rng = random.Random(5000 + seed)
    sc = generate(rng, threads=3, operations=400, moves=False)
    a = analyse(sc, write(sc, rng, tick=tick), tmp_path, call_tree=True, functions=True, infer=False)
    assert_tree_properties(a)


# --- the scenario: a function's peak is a peak, not a sum -----------------------------

def f_then_g(tmp_path):
    """main calls f() 100 times (one 1 KiB object made and freed each time), then g()
    (ten 1 KiB objects held at once): main's true peak is 10 KiB, not 11 KiB."""
    b = _core.ProfileBuilder()
    b.thread(1, 100, "main")
    main = b.node(1, 0, 0x1000, 0)
    f = b.node(1, main, 0x2000, 0x1010)
    g = b.node(1, main, 0x3000, 0x1020)
    site_f = b.site(1, 1024, 1, 0xAA, 0x2010, f)
    site_g = b.site(1, 1024, 1, 0xAA, 0x3010, g)
    t = 0
    for _ in range(100):
        t += 1
        b.alloc(1, t, site_f)
        t += 1
        b.free_last(1, t)
    for _ in range(10):
        t += 1
        b.alloc(1, t, site_g)
    for _ in range(10):
        t += 1
        b.free(1, t, site_g)
    path = tmp_path / "fg.htp"
    path.write_bytes(b.finish())
    names = _core.TableCodeNames()
    for entry, name in ((0x1000, "main"), (0x2000, "f()"), (0x3000, "g()")):
        names.add_function(entry, name)
    for site, entry in ((0x1010, 0x1000), (0x1020, 0x1000), (0x2010, 0x2000), (0x3010, 0x3000)):
        names.add_call_site(site, {0x1000: "main", 0x2000: "f()", 0x3000: "g()"}[entry], entry)
    names.add_type(0xAA, "Obj")
    return _core.ProfileFile(str(path)), names


def test_function_peak_is_the_peak_of_its_live_bytes(tmp_path):
    file, names = f_then_g(tmp_path)
    a = _core.Analysis(file, names, call_tree=True, functions=True)
    functions = {g.function: g for g in a.functions}
    assert functions["main"].total.peak_bytes == 10240  # the sum of f's and g's peaks would be 11264
    assert functions["f()"].total.peak_bytes == functions["f()"].self.peak_bytes == 1024
    assert functions["g()"].total.peak_bytes == 10240
    # f's 100 (each freed right away) and g's first free, right after g's tenth allocation at
    # the same site: heaptrack compares sites, not blocks (src/core/temporaries.hpp).
    assert functions["main"].total.temporary_allocations == 101
    assert a.totals.peak_bytes == 10240 and a.totals.peak_time_us == 210
    main = a.tree.child("main")
    assert (main.total.peak_bytes, main.child("f()").total.peak_bytes, main.child("g()").total.peak_bytes) == (
        10240, 1024, 10240)


# --- deep call paths --------------------------------------------------------------------------

def run_with_big_stack(fn):
    """json.loads recurses once per level of a nested document: give it room."""
    result = {}
    limit = sys.getrecursionlimit()
    threading.stack_size(512 * 1024 * 1024)
    try:
        sys.setrecursionlimit(200_000)
        worker = threading.Thread(target=lambda: result.setdefault("value", fn()))
        worker.start()
        worker.join()
    finally:
        sys.setrecursionlimit(limit)
        threading.stack_size(0)
    return result["value"]


def test_mutual_recursion_40000_frames_deep(tmp_path):
    rng = random.Random(7)
    sc = generate(rng, threads=1, operations=200, deep=40_000)
    a = analyse(sc, write(sc, rng), tmp_path, call_tree=True, functions=True, bottom_up=True, infer=False)
    ref = Reference(sc)
    assert_matches(ref, a)
    assert max(len(sc.path(t, s)) for t in sc.sites for s in range(len(sc.sites[t]))) >= 40_000
    text = a.tree_json()
    import json

    tree = run_with_big_stack(lambda: json.loads(text))
    depth, node = 0, {"children": tree}
    while node["children"]:
        node = max(node["children"], key=lambda c: c.get("allocations", 0) if "frame" in c else -1)
        depth += 1
    assert depth >= 40_000
    assert a.folded("bytes").count(b"\n") == len([k for k, g in ref.leaves.items() if g.bytes])
    assert len(a.pprof_proto([])) > 40_000
    assert a.pprof_text().startswith(b"heap profile: ")
    bottom = a.bottom_up_tree
    assert sum(c.total.allocations for c in bottom.children) == ref.totals.allocations


# --- files cut short, damaged, hostile ----------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_a_file_cut_anywhere_loads_what_it_holds(seed, tmp_path):
    rng = random.Random(9000 + seed)
    sc = generate(rng, threads=3, operations=300)
    data = write(sc, rng, flush_chance=0.2)
    full = analyse(sc, data, tmp_path, call_tree=True, functions=True, infer=False)
    previous = 0
    for cut in sorted(rng.sample(range(1, len(data)), 40)) + [len(data)]:
        path = tmp_path / f"cut{cut}.htp"
        path.write_bytes(data[:cut])
        file = _core.ProfileFile(str(path))
        if cut < 64:  # inside the header: nothing to read, and it says so
            assert file.damage == "the file ends inside its 64-byte header" and file.dropped_bytes == cut
            continue
        assert (file.damage != "") == (file.dropped_bytes > 0)
        a = _core.Analysis(file, sc.code_names(), call_tree=True, functions=True, infer=False)
        t = a.totals
        assert previous <= t.allocations <= full.totals.allocations
        previous = t.allocations
        assert t.live_bytes >= 0 and all(g.live_bytes >= 0 and g.live_blocks >= 0 for g in a.types)
        assert t.frees + t.unmatched_frees <= full.totals.frees + full.totals.unmatched_frees + t.unmatched_frees
    assert previous == full.totals.allocations


def hostile_file(tmp_path, build) -> str:
    b = _core.ProfileBuilder()
    build(b)
    path = tmp_path / "hostile.htp"
    path.write_bytes(b.finish())
    return str(path)


def events(*values: int) -> bytes:
    out = bytearray()
    for v in values:
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return bytes(out)


SITE = 2 << 2 | 2  # a SITE record's head
FREE_REMOTE = 4 << 2 | 2


@pytest.mark.parametrize("thread", [0xFFFFFFFF, 100_000_000, 2**31 + 5])
def test_huge_thread_numbers_cost_nothing(thread, tmp_path):
    # A site, two allocations at it, a FREE_LAST.
    path = hostile_file(tmp_path, lambda b: b.raw_chunk(4, thread, events(SITE, 16, 1, 0, 0x10, 0, 1, 1, 2)))
    a = _core.Analysis(_core.ProfileFile(path), _core.TableCodeNames())
    assert (a.totals.allocations, a.totals.bytes, a.totals.live_bytes, a.totals.temporary_allocations) == (
        2, 32, 16, 1)
    assert [g.thread for g in a.threads] == [thread]


def test_free_naming_unknown_threads_and_sites_is_unmatched(tmp_path):
    def build(b):
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, 1, FREE_REMOTE, 0xFFFFFFFF, 0, FREE_REMOTE, 1, 7))
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    assert (a.totals.allocations, a.totals.live_bytes, a.totals.unmatched_frees) == (1, 16, 2)


def test_damaged_records_end_the_stream_with_a_warning(tmp_path):
    def build(b):
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, 1, 9 << 1 | 1))  # ALLOC at an undefined site
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    assert a.totals.allocations == 1
    assert any("undefined site 9" in w for w in a.warnings)


def test_names_that_are_not_utf8_are_read(tmp_path):
    def build(b):
        b.program("/bin/caf\xe9", ["caf\xe9"])
        b.raw_chunk(1, 0, b"/tmp/\xff\xfeprog\x00arg-\xe9")
        b.raw_chunk(2, 0, b"400000 401000 0 r-xp /tmp/\xffmod\x00ule.so\n")
        b.raw_chunk(3, 1, b"\x05name-\xe9\xff")
    file = _core.ProfileFile(hostile_file(tmp_path, build))
    assert file.executable == "/tmp/\udcff\udcfeprog" and file.argv == ["arg-\udce9"]
    assert "\udcffmod\x00ule.so" in file.modules
    assert file.threads[0]["name"] == "name-\ufffd\ufffd"


NODE = 3 << 2 | 2
DERIVED_SITE = 5 << 2 | 2
MOVE = 6 << 2 | 2
HUGE_THREADS = [0xFFFFFFFF, 0xFFFFFFFE, 2**31, 100_000_000]


@pytest.mark.parametrize("thread", HUGE_THREADS)
def test_records_naming_huge_threads_are_unmatched_not_crashes(thread, tmp_path):
    # Thread 1 allocates twice; then a remote free, a move and a derived site name a
    # thread the profile never saw (and sites near 2^32): nothing matches them.
    def build(b):
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, 1, 1, FREE_REMOTE, thread, 0xFFFFFFFE,
                                 MOVE, thread, 0, 0, DERIVED_SITE, thread, 0xFFFFFFFE, 0x40, 1, 3))
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    # The free and the move match no block; the derived site's block is not counted:
    # its base is nowhere.
    assert (a.totals.allocations, a.totals.live_bytes, a.totals.unmatched_frees) == (2, 32, 2)
    assert any(f"derives from a site the profile does not define" in w for w in a.warnings)


def test_a_thread_at_the_top_of_the_numbering_frees_its_own_blocks_remotely(tmp_path):
    # The (thread, site) key of 0xffffffff's site 0xfffffffe is all ones but one bit:
    # thread 0xffffffff defines one site and another thread frees its block.
    def build(b):
        b.raw_chunk(4, 0xFFFFFFFF, events(SITE, 24, 1, 0, 0x10, 0, 1))
        b.raw_chunk(4, 7, events(FREE_REMOTE, 0xFFFFFFFF, 0, FREE_REMOTE, 0xFFFFFFFF, 0xFFFFFFFE))
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    assert (a.totals.allocations, a.totals.frees, a.totals.live_bytes, a.totals.unmatched_frees) == (1, 1, 0, 1)


def test_a_site_larger_than_an_address_space_is_damage(tmp_path):
    def build(b):
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, 1, SITE, 2**64 - 1, 2**64 - 1, 0, 0x10, 0, 3, 3))
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    assert (a.totals.allocations, a.totals.bytes, a.totals.live_bytes) == (1, 16, 16)
    assert a.warnings == ["damaged events: thread 1: site of 18446744073709551615 bytes, more than any "
                          "process can address"]


@pytest.mark.parametrize("record, message", [
    ((NODE, 5, 0x10, 0x20), "node refers to undefined parent 5"),
    ((SITE, 16, 1, 0, 0x10, 2**40), "site refers to undefined node 1099511627776"),
    ((FREE_REMOTE, 0, 1), "remote free names thread 0 site 1"),
    ((MOVE, 1, 0, 2**33), "move to undefined site 8589934592"),
    ((DERIVED_SITE, 2**32, 0, 0x40, 1), "derived site names thread 4294967296 site 0"),
])
def test_counts_and_indexes_past_what_the_file_defines_end_the_stream(record, message, tmp_path):
    def build(b):
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, 1, *record, 1))
    a = _core.Analysis(_core.ProfileFile(hostile_file(tmp_path, build)), _core.TableCodeNames())
    assert a.totals.allocations == 1
    assert a.warnings == [f"damaged events: thread 1: {message}"]


def test_module_paths_with_invalid_utf8_and_nul_load_and_name(tmp_path):
    # The module map goes from the file to Python and back into the symbolizer.
    from heaptype.analyze import profile as hp

    def build(b):
        b.raw_chunk(2, 0, b"400000-401000 r-xp 00000000 fe:00 12 /tmp/\xffmod\x00ule.so\n"
                          b"500000-501000 r-xp 00000000 fe:00 13 /tmp/caf\xe9.so\n")
        b.raw_chunk(1, 0, b"/tmp/\xe9xe\x00arg")
        b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x400010, 0, 1))
    p = hp.load(hostile_file(tmp_path, build))
    assert sorted(m.path for m in _core.parse_module_map(p.modules)) == ["/tmp/caf\udce9.so", "/tmp/\udcffmod\x00ule.so"]
    assert p.executable == "/tmp/\udce9xe" and p.analysis(infer=False).totals.allocations == 1


def test_a_file_path_that_is_not_utf8_opens(tmp_path):
    path = tmp_path / "caf\udce9.htp"  # the bytes b"caf\xe9.htp" on disk
    path.write_bytes(_core.ProfileBuilder().finish())
    assert _core.ProfileFile(str(path)).path == str(path)


@pytest.mark.parametrize("thread", HUGE_THREADS)
def test_huge_thread_numbers_allocate_nothing_for_them(thread, tmp_path):
    """An 89-byte file naming one thread: every view stays within 600 MB of address space."""
    import resource
    import subprocess

    path = hostile_file(tmp_path, lambda b: b.raw_chunk(4, thread, events(SITE, 16, 1, 0, 0x10, 0, 1, 1, 2)))
    limit = 600 << 20

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    for view in (["report", "--by", "callpath"], ["report", "--by", "thread"], ["timeline"], ["leaks"]):
        done = subprocess.run([sys.executable, "-m", "heaptype", view[0], path, *view[1:]], capture_output=True,
                              text=True, timeout=120, preexec_fn=cap_memory)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (view, done.stderr)


def test_header_size_past_the_end_is_an_error(tmp_path):
    path = tmp_path / "bad.htp"
    data = bytearray(_core.ProfileBuilder().finish())
    data[12:16] = (1 << 20).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"bad\.htp: damaged header \(header size 1048576 is past the end"):
        _core.ProfileFile(str(path))


@pytest.mark.parametrize("seed", range(20))
def test_spans_compose_to_the_whole_run(seed, tmp_path):
    """One pass cut into spans: counts add up to the whole run's, the largest span peak
    is the run's peak, and the last span's live figures are those at the end."""
    rng = random.Random(11000 + seed)
    sc = generate(rng, threads=3, operations=400)
    data = write(sc, rng)
    whole = analyse(sc, data, tmp_path, call_tree=True, infer=False)
    last = sc.ops[-1].time if sc.ops else 1
    ends = sorted(set(rng.sample(range(last + 1), min(6, last + 1)))) + [last]
    spans = analyse(sc, data, tmp_path, call_tree=True, infer=False, bucket_ends_us=ends)
    buckets = spans.buckets()
    assert len(buckets) == len(ends)
    for name in ("allocations", "objects", "bytes", "temporary_allocations"):
        assert sum(b["selected"][name] for b in buckets) == getattr(whole.selected, name)
    assert max(b["selected"]["peak_bytes"] for b in buckets) == whole.selected.peak_bytes
    assert buckets[-1]["selected"]["live_bytes"] == whole.selected.live_bytes
    labels = {g.id: g.label for g in spans.types}
    for g in whole.types:
        per_span = [b["types"].get(i) for b in buckets for i, label in labels.items() if label == g.label]
        assert sum(f["allocations"] for f in per_span if f) == g.allocations
        assert max((f["peak_bytes"] for f in per_span if f), default=0) == g.peak_bytes


# --- the lifetime filter ---------------------------------------------------------------------------

def lifetime_history(rng: random.Random) -> tuple[bytes, list, list]:
    """One thread's random history with addresses: (file, blocks, ops), each block
    (site, size, allocated at, freed at or None), each op (block, allocated?) in file order."""
    b = _core.ProfileBuilder(clock_tick_ns=1000, addresses=True)
    b.thread(1, 1, "main")
    sizes = [16, 1024, 4096]
    sites = [b.site(1, size, 1, 0xA0 + i, 0x1000 + 0x10 * i, 0) for i, size in enumerate(sizes)]
    blocks, live, ops, time = [], [], [], 0
    for _ in range(rng.randint(20, 200)):
        time += rng.choice([0, 1, 1, 5, 100, 2000])
        if live and rng.random() < 0.45:
            block = live.pop(rng.randrange(len(live)))
            site, _, born, _ = blocks[block]
            blocks[block] = (site, sizes[site], born, time)
            ops.append((block, False))
            b.free(1, time, sites[site], 0x100000 + 0x10000 * block)
        else:
            site = rng.randrange(len(sites))
            blocks.append((site, sizes[site], time, None))
            live.append(len(blocks) - 1)
            ops.append((len(blocks) - 1, True))
            b.alloc(1, time, sites[site], 0x100000 + 0x10000 * (len(blocks) - 1))
    return b.finish(), blocks, ops


@pytest.mark.parametrize("seed", range(20))
def test_lifetime_filter_keeps_exactly_the_blocks_that_lived_that_long(seed, tmp_path):
    rng = random.Random(7000 + seed)
    data, blocks, ops = lifetime_history(rng)
    path = tmp_path / "lifetimes.htp"
    path.write_bytes(data)
    file = _core.ProfileFile(str(path))
    names = _core.TableCodeNames()
    for low, high in [(None, 0), (1, None), (None, 99), (100, 2000), (2001, None), (rng.randint(0, 3000), None)]:
        a = _core.Analysis(file, names, min_lifetime_us=low, max_lifetime_us=high)
        def kept(block):
            lifetime = float("inf") if block[3] is None else block[3] - block[2]
            return (low is None or lifetime >= low) and (high is None or lifetime <= high)
        expected = {}
        for site, size, born, freed in filter(kept, blocks):
            count, total, still = expected.get(site, (0, 0, 0))
            expected[site] = (count + 1, total + size, still + (size if freed is None else 0))
        got = {g.type_tag - 0xA0: (g.allocations, g.bytes, g.live_bytes) for g in a.types if g.allocations}
        assert got == expected, (low, high)
        live = peak = 0  # the peak of what the filter keeps, replayed in file order
        for i, allocated in ops:
            if kept(blocks[i]):
                live += blocks[i][1] if allocated else -blocks[i][1]
                peak = max(peak, live)
        assert a.selected.peak_bytes == peak
        assert a.totals.allocations == len(blocks)  # the whole profile is still the whole profile


# --- stack depth over time -----------------------------------------------------------------------

def test_stack_depths_of_threads_add_up_over_time(tmp_path):
    """STACK records: each thread's latest depth counts; the stacks' peak is the
    deepest sum at any moment, and the timeline's stack series reaches it."""
    b = _core.ProfileBuilder(clock_tick_ns=1000)
    for t in (1, 2):
        b.thread(t, t, f"thread-{t}")
    site = b.site(1, 64, 1, 0xA0, 0x1000, 0)
    b.alloc(1, 1, site)
    b.stack(1, 2, 4096)
    b.stack(2, 3, 10_000)     # together 14,096
    b.stack(1, 4, 1024)       # 11,024
    b.stack(2, 5, 20_000)     # 21,024: the peak, at 5 us
    b.stack(2, 6, 512)        # 1,536
    b.free(1, 7, site)
    path = tmp_path / "stacks.htp"
    path.write_bytes(b.finish())
    file = _core.ProfileFile(str(path))
    assert [e[6] for e in file.events(2)[0] if e[0] == "stack"] == [10_000, 20_000, 512]
    a = _core.Analysis(file, _core.TableCodeNames(), timeline="type")
    assert (a.totals.stack_peak_bytes, a.totals.stack_peak_time_us) == (21_024, 5)
    assert {t.thread: t.stack_peak_bytes for t in a.threads} == {1: 4096, 2: 20_000}
    assert (a.totals.allocations, a.totals.peak_bytes) == (1, 64)  # the heap is the heap
    timeline = a.timeline()
    assert max(timeline["stack"]) == 21_024 and timeline["stack"][-1] == 1_536


# --- temporary allocations (src/core/temporaries.hpp) ---------------------------------------------

def temporaries_of(tmp_path, build) -> tuple[int, list[bool]]:
    """(the analysis' temporaries, thread 1's decoded free flags) of a hand-written profile."""
    b = _core.ProfileBuilder(clock_tick_ns=1000)
    for t in (1, 2):
        b.thread(t, t, f"thread-{t}")
    build(b)
    path = tmp_path / "temporaries.htp"
    path.write_bytes(b.finish())
    file = _core.ProfileFile(str(path))
    a = _core.Analysis(file, _core.TableCodeNames())
    return a.totals.temporary_allocations, [e[5] for e in file.events(1)[0] if e[0] == "free"]


def test_free_last_after_other_frees_is_not_temporary(tmp_path):
    """The runtime writes FREE_LAST for the thread's last allocated block even after other
    frees (profiles of every version): alloc A, alloc B, free A, free B counts nothing."""
    def build(b):
        a = b.site(1, 16, 1, 0xA0, 0x1000, 0)
        c = b.site(1, 32, 1, 0xA1, 0x1010, 0)
        b.alloc(1, 1, a)
        b.alloc(1, 2, c)
        b.free(1, 3, a)
        b.free_last(1, 4)
    assert temporaries_of(tmp_path, build) == (0, [False, False])


def test_free_of_the_sites_other_block_right_after_an_allocation_is_temporary(tmp_path):
    """heaptrack compares allocation sites, not blocks: two blocks of one site, then the
    first freed, counts once; the second, freed after a free, does not."""
    def build(b):
        a = b.site(1, 16, 1, 0xA0, 0x1000, 0)
        b.alloc(1, 1, a)
        b.alloc(1, 2, a)
        b.free(1, 3, a)
        b.free(1, 4, a)
    assert temporaries_of(tmp_path, build) == (1, [True, False])


def test_another_threads_event_between_ends_the_pair(tmp_path):
    """Thread 1 allocates in tick 1 and frees in tick 3; thread 2 allocates in tick 2, in
    between: no temporary, although thread 1's own stream says there was."""
    def build(b):
        a = b.site(1, 16, 1, 0xA0, 0x1000, 0)
        other = b.site(2, 16, 1, 0xA0, 0x2000, 0)
        b.alloc(1, 1, a)
        b.alloc(2, 2, other)
        b.free_last(1, 3)
        b.free_last(2, 4)
    assert temporaries_of(tmp_path, build) == (0, [True])


def test_a_pair_within_one_tick_stays_a_pair(tmp_path):
    """Thread 2's events of the same tick have no known order against thread 1's: the
    merge keeps each thread's events of a tick together, so thread 1's pair counts (and
    thread 2's, after it)."""
    def build(b):
        a = b.site(1, 16, 1, 0xA0, 0x1000, 0)
        other = b.site(2, 16, 1, 0xA0, 0x2000, 0)
        b.alloc(2, 5, other)
        b.alloc(1, 5, a)
        b.free_last(1, 5)
        b.free_last(2, 5)
    assert temporaries_of(tmp_path, build) == (2, [True])


def test_another_threads_free_right_after_the_allocation_is_temporary(tmp_path):
    """A block handed to thread 2 and freed there before anything else happened."""
    def build(b):
        a = b.site(1, 16, 1, 0xA0, 0x1000, 0)
        b.alloc(1, 1, a)
        b.free_remote(2, 2, 1, a)
    assert temporaries_of(tmp_path, build) == (1, [])
