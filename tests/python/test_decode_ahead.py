"""The pass with a second thread decoding the largest streams ahead (core/event_merge.hpp).

By default only streams of 1 MiB of events or more are decoded ahead, so the other
tests' small profiles do not take that path; here HEAPTYPE_DECODE_AHEAD_BYTES=0 sends
every stream (the largest four of a profile) through it. The figures must equal the
brute-force reference's, and the same pass without the thread ("off"), on files cut
short or damaged, on passes that stop early, and on streams long enough to wrap the
ring (16384 events) many times.
"""

from __future__ import annotations

import random

import pytest

from heaptype import _core
from synthetic import Reference, generate, write
from test_core_truth import SITE, analyse, assert_matches, core_key, events, hostile_file


@pytest.fixture
def decode_ahead(monkeypatch):
    """Every stream decoded ahead, however small."""
    monkeypatch.setenv("HEAPTYPE_DECODE_AHEAD_BYTES", "0")


def everything(a) -> tuple:
    """Every figure of a pass, to compare two passes over the same file."""
    return (core_key(a.totals), a.totals.frees, a.totals.unmatched_frees, a.totals.peak_time_us,
            a.totals.peak_live_blocks, sorted((g.label, core_key(g), g.peak_time_us) for g in a.types),
            sorted((g.thread, core_key(g)) for g in a.threads),
            sorted((f.function, core_key(f.self), core_key(f.total)) for f in a.functions), list(a.warnings))


def both_ways(monkeypatch, path, names, **options) -> tuple:
    """The pass decoded ahead, then decoded in the pass alone."""
    results = []
    for setting in ("0", "off"):
        monkeypatch.setenv("HEAPTYPE_DECODE_AHEAD_BYTES", setting)
        results.append(_core.Analysis(_core.ProfileFile(str(path)), names, **options))
    return tuple(results)


@pytest.mark.parametrize("seed", range(60))
def test_generated_histories_decoded_ahead_match_the_reference(seed, tmp_path, decode_ahead):
    rng = random.Random(70_000 + seed)
    # Up to eight threads: the four largest streams are decoded ahead, the others in the pass.
    sc = generate(rng, threads=1 + seed % 8, walked=seed % 3 == 2, moves=seed % 4 != 3)
    a = analyse(sc, write(sc, rng), tmp_path, call_tree=True, functions=True, infer=False)
    assert_matches(Reference(sc), a)


@pytest.mark.parametrize("seed", range(3))
def test_streams_that_wrap_the_ring_many_times_match_the_reference(seed, tmp_path, decode_ahead):
    rng = random.Random(71_000 + seed)
    sc = generate(rng, threads=1 + seed, operations=120_000)
    data = write(sc, rng)
    a = analyse(sc, data, tmp_path, call_tree=True, functions=True, infer=False)
    assert a.totals.allocations + a.totals.frees > 3 * 16384
    assert_matches(Reference(sc), a)


@pytest.mark.parametrize("seed", range(6))
def test_a_file_cut_anywhere_reads_the_same_decoded_ahead(seed, tmp_path, monkeypatch):
    rng = random.Random(72_000 + seed)
    sc = generate(rng, threads=1 + seed % 4, operations=20_000)
    data = write(sc, rng, flush_chance=0.2)
    cuts = sorted(rng.sample(range(64, len(data)), 12)) + [len(data)]
    previous = 0
    for cut in cuts:
        path = tmp_path / f"cut{cut}.htp"
        path.write_bytes(data[:cut])
        ahead, alone = both_ways(monkeypatch, path, sc.code_names(), call_tree=True, functions=True, infer=False)
        assert everything(ahead) == everything(alone)
        assert ahead.totals.allocations >= previous
        previous = ahead.totals.allocations
    assert previous == sum(1 for op in sc.ops if op.kind == "alloc")


@pytest.mark.parametrize("seed", range(4))
def test_passes_that_stop_early_read_the_same_decoded_ahead(seed, tmp_path, monkeypatch):
    rng = random.Random(73_000 + seed)
    sc = generate(rng, threads=2 + seed % 3, operations=30_000)
    path = tmp_path / "early.htp"
    path.write_bytes(write(sc, rng))
    full = _core.Analysis(_core.ProfileFile(str(path)), sc.code_names())
    middle = full.totals.duration_us // 2
    for options in ({"stop_after_events": full.totals.events // 3}, {"end_us": middle},
                    {"begin_us": middle // 2, "end_us": middle}):
        ahead, alone = both_ways(monkeypatch, path, sc.code_names(), **options)
        assert everything(ahead) == everything(alone)
        assert 0 < ahead.totals.allocations < full.totals.allocations


def test_damaged_records_end_a_stream_decoded_ahead_with_the_same_warning(tmp_path, monkeypatch):
    # A site, 5000 allocations at it, then a record no version defines.
    unknown = 0x7F << 2 | 2
    path = hostile_file(tmp_path, lambda b: b.raw_chunk(4, 1, events(SITE, 16, 1, 0, 0x10, 0, *[1] * 5000, unknown)))
    ahead, alone = both_ways(monkeypatch, path, _core.TableCodeNames())
    assert (ahead.totals.allocations, ahead.totals.live_bytes) == (5000, 5000 * 16)
    assert any("damaged events" in w and "unknown record" in w for w in ahead.warnings)
    assert everything(ahead) == everything(alone)
