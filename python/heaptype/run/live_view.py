"""``heaptype run --watch``: the growing profile of a running program as a table of
what is live now, redrawn every interval.

The runtime writes every thread's events to the file about once a second (and on
HEAPTYPE_SIGNAL), so reading the file now gives the program as it stood up to a
second ago. On a terminal the table is redrawn in place (rich's Live); elsewhere
(a pipe, a CI log) each refresh is printed once, as plain text.

A program that goes into the background (a daemon) exits at once and leaves its
server running: with ``heaptype run --wait --watch`` the view goes on with the
processes it left, their profiles summed row by row.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

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
    processes: int = 1


def read_live_state(path: Path, by: str = "type", top: int = 10) -> LiveState | None:
    """What is live in the profile at ``path`` as written so far; None before the
    file holds anything readable."""
    return read_live_states([path], by, top)


def read_live_states(paths: Iterable[Path], by: str = "type", top: int = 10) -> LiveState | None:
    """What is live in the profiles at ``paths`` together (a server's processes): their
    rows of the same label summed; None before any of them holds anything readable."""
    states = [state for state in (_live_state_of(path, by) for path in paths) if state is not None]
    if not states:
        return None
    rows: dict[str, LiveRow] = {}
    for state in states:
        for row in state.rows:
            into = rows.setdefault(row.label, LiveRow(row.label, 0, 0, 0))
            into.live_bytes += row.live_bytes
            into.live_blocks += row.live_blocks
            into.allocations += row.allocations
    merged = sorted(rows.values(), key=lambda r: (-r.live_bytes, r.label))
    return LiveState(max(s.elapsed_us for s in states), sum(s.live_bytes for s in states),
                     sum(s.live_blocks for s in states), merged[:top], len(states))


def _live_state_of(path: Path, by: str) -> LiveState | None:
    """Every live row of the profile at ``path``, largest first; None when unreadable."""
    from ..analyze.profile import ProfileError, load

    if not path.exists():
        return None
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
    return LiveState(elapsed_us, totals.live_bytes, totals.live_blocks, rows)


def path_label(path: tuple[str, ...], type_label: str) -> str:
    shown = " > ".join(path[-PATH_FRAMES:])
    return f"{'… > ' if len(path) > PATH_FRAMES else ''}{shown} [{type_label}]"


def live_table(state: LiveState, by: str):
    from rich.table import Table

    where = f" in {state.processes} processes" if state.processes > 1 else ""
    table = Table(title=f"live{where} after {format_seconds(state.elapsed_us)}: {format_bytes(state.live_bytes)} "
                        f"in {format_count(state.live_blocks)} blocks", title_justify="left")
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
    show_live(lambda seconds: _exited(process, seconds), lambda: [path], interval=interval, by=by, top=top,
              console=console)


def show_live(gone: Callable[[float], bool], paths: Callable[[], list[Path]], *, interval: float = 1.0,
              by: str = "type", top: int = 10, console=None) -> None:
    """Shows the live table of the profiles ``paths()`` names every ``interval`` seconds,
    until ``gone(seconds)`` (which waits that long at most) says their processes have exited."""
    from rich.console import Console
    from rich.live import Live

    console = console or Console()
    if console.is_terminal:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            for state in refreshes(gone, paths, interval, by, top):
                live.update(live_table(state, by), refresh=True)
    else:
        for state in refreshes(gone, paths, interval, by, top):
            console.print(live_table(state, by))


def _exited(process: subprocess.Popen, seconds: float) -> bool:
    try:
        process.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def refreshes(gone: Callable[[float], bool], paths: Callable[[], list[Path]], interval: float, by: str, top: int):
    """The live state every interval while the processes run (none when unreadable)."""
    while not gone(interval):
        state = read_live_states(paths(), by, top)
        if state is not None:
            yield state
