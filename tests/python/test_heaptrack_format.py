"""The heaptrack export (src/core/exports/heaptrack.hpp) on synthetic heap histories
(tests/python/synthetic.py: threads, frees by other threads, blocks typed late), read
back here the way heaptrack's reader does (accumulatedtracedata.cpp): its totals must be
the analysis's, exactly, and the file must keep the rules heaptrack's tools rely on.

The reader below also checks what heaptrack_gui needs and heaptrack_print does not:
every string, instruction pointer, trace and allocation info is defined before its use,
and allocation infos are first allocated in the order of their numbers (heaptrack_gui
indexes a vector with them: a gap crashes it). tests/integration/test_heaptrack_export.py
runs heaptrack's own tools on a real program's export.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field

import pytest

import heaptype
from heaptype import _core
from heaptype.present import exports
from synthetic import folded_ops, generate, merged_order, named_sites, write


@dataclass
class HeaptrackFile:
    allocations: int = 0
    temporaries: int = 0        # as heaptrack_print counts them
    first_info_accidents: int = 0  # frees of info 0 after a free: heaptrack_print's extra temporaries
    peak: int = 0
    leaked: int = 0
    command: str = ""
    by_type: Counter = field(default_factory=Counter)  # allocations by innermost frame
    lines: int = 0


def read_heaptrack(text: str) -> HeaptrackFile:
    """heaptrack's reader, for file format 3, with the checks of the module's docstring."""
    out = HeaptrackFile()
    strings: list[str] = []
    ips: list[tuple[int, list[int]]] = []       # (module string, [function string ...])
    traces: list[tuple[int, int]] = []          # (ip, parent trace)
    infos: list[tuple[int, int]] = []           # (size, trace)
    counted_infos = 0                           # heaptrack_gui's allocationInfoCounter
    last_allocation = 0
    last_was_free = False
    lines = text.split("\n")
    assert lines[0] == "v 10400 3" and lines[-1] == ""
    for line in lines[1:-1]:
        out.lines += 1
        kind, rest = line[0], line[2:]
        if kind == "s":
            size, _, value = rest.partition(" ")
            assert len(value) == int(size, 16), line
            strings.append(value)
            continue
        if kind == "X":
            out.command = rest
            continue
        fields = [int(x, 16) for x in rest.split(" ")]
        if kind == "i":
            module, frames = fields[1], fields[2:]
            assert len(frames) % 3 == 0 and frames, line
            names = frames[0::3]
            assert all(0 <= s <= len(strings) for s in [module, *names, *frames[1::3]]), line
            ips.append((module, names))
        elif kind == "t":
            ip, parent = fields
            assert 1 <= ip <= len(ips) and 0 <= parent <= len(traces), line
            traces.append((ip, parent))
        elif kind == "a":
            size, trace = fields
            assert 1 <= trace <= len(traces), line
            infos.append((size, trace))
        elif kind == "+":
            (index,) = fields
            assert index < len(infos), line
            assert index <= counted_infos, f"info {index} allocated before info {counted_infos}"
            counted_infos = max(counted_infos, index + 1)
            size, trace = infos[index]
            out.allocations += 1
            out.leaked += size
            out.peak = max(out.peak, out.leaked)
            module, names = ips[traces[trace - 1][0] - 1]
            out.by_type[strings[names[0] - 1]] += 1
            last_allocation = index
        elif kind == "-":
            (index,) = fields
            assert index < counted_infos, line
            out.leaked -= infos[index][0]
            if last_allocation == index:
                out.temporaries += 1
                out.first_info_accidents += index == 0 and last_was_free
            last_allocation = 0
        elif kind == "c":
            pass
        else:
            raise AssertionError(f"unexpected line {line!r}")
        last_was_free = kind == "-" or (kind == "c" and last_was_free)
    return out


def export(data: bytes, names, tmp_path, **options) -> tuple[HeaptrackFile, object]:
    path = tmp_path / "synthetic.htp"
    path.write_bytes(data)
    pieces: list[bytes] = []
    a = _core.Analysis(_core.ProfileFile(str(path)), names, call_tree=True, infer=False,
                       heaptrack_write=pieces.append, heaptrack_command="program --flag", **options)
    return read_heaptrack(b"".join(pieces).decode()), a


def typed_by_another_thread_then_freed(sc) -> int:
    """Moves where the file cannot keep both the type and the temporary count: another
    thread types a block of the site just allocated at, and the next event frees a block
    of the new site (the analysis sees no temporary there, since the typing thread is
    another; heaptrack's reader would see one unless two infos are at hand)."""
    ops = folded_ops(sc)
    names = named_sites(ops)
    order = merged_order(ops, names, 1)
    events = [i for i in order if ops[i].kind != "move"]
    position = {i: n for n, i in enumerate(events)}
    count = 0
    for n, i in enumerate(order):
        op = ops[i]
        if op.kind != "move" or op.stream == names[i][0]:
            continue
        before = [j for j in order[:n] if ops[j].kind != "move"]
        after = [j for j in order[n + 1:] if ops[j].kind != "move"]
        if before and after and ops[before[-1]].kind == "alloc" and names[before[-1]] == names[i] and \
                ops[after[0]].kind == "free" and names[after[0]] == (op.stream, op.site):
            count += 1
    return count


@pytest.mark.parametrize("seed", range(120))
def test_synthetic_histories_read_back_as_the_analysis_counts(seed, tmp_path):
    rng = random.Random(seed)
    sc = generate(rng, walked=seed % 3 == 2)
    ht, a = export(write(sc, rng), sc.code_names(), tmp_path)
    t = a.totals
    assert ht.command == "program --flag"
    assert (ht.allocations, ht.peak, ht.leaked) == (t.allocations, t.peak_bytes, t.live_bytes)
    corners = typed_by_another_thread_then_freed(sc)
    assert t.temporary_allocations <= ht.temporaries - ht.first_info_accidents <= t.temporary_allocations + corners
    types = Counter({g.label: g.allocations for g in a.types if g.allocations})
    assert sum(abs(ht.by_type[k] - types[k]) for k in types | ht.by_type) <= 2 * corners


@pytest.mark.parametrize("seed", range(60))
def test_one_thread_histories_read_back_exactly(seed, tmp_path):
    rng = random.Random(seed)
    sc = generate(rng, threads=1, walked=seed % 3 == 2)
    ht, a = export(write(sc, rng), sc.code_names(), tmp_path)
    t = a.totals
    assert (ht.allocations, ht.peak, ht.leaked) == (t.allocations, t.peak_bytes, t.live_bytes)
    assert ht.temporaries - ht.first_info_accidents == t.temporary_allocations
    assert ht.by_type == Counter({g.label: g.allocations for g in a.types if g.allocations})


def test_first_block_freed_after_a_free_is_no_temporary(tmp_path):
    """A program's first block freed at exit among other frees (libstdc++'s exception
    pool, freed by __freeres): heaptrack_print counts that free of info 0 as temporary on
    heaptrack's own files; the export moves it to where it is none."""
    b = _core.ProfileBuilder(clock_tick_ns=1000)
    b.program("/p", ["p"])
    b.thread(1, 1001, "main")
    first, other, third = (b.site(1, size, 1, 0, call_site, 0) for size, call_site in ((72704, 0x10), (16, 0x20),
                                                                                         (32, 0x30)))
    b.alloc(1, 0, first)
    for time in range(1, 4):
        b.alloc(1, time, other)
    b.alloc(1, 4, third)
    b.free(1, 5, other)
    b.free(1, 5, other)
    b.free(1, 6, first)
    b.free(1, 6, other)
    b.free(1, 7, third)
    b.end(5, 5)
    path = tmp_path / "p.htp"
    path.write_bytes(b.finish())
    ht, a = export(path.read_bytes(), _core.TableCodeNames(), tmp_path)
    assert (a.totals.allocations, a.totals.temporary_allocations) == (5, 0)
    assert (ht.allocations, ht.temporaries, ht.first_info_accidents, ht.leaked) == (5, 0, 0, 0)
    assert ht.peak == a.totals.peak_bytes == 72704 + 3 * 16 + 32


def test_cli_writes_zst_gz_and_plain_files_heaptrack_reads_by_suffix(tmp_path):
    rng = random.Random(7)
    sc = generate(rng, threads=1)
    profile = tmp_path / "p.htp"
    profile.write_bytes(write(sc, rng))
    texts = []
    for name in ("p.heaptrack.zst", "p.heaptrack.gz", "p.heaptrack"):
        out = tmp_path / name
        done = subprocess.run([sys.executable, "-m", "heaptype", "export", str(profile), "--format", "heaptrack",
                               "-o", str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        texts.append(decompress(out))
    assert texts[0] == texts[1] == texts[2] and texts[0].startswith("v 10400 3\n")
    assert open(tmp_path / "p.heaptrack.gz", "rb").read(2) == b"\x1f\x8b"
    assert open(tmp_path / "p.heaptrack.zst", "rb").read(4) == b"\x28\xb5\x2f\xfd"
    shown = subprocess.run([sys.executable, "-m", "heaptype", "export", str(profile), "--format", "heaptrack"],
                           capture_output=True, text=True)
    assert shown.stdout == texts[0]
    assert exports.export(heaptype.load(str(profile)), "heaptrack").decode() == texts[0]
    late = subprocess.run([sys.executable, "-m", "heaptype", "export", str(profile), "--format", "heaptrack",
                           "--time", "0.000001:", "-o", str(tmp_path / "late.heaptrack")], capture_output=True, text=True)
    assert late.returncode == 2 and "replays the program from its start" in late.stderr
    assert not (tmp_path / "late.heaptrack").exists()
    for name in ("p.heaptrack.zst", "p.heaptrack.gz"):
        nowhere = subprocess.run([sys.executable, "-m", "heaptype", "export", str(profile), "--format", "heaptrack",
                                  "-o", str(tmp_path / "missing" / name)], capture_output=True, text=True)
        assert nowhere.returncode == 2 and f"missing/{name}" in nowhere.stderr, nowhere.stderr


def decompress(path) -> str:
    data = path.read_bytes()
    if path.suffix == ".gz":
        import gzip

        data = gzip.decompress(data)
    elif path.suffix == ".zst":
        from tooling import require_tool

        data = subprocess.run([require_tool("zstd"), "-dc", str(path)], capture_output=True, check=True).stdout
    return data.decode()
