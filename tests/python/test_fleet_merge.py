"""`heaptype merge` of a fleet's profiles and their merged pprof export (issue 26).

Three runs of tests/cpp/handoff.cpp with different thread counts and sizes: each
process has its own load addresses (PIE under ASLR) and its own threads. The truth
of each run is known: PRODUCERS x PER_PRODUCER Parcels of 1,000 B, at most 48 live.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import heaptype
from conftest import run_profiled
from test_exports import decode_pprof

PARCEL, BOUND = 1000, 48  # sizeof(Parcel) and kBound in handoff.cpp
RUNS = [(1, 1, 100), (2, 1, 300), (3, 2, 500)]  # producers, consumers, per producer


def heaptype_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "heaptype", *args], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def fleet(cpp_programs, tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("fleet")
    paths = []
    for i, run in enumerate(RUNS, 1):
        path = folder / f"run{i}.htp"
        # The first run writes its file uncompressed (HEAPTYPE_COMPRESS=0), the others
        # zstd-compressed (the default): both kinds join.
        env = {"HEAPTYPE_COMPRESS": "0"} if i == 1 else None
        done = run_profiled(cpp_programs.program("handoff"), path, *map(str, run), env=env)
        assert done.returncode == 0, done.stderr
        paths.append(path)
    # FileHeader::flags (offset 44) & kFlagZstd: plain, compressed, compressed
    assert [struct.unpack_from("<I", path.read_bytes(), 44)[0] & 2 for path in paths] == [0, 2, 2]
    return paths


def report_rows(path: Path) -> dict[str, dict]:
    done = heaptype_cli("report", str(path), "--format", "json")
    assert done.returncode == 0, done.stderr
    return {row["label"]: row for row in json.loads(done.stdout)["rows"]}


@pytest.fixture(scope="module")
def merged(fleet) -> dict:
    done = heaptype_cli("merge", *map(str, fleet), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_merged_types_are_the_sums_of_the_reports(fleet, merged):
    """Acceptance: per-type allocations and bytes equal the sums of the three reports."""
    reports = [report_rows(path) for path in fleet]
    expected: dict[str, Counter] = {}
    for rows in reports:
        for label, row in rows.items():
            expected.setdefault(label, Counter()).update({k: row[k] for k in ("allocations", "bytes", "live_bytes")})
    got = {row["label"]: Counter({k: row[k] for k in ("allocations", "bytes", "live_bytes")}) for row in merged["types"]}
    assert got == expected
    parcel = next(row for row in merged["types"] if row["label"] == "Parcel")
    parcels = sum(producers * per_producer for producers, _, per_producer in RUNS)
    assert (parcel["allocations"], parcel["bytes"], parcel["live_bytes"]) == (parcels, parcels * PARCEL, 0)
    # Peaks are per process: their sum and their largest, never presented as one moment.
    peaks = [rows["Parcel"]["peak_bytes"] for rows in reports]
    assert all(PARCEL <= peak <= BOUND * PARCEL for peak in peaks)
    assert parcel["peak_bytes_sum_of_processes"] == sum(peaks)
    assert parcel["peak_bytes_largest_process"] == max(peaks)
    assert parcel["processes"] == 3


def test_merged_call_paths_are_symbolized_per_process(fleet, merged):
    """Each process's return addresses are named with its own module map: the one
    allocating path of Parcel is one row whatever the load addresses."""
    starts = {heaptype.load(path).modules.splitlines()[0].split("-")[0] for path in fleet}
    assert len(starts) == 3, "the runs should load the program at three addresses (ASLR)"
    parcel_paths = [row for row in merged["call_paths"] if row["type"] == "Parcel"]
    parcels = sum(producers * per_producer for producers, _, per_producer in RUNS)
    assert [(row["path"][-1], row["allocations"], row["processes"]) for row in parcel_paths] == [
        ("produce(long)", parcels, 3)]
    per_profile = Counter()
    for path in fleet:
        for row in heaptype.load(path).call_paths():
            per_profile[(tuple(row.path), row.type_label)] += row.bytes
    assert {(tuple(r["path"]), r["type"]): r["bytes"] for r in merged["call_paths"]} == dict(per_profile)


def test_text_view_names_its_peaks(fleet):
    done = heaptype_cli("merge", *map(str, fleet))
    assert done.returncode == 0, done.stderr
    assert "3 processes of " in done.stdout
    header = next(line for line in done.stdout.splitlines() if line.startswith("allocations"))
    assert header.split("  ")[0] == "allocations" and "sum of peaks" in header and "largest peak" in header
    parcel = next(line for line in done.stdout.splitlines() if line.endswith("  Parcel"))
    assert parcel.split()[0] == "2,200"


def test_an_output_named_as_a_profile_is_refused(fleet, tmp_path):
    """`heaptype merge -o all.htp` wrote the text table there, which `heaptype report`
    then refused as "not a HeapType profile"; it says what merge writes instead."""
    done = heaptype_cli("merge", *map(str, fleet), "-o", str(tmp_path / "all.htp"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"heaptype: error: merge: {tmp_path / 'all.htp'}: merge writes a table (or JSON "
                                  "with --json), not a profile"), done.stderr
    assert not (tmp_path / "all.htp").exists()


def test_profiles_of_another_program_are_refused(cpp_programs, fleet, tmp_path):
    other = tmp_path / "objects.htp"
    assert run_profiled(cpp_programs.program("objects"), other).returncode == 0
    for command in (["merge"], ["export", "--format", "pprof", "-o", str(tmp_path / "x.pb.gz")]):
        done = heaptype_cli(*command, str(fleet[0]), str(other))
        assert done.returncode == 2, done.stderr
        assert "not of one program" in done.stderr
        assert str(fleet[0]) in done.stderr and str(other) in done.stderr
    assert not (tmp_path / "x.pb.gz").exists()
    missing = heaptype_cli("merge", str(fleet[0]), str(tmp_path / "missing.htp"))
    assert (missing.returncode, missing.stderr.strip().splitlines()) == (
        2, [f"heaptype: error: {tmp_path / 'missing.htp'}: no such profile file"])


@pytest.fixture(scope="module")
def fleet_proto(fleet, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("pprof") / "fleet.pb.gz"
    done = heaptype_cli("export", "--format", "pprof", *map(str, fleet), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return decode_pprof(out.read_bytes(), out.parent)


def labels_of(sample: dict, strings: list[str]) -> dict:
    return {strings[l["key"][0]]: (strings[l["str"][0]] if l["str"] else l["num"][0]) for l in sample["label"]}


def test_merged_pprof_sums_the_processes(fleet, merged, fleet_proto):
    p = fleet_proto
    strings = p["string_table"]
    by_type: dict[str, Counter] = {}
    by_process = Counter()
    for s in p["sample"]:
        labels = labels_of(s, strings)
        by_type.setdefault(labels["type"], Counter()).update({"allocations": s["value"][0], "bytes": s["value"][1]})
        by_process[int(labels["process"])] += s["value"][0]
    assert by_type == {row["label"]: Counter({"allocations": row["allocations"], "bytes": row["bytes"]})
                       for row in merged["types"]}
    profiles = [heaptype.load(path) for path in fleet]
    assert by_process == {profile.pid: profile.totals.allocations for profile in profiles}


def code_locations(p: dict) -> Counter:
    """Each location as (module, file offset of its address, (function, line) frames)."""
    strings = p["string_table"]
    mappings = {m["id"][0]: m for m in p["mapping"]}
    functions = {f["id"][0]: strings[f["name"][0]] for f in p["function"]}
    out = Counter()
    for location in p["location"]:
        lines = tuple((functions[line["function_id"][0]], line["line"][0] if line["line"] else 0)
                      for line in location["line"])
        if not location["address"]:  # a path with no frame: no code, no mapping
            assert not location["mapping_id"]
            out[(None, 0, lines)] += 1
            continue
        m = mappings[location["mapping_id"][0]]
        assert m["memory_start"][0] <= location["address"][0] < m["memory_limit"][0]
        offset = location["address"][0] - m["memory_start"][0] + (m["file_offset"][0] if m["file_offset"] else 0)
        out[(strings[m["filename"][0]], offset, lines)] += 1
    return out


def test_merged_pprof_has_one_location_per_code_address(fleet, fleet_proto, tmp_path):
    """Addresses are moved to the first process's load addresses: one mapping per
    module, and the same code of three processes is one location, the one each
    process's own export has (same module offset, same frames)."""
    p = fleet_proto
    strings = p["string_table"]
    modules = Counter((strings[m["filename"][0]], m["file_offset"][0] if m["file_offset"] else 0)
                      for m in p["mapping"])
    assert strings[p["mapping"][0]["filename"][0]].endswith("/handoff")
    assert max(modules.values()) == 1, modules
    merged = code_locations(p)
    assert max(merged.values()) == 1
    union = set()
    for i, path in enumerate(fleet):
        out = tmp_path / f"run{i}.pb.gz"
        done = heaptype_cli("export", "--format", "pprof", str(path), "-o", str(out))
        assert done.returncode == 0, done.stderr
        union |= set(code_locations(decode_pprof(out.read_bytes(), tmp_path)))
    assert set(merged) == union


def test_a_module_only_one_process_has_is_moved_off_taken_addresses(fleet, tmp_path):
    """A module that only a later process maps, at addresses where the first process
    had another module, gets a range of its own: no two mappings overlap, and the
    later process's code lands in its own module's mapping."""
    import gzip

    from heaptype import _core
    from heaptype.present.exports import pprof_mappings

    profile = heaptype.load(fleet[0])
    analysis = profile.analysis(call_tree=True, inlined=True)
    own = pprof_mappings(profile)
    renamed = [(start, limit, offset, path + ".other", build) for start, limit, offset, path, build in own]
    data = _core.pprof_proto_merged([(analysis, own, "1"), (analysis, renamed, "2")], "")
    p = decode_pprof(gzip.compress(data), tmp_path)
    strings = p["string_table"]
    mappings = {m["id"][0]: m for m in p["mapping"]}
    assert len(mappings) == 2 * len(own)
    ranges = sorted((m["memory_start"][0], m["memory_limit"][0]) for m in mappings.values())
    assert all(end <= next_start for (_, end), (next_start, _) in zip(ranges, ranges[1:]))
    locations = {l["id"][0]: l for l in p["location"]}
    seen = Counter()
    for s in p["sample"]:
        process = labels_of(s, strings)["process"]
        for location_id in s["location_id"]:
            location = locations[location_id]
            if not location["address"]:
                continue
            m = mappings[location["mapping_id"][0]]
            assert m["memory_start"][0] <= location["address"][0] < m["memory_limit"][0]
            seen[(process, strings[m["filename"][0]].endswith(".other"))] += 1
    assert set(seen) == {("1", False), ("2", True)} and seen[("1", False)] == seen[("2", True)]
