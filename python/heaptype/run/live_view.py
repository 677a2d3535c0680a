"""``heaptype run --watch``: the growing profile of a running program as a table of
what is live now, redrawn every interval.

The runtime writes every thread's events to the file about once a second (and on
HEAPTYPE_SIGNAL), so reading the file now gives the program as it stood up to a
second ago. On a terminal the table is redrawn in place (rich's Live); elsewhere
(a pipe, a CI log) each refresh is printed once, as plain text.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..present.units import format_bytes, format_count, format_seconds

WATCH_VIEWS = ("type", "function", "callpath")
PATH_FRAMES = 4  # a call path shows its innermost frames: the table stays readable


@dataclass
class LiveRow:
    label: str
    live_bytes: int
    live_blocks: int
    allocations: int


@dataclass
class LiveState:
    elapsed_us: int
    live_bytes: int
    live_blocks: int
    rows: list[LiveRow]


def read_live_state(path: Path, by: str = "type", top: int = 10) -> LiveState | None:
    """What is live in the profile at ``path`` as written so far; None before the
    file holds anything readable."""
    from ..analyze.profile import ProfileError, load

    try:
        profile = load(path)
        totals = profile.totals
        if by == "function":
            rows = [LiveRow(g.function, g.self.live_bytes, g.self.live_blocks, g.self.allocations)
                    for g in profile.by_function(sort="live") if g.self.live_bytes]
        elif by == "callpath":
            rows = [LiveRow(path_label(r.path, r.type_label), r.figures.live_bytes, r.figures.live_blocks,
                            r.figures.allocations) for r in profile.call_paths(sort="live", live_only=True)]
        else:
            rows = [LiveRow(g.label, g.live_bytes, g.live_blocks, g.allocations)
                    for g in profile.by_type(sort="live", infer=True) if g.live_bytes]
    except (ProfileError, OSError):
        return None
    rows.sort(key=lambda r: (-r.live_bytes, r.label))
    # Wall time since the profile began: the last event's time stands still while the
    # program holds its memory and allocates nothing.
    elapsed_us = max(0, int((time.time_ns() - profile.raw.start_unix_ns) / 1000))
    return LiveState(elapsed_us, totals.live_bytes, totals.live_blocks, rows[:top])


def path_label(path: tuple[str, ...], type_label: str) -> str:
    shown = " > ".join(path[-PATH_FRAMES:])
    return f"{'… > ' if len(path) > PATH_FRAMES else ''}{shown} [{type_label}]"


def live_table(state: LiveState, by: str):
    from rich.table import Table

    table = Table(title=f"live after {format_seconds(state.elapsed_us)}: {format_bytes(state.live_bytes)} in "
                        f"{format_count(state.live_blocks)} blocks", title_justify="left")
    table.add_column(by)
    table.add_column("live bytes", justify="right")
    table.add_column("live blocks", justify="right")
    table.add_column("allocations", justify="right")
    for row in state.rows:
        table.add_row(row.label, format_bytes(row.live_bytes), format_count(row.live_blocks),
                      format_count(row.allocations))
    return table


def watch(process: subprocess.Popen, path: Path, *, interval: float = 1.0, by: str = "type", top: int = 10,
          console=None) -> None:
    """Shows the live table of ``path`` every ``interval`` seconds until ``process`` exits."""
    from rich.console import Console
    from rich.live import Live

    console = console or Console()
    if console.is_terminal:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            for state in refreshes(process, path, interval, by, top):
                live.update(live_table(state, by), refresh=True)
    else:
        for state in refreshes(process, path, interval, by, top):
            console.print(live_table(state, by))


def refreshes(process: subprocess.Popen, path: Path, interval: float, by: str, top: int):
    """The live state every interval while the process runs (none when unreadable)."""
    while True:
        try:
            process.wait(timeout=interval)
            return
        except subprocess.TimeoutExpired:
            pass
        state = read_live_state(path, by, top) if path.exists() else None
        if state is not None:
            yield state
