"""The pass's plain runs (core/event_merge.hpp, Analysis::take_plain_run) against its
event-by-event path.

Most events of a profile are allocations and frees of the thread's own sites, one
byte each: the decoder reads them in a tight loop, the merge hands them over in runs
(up to the next thread's time, never past a move that could fold into one of them)
and the analysis applies them without branching on their kind. A pass that stops
after a number of events looks at each event instead; with a number it never reaches,
it must come to exactly the same figures, timelines, warnings and peak event, on whole
files, on files cut anywhere and on hand-made streams that mix every one-byte record
with the records that end a run.
"""

from __future__ import annotations

import random

import pytest

from heaptype import _core
from synthetic import generate, write
from test_core_truth import GROUPINGS, SITE, core_key, events, hostile_file, timeline_by_name

EVENT_BY_EVENT = {"stop_after_events": 10**15}  # never reached: the pass looks at each event


def everything(a, timelines: bool) -> dict:
    t = a.totals
    out = {
        "totals": (core_key(t), t.frees, t.unmatched_frees, t.peak_time_us, t.peak_live_blocks, t.events,
                   t.peak_event, t.duration_us),
        "selected": core_key(a.selected),
        "types": sorted((g.label, core_key(g), g.peak_time_us, tuple(g.size_histogram)) for g in a.types),
        "threads": sorted((g.thread, core_key(g)) for g in a.threads),
        "functions": sorted((f.function, core_key(f.self), core_key(f.total)) for f in a.functions),
        "warnings": list(a.warnings),
    }
    if timelines:
        out["timelines"] = {by: timeline_by_name(a, by) for by in GROUPINGS}
    return out


def both_paths(path, names, **options) -> tuple[dict, dict]:
    timelines = "timeline" in options
    plain = _core.Analysis(_core.ProfileFile(str(path)), names, **options)
    looked_at = _core.Analysis(_core.ProfileFile(str(path)), names, **options, **EVENT_BY_EVENT)
    return everything(plain, timelines), everything(looked_at, timelines)


@pytest.mark.parametrize("seed", range(40))
def test_plain_runs_come_to_the_figures_of_the_event_by_event_path(seed, tmp_path):
    rng = random.Random(81_000 + seed)
    sc = generate(rng, threads=1 + seed % 6, walked=seed % 3 == 2, moves=seed % 4 != 3)
    path = tmp_path / "p.htp"
    path.write_bytes(write(sc, rng, tick=1 + seed % 3))
    options = {"call_tree": True, "functions": True, "infer": False}
    if seed % 2:
        options.update(timeline=list(GROUPINGS), timeline_points=16 + seed)
    plain, looked_at = both_paths(path, sc.code_names(), **options)
    assert plain["totals"][0][0] > 0  # something was allocated
    assert plain == looked_at


@pytest.mark.parametrize("seed", range(6))
def test_a_file_cut_anywhere_reads_the_same_on_both_paths(seed, tmp_path):
    rng = random.Random(82_000 + seed)
    sc = generate(rng, threads=1 + seed % 3, operations=3000)
    data = write(sc, rng, flush_chance=0.2)
    previous = 0
    for cut in sorted(rng.sample(range(64, len(data)), 15)) + [len(data)]:
        path = tmp_path / f"cut{cut}.htp"
        path.write_bytes(data[:cut])
        plain, looked_at = both_paths(path, sc.code_names(), infer=False)
        assert plain == looked_at, cut
        allocations = plain["totals"][0][0]
        assert allocations >= previous
        previous = allocations
    assert previous == sum(1 for op in sc.ops if op.kind == "alloc")


def zigzag(n: int) -> int:
    return n << 1 if n >= 0 else ((-n) << 1) - 1


def alloc(distance: int) -> int:
    """An ALLOC record's head (version 3): its site as a distance from the newest."""
    return zigzag(distance) << 1 | 1


def free(distance: int) -> int:
    return zigzag(distance) << 2


FREE_LAST = 2
TIME = 1 << 2 | 2
STACK = 7 << 2 | 2


def sites_v3(sizes: list[int]) -> bytes:
    """SITE records of version 3: untyped, call sites 0x10, 0x14 ... (as distances from
    the previous one), no calling-context node."""
    out = b""
    for i, size in enumerate(sizes):
        out += events(SITE, size, 1, 0, zigzag(0x10 if i == 0 else 4), 0)
    return out


def version_3(tmp_path, build) -> str:
    """A hand-made file whose event records are written as version 3 writes them (the
    builder's header says version 2, whose records name sites by number)."""
    path = hostile_file(tmp_path, build)
    data = bytearray(open(path, "rb").read())
    data[8:12] = (3).to_bytes(4, "little")
    open(path, "wb").write(bytes(data))
    return path


def test_one_byte_records_between_the_records_that_end_a_run(tmp_path):
    # Sites A (16 B) then B (32 B); B is the newest, A at distance 1.
    stream = sites_v3([16, 32])
    stream += events(alloc(1), FREE_LAST)                    # A, freed next: a temporary
    stream += events(alloc(1), alloc(0), free(1), free(0))   # A, B, free A, free B: none
    stream += events(TIME, 5, alloc(0), alloc(0), FREE_LAST)  # B, B, B freed: a temporary
    stream += events(STACK, 4096, alloc(1), free(1))         # A then its free: a temporary
    stream += events(alloc(0))                               # B, never freed
    path = version_3(tmp_path, lambda b: b.raw_chunk(4, 1, stream))
    plain, looked_at = both_paths(path, _core.TableCodeNames())
    assert plain == looked_at
    a = _core.Analysis(_core.ProfileFile(path), _core.TableCodeNames())
    t = a.totals
    assert a.warnings == []
    assert (t.allocations, t.bytes, t.frees, t.temporary_allocations) == (7, 16 * 3 + 32 * 4, 5, 3)
    assert (t.live_blocks, t.live_bytes, t.peak_bytes) == (2, 64, 64)


def one_byte_stream(rng: random.Random, tmp_path, operations: int) -> tuple[str, tuple]:
    """A random version-3 file: ALLOC, FREE and FREE_LAST records at 40 sites (those more
    than 31 away from the newest take two bytes), TIME and STACK records between them, in
    chunks that end anywhere between records; and its figures by a plain simulation of
    the records: allocations, frees, temporaries, live bytes, peak bytes, live blocks."""
    sizes = [rng.choice([8, 16, 24, 100, 4096]) for _ in range(40)]
    live = [0] * len(sizes)
    newest = len(sizes) - 1
    records: list[list[int]] = []  # each record's varints: chunks end between records
    allocations = frees = temporaries = live_bytes = peak = 0
    last_site, open_alloc, just_allocated = -1, False, False
    for _ in range(operations):
        roll = rng.random()
        if roll < 0.02:
            records.append([TIME, rng.randint(1, 3)] if rng.random() < 0.5 else [STACK, rng.randint(0, 1 << 20)])
        elif roll < 0.52 or not any(live):
            site = rng.randrange(len(sizes)) if rng.random() < 0.3 else newest - rng.randrange(4)
            records.append([alloc(newest - site)])
            live[site] += 1
            allocations += 1
            live_bytes += sizes[site]
            peak = max(peak, live_bytes)
            last_site, open_alloc, just_allocated = site, True, True
        else:
            if open_alloc and live[last_site] and rng.random() < 0.5:
                site = last_site
                records.append([FREE_LAST])
                open_alloc = False
            else:
                site = rng.choice([i for i, n in enumerate(live) if n])
                records.append([free(newest - site)])
            temporaries += just_allocated and site == last_site
            just_allocated = False
            live[site] -= 1
            frees += 1
            live_bytes -= sizes[site]
    cuts = sorted(rng.sample(range(1, len(records)), 30))

    def build(b):
        b.raw_chunk(4, 1, sites_v3(sizes))
        for begin, end in zip([0] + cuts, cuts + [len(records)]):
            b.raw_chunk(4, 1, b"".join(events(*record) for record in records[begin:end]))

    return version_3(tmp_path, build), (allocations, frees, temporaries, live_bytes, peak, sum(live))


@pytest.mark.parametrize("seed", range(8))
def test_long_one_byte_streams_count_exactly(seed, tmp_path):
    path, expected = one_byte_stream(random.Random(83_000 + seed), tmp_path, 20_000)
    plain, looked_at = both_paths(path, _core.TableCodeNames())
    assert plain == looked_at
    t = _core.Analysis(_core.ProfileFile(path), _core.TableCodeNames()).totals
    assert (t.allocations, t.frees, t.temporary_allocations, t.live_bytes, t.peak_bytes, t.live_blocks) == expected


@pytest.mark.parametrize("seed", range(4))
def test_a_one_byte_stream_cut_anywhere_reads_the_same_on_both_paths(seed, tmp_path):
    rng = random.Random(84_000 + seed)
    path, expected = one_byte_stream(rng, tmp_path, 5_000)
    data = open(path, "rb").read()
    previous = 0
    for cut in sorted(rng.sample(range(64, len(data)), 20)) + [len(data)]:
        cut_path = tmp_path / f"cut{cut}.htp"
        cut_path.write_bytes(data[:cut])
        plain, looked_at = both_paths(cut_path, _core.TableCodeNames())
        assert plain == looked_at, cut
        allocations = plain["totals"][0][0]
        assert allocations >= previous
        previous = allocations
    assert previous == expected[0]


def test_records_split_over_chunks_and_threads_read_the_same_on_both_paths(tmp_path):
    # Two threads, each stream cut into several chunks, interleaved in the file, with
    # times that make the merge switch between them in the middle of one-byte runs.
    def build(b):
        for thread in (1, 2):
            b.raw_chunk(4, thread, sites_v3([24]))
        for step in range(40):
            for thread in (1, 2):
                body = events(TIME, 1 + (step + thread) % 3) + events(*[alloc(0)] * (step % 5 + 1))
                body += events(*[free(0)] * (step % 5)) + events(FREE_LAST)
                b.raw_chunk(4, thread, body)
    path = version_3(tmp_path, build)
    plain, looked_at = both_paths(path, _core.TableCodeNames())
    assert plain == looked_at
    per_thread = sum(step % 5 + 1 for step in range(40))
    assert plain["warnings"] == []
    assert plain["totals"][0][0] == 2 * per_thread
    assert plain["totals"][0][4] == 0  # every block freed
