"""Per-type reports of a profile, as a readable table or as JSON for machines."""

from __future__ import annotations

import json

from .profile import Profile, TypeRow

UNTYPED_LABEL = "(untyped)"


def format_bytes(n: int) -> str:
    """Human sizes, 1024-based: 512 B, 12.7 KiB, 3.05 MiB."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def format_count(n: int) -> str:
    return f"{n:,}"


def type_label(row: TypeRow) -> str:
    return row.type if row.type is not None else UNTYPED_LABEL


def rows_for(profile: Profile, sort: str, top: int | None) -> list[TypeRow]:
    rows = profile.by_type(sort)
    return rows[:top] if top else rows


def as_json(profile: Profile, sort: str = "peak", top: int | None = None) -> dict:
    t = profile.totals
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "complete": profile.complete,
        "totals": {
            "allocations": t.allocations,
            "frees": t.frees,
            "bytes": t.bytes,
            "peak_bytes": t.peak_bytes,
            "live_bytes": t.live_bytes,
        },
        "rows": [
            {
                "type": r.type,
                "allocations": r.allocations,
                "objects": r.objects,
                "bytes": r.bytes,
                "peak_bytes": r.peak_bytes,
                "live_bytes": r.live_bytes,
            }
            for r in rows_for(profile, sort, top)
        ],
        "warnings": profile.warnings,
    }


def render_json(profile: Profile, sort: str = "peak", top: int | None = None) -> str:
    return json.dumps(as_json(profile, sort, top), indent=2)


def render_text(profile: Profile, sort: str = "peak", top: int | None = None) -> str:
    t = profile.totals
    lines = [
        f"HeapType profile {profile.path}",
        f"  program    {' '.join(profile.argv) or profile.executable} (pid {profile.pid})",
        f"  allocated  {format_count(t.allocations)} blocks, {format_bytes(t.bytes)} in all",
        f"  peak       {format_bytes(t.peak_bytes)} live at {t.peak_time_us / 1e6:.3f} s",
        f"  at exit    {format_bytes(t.live_bytes)} still live in {format_count(t.live_blocks)} blocks",
    ]
    per_block = profile.bookkeeping_bytes_per_live_block()
    if per_block is not None:
        lines.append(f"  overhead   {format_bytes(profile.bookkeeping_bytes())} of HeapType bookkeeping, "
                     f"{per_block:.0f} B per block live at peak ({format_count(t.peak_live_blocks)})")
    lines.append("")
    rows = rows_for(profile, sort, top)
    header = ("type", "allocations", "objects", "bytes", "peak", "live at exit")
    table = [header] + [
        (type_label(r), format_count(r.allocations), format_count(r.objects), format_bytes(r.bytes),
         format_bytes(r.peak_bytes), format_bytes(r.live_bytes))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    widths[0] = min(widths[0], 70)
    for i, row in enumerate(table):
        name = row[0] if len(row[0]) <= widths[0] else row[0][: widths[0] - 3] + "..."
        cells = [name.ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    hidden = len(profile.by_type(sort)) - len(rows)
    if hidden > 0:
        lines.append(f"... {hidden} more types (--top to show more)")
    return "\n".join(lines)
