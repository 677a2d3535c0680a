"""Exports of a profile's call paths in the formats other tools read; the core
writes them (see src/core/exports/exports.hpp for each format).

* ``pprof``: pprof's profile.proto, gzipped, the type of each sample as label ``type``;
* ``pprof-text``: gperftools' heap profile, for ``google-pprof PROGRAM FILE``;
* ``folded``: ``frame;...;type value`` lines for flamegraph.pl;
* ``chrome``: Chrome's trace-event JSON, live bytes per type over time (chrome_trace.py);
* ``massif``: valgrind massif's format, for ms_print and massif-visualizer (massif.py);
* ``heaptrack``: heaptrack's data file, for heaptrack_print and heaptrack_gui, the type as
  the innermost frame; compressed by the output's suffix (write_heaptrack).

The last two carry aggregated figures only (the timeline, trees at two moments), so
they are shaped in Python from the core's views.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

from ..analyze.profile import Profile, ProfileError
from ..analyze.symbols import parse_proc_maps

FORMATS = ("pprof-text", "folded", "pprof", "chrome", "massif", "heaptrack")
FOLDED_VALUES = ("bytes", "allocations", "objects", "peak", "live", "temporary")


def pprof_mappings(profile: Profile) -> list[tuple[int, int, int, str, str]]:
    """The executable mappings, the main binary first: (start, limit, offset, path, build id)."""
    from ..analyze.functions import build_id

    by_path: dict[str, list] = {}
    for m in parse_proc_maps(profile.modules):
        by_path.setdefault(m.path, []).append(m)
    main = os.path.realpath(profile.executable or "")
    order = sorted(by_path, key=lambda p: (os.path.realpath(p) != main, min(m.start for m in by_path[p])))
    out = []
    for path in order:
        ident = build_id(path) or ""
        out += [(m.start, m.end, m.offset, path, ident) for m in by_path[path] if "x" in m.perms]
    return out


def _selected(profile: Profile, types) -> Profile:
    return profile.filter(types=types) if types else profile


def pprof_proto(profile: Profile, *, types=None, inlined: bool = True, compress: bool = True) -> bytes:
    """pprof's Profile message, gzipped (as ``pprof`` reads and writes it)."""
    profile = _selected(profile, types)
    analysis = profile.analysis(call_tree=True, inlined=inlined)
    comment = f"heaptype profile of {' '.join(profile.argv) or profile.executable}"
    data = analysis.pprof_proto(pprof_mappings(profile), comment)
    return gzip.compress(data, mtime=0) if compress else data


def pprof_text(profile: Profile, *, types=None, inlined: bool = False) -> str:
    """gperftools' heap profile text, for ``google-pprof PROGRAM FILE``."""
    analysis = _selected(profile, types).analysis(call_tree=True, inlined=inlined)
    return analysis.pprof_text().decode("utf-8", "replace")


def folded(profile: Profile, *, value: str = "bytes", types=None, inlined: bool = False) -> str:
    """``frame;...;type value`` lines, root first, the type as the leaf."""
    if value not in FOLDED_VALUES:
        raise ValueError(f"unknown value {value!r}: use one of {', '.join(FOLDED_VALUES)}")
    analysis = _selected(profile, types).analysis(call_tree=True, inlined=inlined)
    return analysis.folded(value).decode("utf-8", "replace")


def write_heaptrack(profile: Profile, output: str | None, *, inlined: bool = True):
    """heaptrack's data file of ``profile`` into ``output`` (None or "-": plain text on
    standard output): zstd-compressed when it ends in ``.zst`` (heaptrack's own choice;
    by the ``zstd`` program, which Debian's heaptrack brings), gzip when ``.gz`` (Python's
    gzip), plain text otherwise; heaptrack's tools read all three by the suffix. The text
    is written as the core makes it, never held whole. Returns the analysis pass (its
    totals are what heaptrack_print will show)."""
    profile.require_start("heaptrack's format")  # before anything is written
    if not output or output == "-":
        analysis = profile.heaptrack(sys.stdout.buffer.write, inlined=inlined)
        sys.stdout.flush()
        return analysis
    if output.endswith(".zst"):
        return _through_zstd(profile, output, inlined)
    opener = (lambda: gzip.GzipFile(output, "wb", mtime=0)) if output.endswith(".gz") else (lambda: open(output, "wb"))
    with opener() as out:
        return profile.heaptrack(out.write, inlined=inlined)


def _through_zstd(profile: Profile, output: str, inlined: bool):
    zstd = shutil.which("zstd")
    if zstd is None:
        raise ProfileError(f"{output}: writing .zst needs the zstd program (Debian's zstd); "
                           "or name the file .gz")
    analysis = None
    with subprocess.Popen([zstd, "-q", "-f", "-o", output], stdin=subprocess.PIPE,
                          stderr=subprocess.PIPE) as process:
        try:
            analysis = profile.heaptrack(process.stdin.write, inlined=inlined)
            process.stdin.close()
        except BrokenPipeError:  # zstd stopped: its message says why
            pass
        errors = process.stderr.read().decode(errors="replace")
    if process.returncode != 0 or analysis is None:
        raise ProfileError(f"{output}: zstd failed: {errors.strip()}")
    return analysis


def export(profile: Profile, fmt: str, *, value: str = "bytes", inlined: bool | None = None) -> bytes:
    """The export in format ``fmt`` (one of FORMATS), as bytes to write."""
    if fmt == "pprof-text":
        return pprof_text(profile, inlined=bool(inlined)).encode()
    if fmt == "folded":
        return folded(profile, value=value, inlined=bool(inlined)).encode()
    if fmt == "pprof":
        return pprof_proto(profile, inlined=True if inlined is None else inlined)
    if fmt == "chrome":
        from .chrome_trace import chrome_trace_text

        return chrome_trace_text(profile).encode()
    if fmt == "massif":
        from .massif import massif

        return massif(profile).encode()
    if fmt == "heaptrack":  # plain text, whole in memory: write_heaptrack streams and compresses
        pieces: list[bytes] = []
        profile.heaptrack(pieces.append, inlined=True if inlined is None else inlined)
        return b"".join(pieces)
    raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "FOLDED_VALUES", "export", "folded", "pprof_proto", "pprof_text", "write_heaptrack"]
