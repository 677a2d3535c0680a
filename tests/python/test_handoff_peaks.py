"""Exact peaks under cross-thread load (issue 13, point 5).

tests/cpp/handoff.cpp: 8 producers allocate Parcels (1,000 B) that 8 consumers
free, while a semaphore keeps at most 48 live. The threads' streams are merged by
their timestamps, so the peak is only right if every free of another thread's
block is stamped before whatever it let happen next (the producer's next
allocation, after the semaphore): the runtime stamps such frees from the real
clock and moves the shared clock past them. With the ticker's coarse time alone a
whole tick of one producer's allocations landed before the consumers' frees
(305 KB reported for a true peak of at most 48 KB, 4.7 MB with a 1 µs ticker).
"""

from __future__ import annotations

import pytest

import heaptype
from conftest import run_profiled

BOUND = 48          # kBound in handoff.cpp
PARCEL = 1000       # sizeof(Parcel)
PRODUCERS, CONSUMERS, PER_PRODUCER = 8, 8, 20_000


@pytest.mark.parametrize("clock_us", [None, "1", "50000"])
def test_reported_peak_is_within_the_semaphore_bound(cpp_programs, tmp_path, clock_us):
    output = tmp_path / "handoff.htp"
    env = {"HEAPTYPE_CLOCK_US": clock_us} if clock_us else {}
    done = run_profiled(cpp_programs.program("handoff"), output, str(PRODUCERS), str(CONSUMERS),
                        str(PER_PRODUCER), env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    profile = heaptype.load(output)
    assert profile.warnings == []
    parcel = profile.type_row("Parcel")
    assert (parcel.allocations, parcel.live_bytes) == (PRODUCERS * PER_PRODUCER, 0)
    assert PARCEL <= parcel.peak_bytes <= BOUND * PARCEL
