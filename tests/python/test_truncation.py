"""Profiles cut short or damaged load up to their last whole chunk, with a warning.

The profile comes from a real run of tests/cpp/threads.cpp (3 threads x 12,000 objects
of each kind: tens of thousands of events in several chunks per thread, with block
addresses so that the records fill several chunks), written plain (HEAPTYPE_COMPRESS=0)
so that its chunks can be cut at known offsets. Copies of it cut at many byte offsets
must all load (after the 8-byte magic), say how many bytes were dropped, and count no
fewer allocations the longer they are. The same holds for the compressed profile (the
default), whose stream is flushed at every chunk: cut anywhere, it loads what it holds.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest

import heaptype
from conftest import run_profiled

MAGIC = b"HEAPTYPE"
FILE_HEADER = 64
CHUNK_HEADER = 16


def chunk_starts(data: bytes) -> list[int]:
    """Offsets of the chunks of a whole profile, then the file size."""
    (header_size,) = struct.unpack_from("<I", data, 12)
    offset, starts = max(header_size, FILE_HEADER), []
    while offset + CHUNK_HEADER <= len(data):
        starts.append(offset)
        (payload,) = struct.unpack_from("<I", data, offset + 12)
        offset += CHUNK_HEADER + payload
    assert offset == len(data), "the original profile is not a whole number of chunks"
    return starts + [len(data)]


def expected_dropped(starts: list[int], cut: int) -> int:
    """Bytes the reader must drop from a copy cut to `cut` bytes."""
    if cut < FILE_HEADER:
        return cut
    return cut - max(s for s in starts if s <= cut)


def mentions_dropped(warnings: list[str], dropped: int) -> bool:
    return any(re.search(rf"\b{dropped} bytes dropped", w) for w in warnings)


@pytest.fixture(scope="module")
def original(cpp_programs, tmp_path_factory):
    program = cpp_programs.program("threads")
    path = tmp_path_factory.mktemp("truncation") / "full.htp"
    done = run_profiled(program, path, "3", "12000", env={"HEAPTYPE_ADDRESSES": "1", "HEAPTYPE_COMPRESS": "0"})
    assert done.returncode == 0, done.stderr
    data = path.read_bytes()
    profile = heaptype.load(path)
    assert profile.complete and profile.warnings == []
    assert profile.totals.allocations >= 72_000
    assert len(profile.threads) >= 4
    event_chunks = [struct.unpack_from("<I", data, s + 8)[0] for s in chunk_starts(data)[:-1] if data[s + 4] == 4]
    assert max(event_chunks.count(t) for t in event_chunks) >= 2, "want a thread with several event chunks"
    return path, data, profile


def type_rows(profile: heaptype.Profile) -> list[tuple]:
    return sorted((t.label, t.allocations, t.bytes, t.peak_bytes, t.live_bytes) for t in profile.by_type())


def load_copy(directory: Path, name: str, data: bytes) -> tuple[Path, heaptype.Profile]:
    path = directory / name
    path.write_bytes(data)
    try:
        return path, heaptype.load(path)
    finally:
        path.unlink()


def cut_offsets(data: bytes, starts: list[int]) -> list[int]:
    size = len(data)
    offsets = set(range(0, min(200, size)))
    offsets.update(200 + (size - 200) * i // 300 for i in range(300))
    offsets.update(range(starts[-3], size + 1))  # the last two chunks (LIVE, END), byte by byte
    for s in starts:  # both sides of every chunk boundary
        offsets.update(o for o in (s - 1, s, s + 1, s + CHUNK_HEADER - 1, s + CHUNK_HEADER) if 0 <= o <= size)
    return sorted(offsets)


def test_truncated_copies_load(original, tmp_path):
    path, data, full = original
    starts = chunk_starts(data)
    problems, counts = [], []
    for cut in cut_offsets(data, starts):
        name = f"cut{cut}.htp"
        try:
            _, profile = load_copy(tmp_path, name, data[:cut])
        except heaptype.ProfileError as e:
            if cut >= len(MAGIC):
                problems.append(f"cut at {cut}: raised {e}")
            elif name not in str(e):
                problems.append(f"cut at {cut}: the error does not name the file: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - any other exception is a failure too
            problems.append(f"cut at {cut}: raised {type(e).__name__}: {e}")
            continue
        counts.append((cut, profile.totals.allocations))
        dropped = expected_dropped(starts, cut)
        if profile.dropped_bytes != dropped:
            problems.append(f"cut at {cut}: dropped_bytes {profile.dropped_bytes}, expected {dropped}")
        if cut == len(data):
            if not profile.complete or profile.warnings:
                problems.append(f"whole file: complete={profile.complete}, warnings {profile.warnings}")
        elif profile.complete:
            problems.append(f"cut at {cut}: reported complete")
        elif dropped and not mentions_dropped(profile.warnings, dropped):
            problems.append(f"cut at {cut}: no warning about the {dropped} dropped bytes: {profile.warnings}")
        elif not dropped and not any(name in w for w in profile.warnings):
            problems.append(f"cut at {cut} (a chunk boundary): no warning naming the file: {profile.warnings}")
    for (cut_a, a), (cut_b, b) in zip(counts, counts[1:]):
        if b < a:
            problems.append(f"allocations fell from {a} (cut at {cut_a}) to {b} (cut at {cut_b})")
    assert counts and counts[-1] == (len(data), full.totals.allocations)
    assert problems == []


def test_wrong_magic_names_the_file(original, tmp_path):
    _, data, _ = original
    bad = tmp_path / "not_a_profile.htp"
    bad.write_bytes(b"NOTAHEAP" + data[8:])
    with pytest.raises(heaptype.ProfileError) as raised:
        heaptype.load(bad)
    assert str(bad) in str(raised.value)


def test_garbage_appended(original, tmp_path):
    _, data, full = original
    garbage = bytes([0xA5]) + random.Random(7).randbytes(99)
    path, profile = load_copy(tmp_path, "garbage.htp", data + garbage)
    assert profile.dropped_bytes == len(garbage)
    assert mentions_dropped(profile.warnings, len(garbage)), profile.warnings
    assert profile.totals.as_dict() == full.totals.as_dict()
    assert type_rows(profile) == type_rows(full)


def test_corrupted_chunk_header_in_the_middle(original, tmp_path):
    _, data, full = original
    starts = chunk_starts(data)
    events = [s for s in starts[:-1] if data[s + 4] == 4]  # event chunks
    assert len(events) >= 4, "the profile should have several event chunks"
    offset = events[len(events) // 2]
    damaged = bytearray(data)
    damaged[offset:offset + 4] = b"XXXX"
    _, profile = load_copy(tmp_path, "damaged.htp", bytes(damaged))
    dropped = len(data) - offset
    assert profile.dropped_bytes == dropped
    assert mentions_dropped(profile.warnings, dropped), profile.warnings
    _, prefix = load_copy(tmp_path, "prefix.htp", data[:offset])
    assert profile.totals.as_dict() == prefix.totals.as_dict()
    assert 0 < profile.totals.allocations < full.totals.allocations


@pytest.fixture(scope="module")
def compressed(cpp_programs, tmp_path_factory):
    program = cpp_programs.program("threads")
    path = tmp_path_factory.mktemp("truncation") / "compressed.htp"
    done = run_profiled(program, path, "3", "12000", env={"HEAPTYPE_ADDRESSES": "1"})
    assert done.returncode == 0, done.stderr
    return path, path.read_bytes(), heaptype.load(path)


def test_compressed_profile_holds_the_same(original, compressed):
    _, plain_data, plain = original
    _, data, profile = compressed
    (flags,) = struct.unpack_from("<I", data, 44)
    assert flags & 2, "the default profile is compressed"
    assert (profile.compressed, plain.compressed) == (True, False)
    assert (profile.file_bytes, plain.file_bytes) == (len(data), len(plain_data))
    assert profile.complete and profile.warnings == []
    assert len(data) < len(plain_data)  # block addresses (this profile has them) compress least
    # Each run its own: the rows' order (by peak) may differ with the threads' interleaving.
    assert sorted((t.label, t.allocations, t.bytes) for t in profile.by_type()) == sorted(
        (t.label, t.allocations, t.bytes) for t in plain.by_type())


def test_truncated_compressed_copies_load(compressed, tmp_path):
    _, data, full = compressed
    size = len(data)
    cuts = sorted(set(range(FILE_HEADER, FILE_HEADER + 64)) | {FILE_HEADER + (size - FILE_HEADER) * i // 250
                                                              for i in range(251)} | set(range(size - 40, size + 1)))
    problems, counts = [], []
    for cut in cuts:
        try:
            _, profile = load_copy(tmp_path, f"zcut{cut}.htp", data[:cut])
        except Exception as e:  # noqa: BLE001 - any exception is a failure
            problems.append(f"cut at {cut}: raised {type(e).__name__}: {e}")
            continue
        counts.append((cut, profile.totals.allocations))
        if cut < size and profile.complete:
            problems.append(f"cut at {cut}: reported complete")
        if cut < size and not profile.warnings:
            problems.append(f"cut at {cut}: no warning")
    for (cut_a, a), (cut_b, b) in zip(counts, counts[1:]):
        if b < a:
            problems.append(f"allocations fell from {a} (cut at {cut_a}) to {b} (cut at {cut_b})")
    assert counts[-1] == (size, full.totals.allocations)
    assert counts[len(counts) // 2][1] > 0, "half the stream holds events"
    assert problems == []


def test_a_profile_without_events_yet_says_so(original, tmp_path):
    """A running program's profile read in its first second holds its header, program
    and module map but no events yet (they wait in the threads' buffers): the report said
    "0 blocks" and "unfinished", and a reader of a live server's took it for nothing
    allocated. The mode line says no events are in the file yet."""
    _, data, _ = original
    starts = chunk_starts(data)
    first_events = next(s for s in starts[:-1] if data[s + 4] == 4)
    path = tmp_path / "early.htp"
    path.write_bytes(data[:first_events])
    assert heaptype.load(path).totals.allocations == 0
    from heaptype.present.report.header import mode_text
    assert mode_text(heaptype.load(path)).endswith(
        "; unfinished (the program was running, or did not exit normally); no events in the file yet "
        "(a running program's reach it about once a second)")
    assert "no events in the file yet" not in mode_text(heaptype.load(original[0]))
