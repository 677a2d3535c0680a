"""The HeapType runtime inside this Python process: budgets for Python tests that drive
native code through ctypes or pybind11.

The runtime is there when Python runs with the shared runtime preloaded
(``LD_PRELOAD=$(heaptype --lib-dir)/libheaptype.so python -m pytest``), or when a
library loaded with ctypes links it (``heaptype --ldflags --shared``). Either way the
process exports ``heaptype_output_path`` and the control functions of
``heaptype/heaptype.hpp``: ``heaptype_start``, ``heaptype_stop``, ``heaptype_dump``.

A test's figures come from two dumps of the process's profile: one just before the
test starts recording, one after it stopped. The test's rows are what the second
dump holds in the time window between them (the runtime's clock ticks every
millisecond, so the window is padded with a short sleep on each side), less what was
already live at its start: allocations and bytes made during the test, the most bytes
live above the level at its start, and what it left live above that level.
"""

from __future__ import annotations

import ctypes
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..budget import TOTAL, Figures, measure

CLOCK_TICK_S = 0.002  # two ticks of the runtime's clock: allocations of a window share no tick with others
CONTROL = ("heaptype_start", "heaptype_stop", "heaptype_dump", "heaptype_output_path")


class InProcessRuntime:
    """The runtime's control functions, reached through ctypes."""

    def __init__(self, library: ctypes.CDLL, where: str):
        self.where = where  # "the process" (preloaded) or the library that brought it
        self._start = library.heaptype_start
        self._stop = library.heaptype_stop
        self._dump = library.heaptype_dump
        self._dump.argtypes = [ctypes.c_char_p]
        self._dump.restype = ctypes.c_int
        self._output_path = library.heaptype_output_path
        self._output_path.restype = ctypes.c_char_p

    @classmethod
    def find(cls) -> "InProcessRuntime | None":
        """The runtime of this process, if it is loaded and recording (not disabled)."""
        for library, where in _candidate_libraries():
            if all(hasattr(library, name) for name in CONTROL):
                runtime = cls(library, where)
                if runtime.output_path() is not None:
                    return runtime
        return None

    def output_path(self) -> str | None:
        path = self._output_path()
        return path.decode() if path else None

    def start(self) -> None:
        self._start()

    def stop(self) -> None:
        self._stop()

    def dump(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not self._dump(os.fsencode(path)):
            raise OSError(f"the HeapType runtime could not write {path}")


def _candidate_libraries():
    """The process's global symbols (LD_PRELOAD), then every mapped shared library
    (a ctypes library loaded RTLD_LOCAL that links the runtime)."""
    yield ctypes.CDLL(None), "the process"
    seen = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = [line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6]
    except OSError:
        return
    for path in paths:
        if path in seen or not path.startswith("/") or ".so" not in os.path.basename(path):
            continue
        seen.add(path)
        try:
            yield ctypes.CDLL(path, mode=os.RTLD_NOLOAD), path
        except OSError:
            continue


@dataclass
class TestWindow:
    """One test's recording: ``begin`` before the test body, ``end`` after it."""

    runtime: InProcessRuntime
    directory: Path
    begin_us: int = 0
    _before: dict[str, Figures] | None = None

    def begin(self, names=None) -> None:
        from ..analyze.profile import load

        before = self.directory / "before.htp"
        self.runtime.dump(before)
        profile = load(before) if names is None else names.load(before)
        self._before = measure(profile)
        self.begin_us = profile.totals.duration_us + 1
        before.unlink()
        time.sleep(CLOCK_TICK_S)
        self.runtime.start()

    def end(self, names=None):
        """Stop recording; returns (the test's profile, filtered to its window; its figures)."""
        from ..analyze.profile import load

        self.runtime.stop()
        time.sleep(CLOCK_TICK_S)
        after = self.directory / "test.htp"
        self.runtime.dump(after)
        profile = (load(after) if names is None else names.load(after)).filter(time=(self.begin_us / 1e6, None))
        return profile, window_figures(profile, self._before or {})


def window_figures(window, before: dict[str, Figures]) -> dict[str, Figures]:
    """A time-filtered profile's rows, less what was live at the window's start (its
    peak and live figures count every live block, the earlier ones included)."""
    figures = {}
    for group in window.analysis(infer=False).types:
        if not group.allocations:
            continue
        label = "(untyped)" if group.type is None else group.type
        start = before.get(label, Figures()).leaked
        figures[label] = Figures(max(group.peak_bytes - start, 0), group.bytes, group.allocations,
                                 max(group.live_bytes - start, 0))
    selected = window.selected
    start = before.get(TOTAL, Figures()).leaked
    figures[TOTAL] = Figures(max(selected.peak_bytes - start, 0), selected.bytes, selected.allocations,
                             max(selected.live_bytes - start, 0))
    return figures
