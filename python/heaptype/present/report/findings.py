"""Findings: releases the program got wrong, which the runtime passed on to the
allocator unchanged and recorded (Valgrind's "mismatched free() / delete / delete []",
and, in the type-aware capture mode, a delete through a pointer whose static type's
size disagrees with the block's)."""

from __future__ import annotations

from ...analyze.profile import Profile
from ..units import format_bytes, format_count

STACK_DEPTH_SHOWN = 12


def mismatched_deletes(profile: Profile) -> list[dict]:
    """JSON rows ``{allocated, deleted, count, stack, ...}``: deleted as another type."""
    return [{"allocated": f["allocated"], "allocated_bytes": f["allocated_bytes"], "deleted": f["deleted"],
             "deleted_bytes": f["deleted_bytes"], "count": f["count"], "stack": f["stack"],
             "allocation_stack": f["allocation_stack"]}
            for f in profile.findings if f["kind"] == "mismatched_delete"]


def mismatched_frees(profile: Profile) -> list[dict]:
    """JSON rows ``{allocated, allocated_with, released_with, count, stack, ...}``."""
    return [{"allocated": f["allocated"], "allocated_bytes": f["allocated_bytes"],
             "allocated_with": f["allocated_with"], "released_with": f["released_with"], "count": f["count"],
             "stack": f["stack"], "allocation_stack": f["allocation_stack"]}
            for f in profile.findings if f["kind"] == "mismatched_free"]


def findings_json(profile: Profile) -> dict:
    return {"mismatched_deletes": mismatched_deletes(profile), "mismatched_frees": mismatched_frees(profile)}


def _stack_lines(stack: list[str]) -> list[str]:
    shown = stack[-STACK_DEPTH_SHOWN:]
    lines = [f"      {'  ' * depth}{frame}" for depth, frame in enumerate(shown)]
    if len(stack) > len(shown):
        lines.insert(0, f"      ... {len(stack) - len(shown)} outer frames")
    return lines


def render_findings_lines(profile: Profile) -> list[str]:
    """Text lines for the report (none when the program released everything rightly)."""
    deletes, frees = mismatched_deletes(profile), mismatched_frees(profile)
    if not deletes and not frees:
        return []
    lines = ["", "findings (each release went to the allocator as it was):"]
    for f in deletes:
        lines.append(f"  mismatched delete x{format_count(f['count'])}: deleted as {f['deleted']} "
                     f"({format_bytes(f['deleted_bytes'])}), allocated as {f['allocated']} "
                     f"({format_bytes(f['allocated_bytes'])})")
        lines += _stack_lines(f["stack"])
    for f in frees:
        lines.append(f"  mismatched {f['released_with']} x{format_count(f['count'])}: {f['allocated']} "
                     f"({format_bytes(f['allocated_bytes'])}) allocated with {f['allocated_with']}")
        lines += _stack_lines(f["stack"])
    return lines
