"""Leaks: the blocks still live at exit, by type and full call stack, largest first."""

from __future__ import annotations

from ...analyze.profile import Profile
from ..tables import render_table
from ..units import format_bytes, format_count
from .header import header_lines, report_json_head


def leak_rows(profile: Profile, *, infer: bool = True) -> list[dict]:
    rows = [{"type": row.type, "inferred": row.inferred, "label": row.type_label, "blocks": row.live_blocks,
             "bytes": row.live_bytes, "stack": list(row.path)}
            for row in profile.live_call_paths(infer=infer)]
    return sorted(rows, key=lambda r: (-r["bytes"], -r["blocks"], r["label"], r["stack"]))


def leaks_json(profile: Profile, top: int | None = None, *, infer: bool = True) -> dict:
    rows = leak_rows(profile, infer=infer)
    out = report_json_head(profile, "leaks")
    out["leaked_bytes"] = sum(r["bytes"] for r in rows)
    out["leaked_blocks"] = sum(r["blocks"] for r in rows)
    out["leaks"] = rows[:top] if top else rows
    out["warnings"] = profile.warnings
    return out


def render_leaks_text(profile: Profile, top: int | None = None, *, infer: bool = True) -> str:
    rows = leak_rows(profile, infer=infer)
    shown = rows[:top] if top else rows
    lines = header_lines(profile) + [""]
    if not profile.complete:
        lines.append("note: the profile was cut short: blocks live when it ended are not all leaks")
    if not rows:
        return "\n".join(lines + ["no leaks: every block was freed"])
    lines.append(f"{format_count(sum(r['blocks'] for r in rows))} blocks still live at {profile.end_cause} "
                 f"({format_bytes(sum(r['bytes'] for r in rows))}), by type and call stack:")
    for r in shown:
        lines.append("")
        lines += render_table(("blocks", "bytes", "type"), [(format_count(r["blocks"]), format_bytes(r["bytes"]),
                                                             r["label"])], numeric=(0, 1))[2:]
        lines += [f"      {'  ' * min(depth, 20)}{frame}" for depth, frame in enumerate(r["stack"])]
    if len(rows) > len(shown):
        lines.append(f"... {len(rows) - len(shown)} more (--top to show more)")
    return "\n".join(lines)
