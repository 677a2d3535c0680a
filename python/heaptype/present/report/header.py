"""What every text report starts with: the profile, the program, its totals."""

from __future__ import annotations

from ...analyze.profile import Profile
from ..units import format_bytes, format_count, format_seconds


def header_lines(profile: Profile) -> list[str]:
    t = profile.totals
    lines = [
        f"HeapType profile {profile.path}",
        f"  program    {' '.join(profile.argv) or profile.executable} (pid {profile.pid})",
        f"  mode       {mode_text(profile)}",
        f"  allocated  {format_count(t.allocations)} blocks, {format_bytes(t.bytes)} in all",
        f"  peak       {format_bytes(t.peak_bytes)} live at {format_seconds(t.peak_time_us)}",
        f"  {'at ' + profile.end_cause:<11}{format_bytes(t.live_bytes)} still live in {format_count(t.live_blocks)} blocks",
    ]
    lines.append(f"  profile    {profile_size_text(profile)}")
    if profile.aggregated:
        lines.append(f"  counts     {AGGREGATED_NOTE}")
    registry = profile.registry_bytes_at_exit()
    if registry is not None:
        per_block = registry_detail(registry, t.live_blocks)
        lines.append(f"  overhead   {format_bytes(profile.bookkeeping_bytes())} of HeapType buffers and tables at "
                     f"most{uses_text(profile)}; {format_bytes(registry)} beside the blocks live at {profile.end_cause}"
                     f"{per_block}")
    lines += filter_lines(profile)
    return lines


HEADER_BYTES = 16  # the runtime's header in front of each block


def registry_detail(registry: int, live_blocks: int) -> str:
    """What the registry at the end holds: the headers of the blocks the profile counts
    live, and what else (blocks made while recording was stopped, over-aligned blocks'
    padding, the table of tagged memory the runtime did not allocate): dividing it all by
    the live blocks would say 31,600 B per block for a program with one."""
    if live_blocks <= 0:
        return ""
    other = registry - HEADER_BYTES * live_blocks
    if other <= 0:
        return f" ({HEADER_BYTES} B per block)"
    return (f" ({HEADER_BYTES} B for each of the {format_count(live_blocks)}, {format_bytes(other)} for blocks "
            "the profile does not count, over-aligned padding and tagged memory)")


AGGREGATED_NOTE = ("aggregated per call site (HEAPTYPE_MODE=aggregate): exact totals, leaks and peak; a typed "
                   "row's peak is its own, other rows' (marked *) what they had live at the heap's peak")


def peak_cell(profile: Profile, group) -> str:
    """A group's peak as tables show it: marked * when, in an aggregated profile, it is
    what the group had live at the heap's peak rather than its own most."""
    text = format_bytes(group.peak_bytes)
    return text + "*" if profile.aggregated and getattr(group, "peak_at_heap_peak", True) else text


def profile_size_text(profile: Profile) -> str:
    """"449 KiB, zstd, 1.32 B per allocation": what the profile costs on disk."""
    text = f"{format_bytes(profile.file_bytes)}{', zstd' if profile.compressed else ''}"
    allocations = profile.totals.allocations
    return text + (f", {profile.file_bytes / allocations:.2f} B per allocation" if allocations else "")


def uses_text(profile: Profile) -> str:
    """" (call paths 2.1 MiB, sites 1.9 MiB, ...)": the overhead by use, largest first."""
    uses = sorted(((b, name) for name, b in profile.bookkeeping_uses().items() if b), reverse=True)
    return f" ({', '.join(f'{name} {format_bytes(b)}' for b, name in uses)})" if uses else ""


MODES = {
    "linked": "linked (built with HeapType): types from new-expressions and typed allocators",
    "preloaded": "preloaded (the program does not link the runtime): call paths by stack walking; types "
                 "where code was built with HeapType, else inferred from allocator frames",
    "attached": "attached to the running process: only what happened after the attach",
}


def mode_text(profile: Profile) -> str:
    text = MODES.get(profile.mode, profile.mode)
    end = profile.runtime_summary
    if profile.mode == "attached" and end:
        text += f"; {format_count(end['untracked_frees'])} frees of older blocks ignored"
    elif end and end["untracked_frees"]:
        text += (f"; {format_count(end['untracked_frees'])} frees of blocks from before the profile began ignored "
                 "(a forked child's parent's, or allocated before the runtime started)")
    if not profile.complete:
        text += "; unfinished (the program was running, or did not exit normally)"
        if not profile.totals.allocations and not profile.aggregated:
            # A live read in the first second: the threads' events wait in their buffers.
            text += "; no events in the file yet (a running program's reach it about once a second)"
    return text


def filter_lines(profile: Profile) -> list[str]:
    f = profile.filters
    lines = []
    if f.types:
        lines.append(f"  types      matching {describe(f.types)}")
    if f.functions:
        lines.append(f"  functions  with {describe(f.functions)} on the call path")
    if f.threads:
        lines.append(f"  threads    {', '.join(str(t) for t in f.threads)}")
    if f.sizes != (None, None):
        low, high = f.sizes
        lines.append(f"  sizes      {low or 0} to {'any' if high is None else high} bytes a block")
    if f.time != (None, None):
        low, high = f.time
        lines.append(f"  time       {(low or 0) / 1e6:g} s to {'the end' if high is None else f'{high / 1e6:g} s'}")
    if f.stop_after_events and profile.aggregated:
        lines.append("  snapshot   at the peak (aggregated: what was live then; the counts up to it are not kept)")
    elif f.stop_after_events:
        lines.append(f"  snapshot   at the peak (event {f.stop_after_events:,})")
    if f:
        s = profile.selected
        lines.append(f"  selected   {format_count(s.allocations)} blocks, {format_bytes(s.bytes)} in all, "
                     f"peak {format_bytes(s.peak_bytes)}")
    return lines


def live_column(profile: Profile) -> str:
    """What the live figures mean: at the profile's end (exit, exec), or at the moment a
    snapshot stops."""
    f = profile.filters
    if f.stop_after_events:
        return "live at peak"
    if f.time[1] is not None:
        return f"live at {f.time[1] / 1e6:g} s"
    return f"live at {profile.end_cause}"


def describe(patterns) -> str:
    return " or ".join(repr(p) for p in patterns)


def report_json_head(profile: Profile, by: str) -> dict:
    """The fields every JSON report starts with."""
    f = profile.filters
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "complete": profile.complete,
        "ended_by": profile.end_cause,  # when the totals' live blocks were live: "exit", "exec", "dump", "cut-off"
        "mode": profile.mode,
        "aggregated": profile.aggregated,
        "by": by,
        "filters": {"types": list(f.types), "functions": list(f.functions), "threads": list(f.threads)},
        "totals": profile.totals.as_dict(),
    }
