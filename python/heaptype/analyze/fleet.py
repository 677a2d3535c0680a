"""A fleet's profiles joined: ``heaptype merge P1.htp P2.htp ...`` and the pprof export
of several profiles (``heaptype export --format pprof P1.htp P2.htp ...``).

Why a joined report and not a merged ``.htp``: a profile file is one process's event
stream, with one module map (its load addresses), one clock and one thread numbering.
Type tags and call-path nodes are raw addresses of that process. A merged file would
need every address rewritten to (module, offset) and a second clock; instead each
profile is loaded and symbolized on its own, with its own module map, and the join is
made on names: types by their C++ name, call paths by their symbolized frames. Nothing
of one process's address space is read with another's.

Figures: allocations, bytes, and the blocks and bytes still live at exit add up across
processes. Peaks do not: processes peak at different times, so the joined view gives
the **sum of the processes' peaks** (an upper bound of what the fleet held at once,
reached only if every process peaked at the same moment) and the **largest single
process's peak**, each named so. The pprof export carries no peak (its values are
allocations and live-at-exit, which do add up).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field

from .profile import Profile, ProfileError

SUMMED = ("allocations", "objects", "bytes", "temporary_allocations", "live_blocks", "live_bytes")


@dataclass
class FleetRow:
    """One type (or one call path and type) over the fleet."""

    key: tuple
    processes: int = 0  # how many profiles have it
    sums: dict = field(default_factory=lambda: dict.fromkeys(SUMMED, 0))
    peak_sum: int = 0  # the sum of each process's peak: not a moment of the fleet
    peak_max: int = 0  # the largest one process's peak

    def add(self, figures) -> None:
        self.processes += 1
        for name in SUMMED:
            self.sums[name] += getattr(figures, name)
        self.peak_sum += figures.peak_bytes
        self.peak_max = max(self.peak_max, figures.peak_bytes)

    def as_dict(self) -> dict:
        return {**self.sums, "peak_bytes_sum_of_processes": self.peak_sum,
                "peak_bytes_largest_process": self.peak_max, "processes": self.processes}


def program_identity(profile: Profile) -> str:
    """What makes two profiles runs of one program: the executable's build id when the
    file is there to read (copies at other paths match), else its path."""
    from .functions import build_id

    path = profile.executable or ""
    ident = build_id(path) if path and os.path.exists(path) else None
    return f"build id {ident}" if ident else f"executable {os.path.realpath(path) if path else '?'}"


def check_one_program(profiles: list[Profile]) -> None:
    """Refuses profiles of different programs, naming the files of each."""
    groups: dict[str, list[str]] = {}
    for p in profiles:
        groups.setdefault(program_identity(p), []).append(p.path)
    if len(groups) > 1:
        parts = "; ".join(f"{', '.join(paths)}: {ident}" for ident, paths in groups.items())
        raise ProfileError(f"the profiles are not of one program, so their figures cannot be joined ({parts})")


def load_fleet(paths: list[str], load=None) -> list[Profile]:
    """The profiles at ``paths`` (read by ``load``, default heaptype.load), checked to be
    of one program."""
    if load is None:
        from .profile import load
    if not paths:
        raise ProfileError("give at least one profile")
    profiles = [load(p) for p in paths]
    check_one_program(profiles)
    return profiles


def by_type(profiles: list[Profile], *, infer: bool = True) -> list[FleetRow]:
    """One row per type over all processes (keyed by its label, as ``heaptype report``
    shows it: inferred types marked), largest bytes first."""
    rows: dict[tuple, FleetRow] = {}
    for p in profiles:
        for g in p.by_type(infer=infer):
            key = (g.label, g.type, g.inferred)
            rows.setdefault(key, FleetRow(key)).add(g)
    return sorted(rows.values(), key=lambda r: (-r.sums["bytes"], r.key))


def by_call_path(profiles: list[Profile], *, inlined: bool = False, infer: bool = True) -> list[FleetRow]:
    """One row per (symbolized call path, type) over all processes, largest bytes first."""
    rows: dict[tuple, FleetRow] = {}
    for p in profiles:
        for r in p.call_paths(inlined=inlined, infer=infer):
            key = (r.path, r.type_label)
            rows.setdefault(key, FleetRow(key)).add(r.figures)
    return sorted(rows.values(), key=lambda r: (-r.sums["bytes"], r.key))


def type_table(profiles: list[Profile], *, top: int = 0, infer: bool = True) -> list[str]:
    """The text view: one line per type, the peaks named for what they are."""
    from ..present.tables import render_table
    from ..present.units import format_bytes, format_count

    rows = by_type(profiles, infer=infer)
    shown = rows[:top] if top else rows
    header = ["allocations", "bytes", "live at exit", "sum of peaks", "largest peak", "processes", "type"]
    body = [[format_count(r.sums["allocations"]), format_bytes(r.sums["bytes"]), format_bytes(r.sums["live_bytes"]),
             format_bytes(r.peak_sum), format_bytes(r.peak_max), str(r.processes), r.key[0]] for r in shown]
    lines = [f"{len(profiles)} processes of {profiles[0].executable}: " + ", ".join(f"pid {p.pid}" for p in profiles),
             "figures are sums over the processes; peaks are per process (their sum is an upper bound of what "
             "the fleet held at once)", ""]
    lines += render_table(header, body, numeric=range(6))
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more types")
    return lines


def as_json(profiles: list[Profile], *, infer: bool = True) -> dict:
    call_paths = by_call_path(profiles, infer=infer) if all(p.has_call_paths for p in profiles) else []
    return {
        "profiles": [{"path": p.path, "pid": p.pid, "argv": p.argv} for p in profiles],
        "program": profiles[0].executable,
        "peak_note": "peaks are per process: *_sum_of_processes adds each process's own peak (an upper bound "
                     "of what the fleet held at once); *_largest_process is the largest single process's peak",
        "types": [{"label": r.key[0], "type": r.key[1], "inferred": r.key[2], **r.as_dict()}
                  for r in by_type(profiles, infer=infer)],
        "call_paths": [{"path": list(r.key[0]), "type": r.key[1], **r.as_dict()} for r in call_paths],
    }


def pprof_proto(profiles: list[Profile], *, inlined: bool = True, compress: bool = True) -> bytes:
    """One pprof profile of all the processes: each analysed with its own module map,
    its addresses moved to the first process's load addresses by the core, each
    sample labelled ``process`` with its pid (threads are numbered per process)."""
    from .. import _core
    from ..present.exports import pprof_mappings

    parts = [(p.analysis(call_tree=True, inlined=inlined), pprof_mappings(p), str(p.pid)) for p in profiles]
    comment = (f"heaptype: {len(profiles)} processes of {profiles[0].executable} merged; "
               "values are sums over processes")
    data = _core.pprof_proto_merged(parts, comment)
    return gzip.compress(data, mtime=0) if compress else data
