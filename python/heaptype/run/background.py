"""Processes a program leaves running when it exits: a daemon (nginx's default
``daemon on``, a server's ``--daemonize``) forks into the background and its first
process returns at once, so that the program `heaptype run` started ends within
milliseconds, its profile a few allocations long, while the server goes on.

While the program runs, `heaptype run` is its descendants' *subreaper*
(prctl PR_SET_CHILD_SUBREAPER): a process whose parent exits is given to it instead of
to init, so that the processes the program left behind can be named after it exits,
and waited for (``heaptype run --wait``). An adopted process that ends is reaped at once,
so that a long run leaves no zombies behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Iterator

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
POLL_SECONDS = 0.2  # how often a wait looks whether the background processes are still there


@dataclass(frozen=True)
class BackgroundProcess:
    """A process the program started that still runs after the program's own exit."""

    pid: int
    name: str  # /proc/PID/comm: the executable's name, which a new process title leaves alone
    adopted: bool = False  # this process's child now (its parent exited): a daemon's main process


def _set_subreaper(on: bool) -> bool:
    """Whether the kernel took the setting (Linux 3.4 and later)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _OrphanReaper:
    """Reaps the adopted processes that end while the program runs. The program's own
    process is left to the caller (subprocess waits for it by its pid)."""

    def __init__(self):
        self.program_pid: int | None = None

    def __call__(self, _signum, _frame) -> None:
        while True:
            try:
                # WNOWAIT: look first, so that the program's own end is left to its waiter
                seen = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if seen is None or seen.si_pid in (0, self.program_pid) or self.program_pid is None:
                return
            with contextlib.suppress(ChildProcessError):
                os.waitpid(seen.si_pid, 0)


@contextlib.contextmanager
def adopting_orphans() -> Iterator[_OrphanReaper]:
    """This process adopts its descendants' orphans for the block's time; tell the
    yielded reaper the program's pid once it is started. Only the main thread can set
    the SIGCHLD handler: elsewhere nothing is adopted."""
    reaper = _OrphanReaper()
    if threading.current_thread() is not threading.main_thread() or not _set_subreaper(True):
        yield reaper
        return
    previous = signal.signal(signal.SIGCHLD, reaper)
    try:
        yield reaper
    finally:
        _set_subreaper(False)  # the processes adopted so far stay this one's children
        signal.signal(signal.SIGCHLD, previous)


def _processes_now() -> dict[int, tuple[int, bool]]:
    """Every visible process's parent, and whether it has ended (a zombie), from
    /proc/PID/stat. An ended process stays in the tree: its children are given to a new
    parent only when its last thread ends (a forked child's other thread may outlive its
    main one by a moment), and they must not be lost meanwhile."""
    processes = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            processes[int(entry)] = (int(fields[1]), fields[0] in (b"Z", b"X"))
    return processes


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return "?"


def left_running(root: int | None = None) -> list[BackgroundProcess]:
    """The living descendants of ``root`` (this process): after the program's exit,
    what it left running, adopted or started by what it left."""
    root = os.getpid() if root is None else root
    processes = _processes_now()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in processes.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return [BackgroundProcess(pid, _name(pid), processes[pid][0] == root)
            for pid in sorted(found) if not processes[pid][1]]


def left_running_settled(settle: float = 0.02, at_most: float = 1.0) -> list[BackgroundProcess]:
    """left_running(), once two looks ``settle`` seconds apart agree (for at most
    ``at_most`` seconds). A daemon's parent returns while its child is still forking the
    daemon proper and exiting: a look at that moment names the child on its way out, or,
    when the child exits and the daemon appears while /proc is being read, nothing."""
    running = left_running()
    deadline = time.monotonic() + at_most
    while time.monotonic() < deadline:
        time.sleep(settle)
        reap_adopted()
        again = left_running()
        if again == running:
            break
        running = again
    return running


def reap_adopted() -> None:
    """Collects the ends of adopted processes (after the program's own was collected)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


def wait_for(processes: list[BackgroundProcess], forwarder, watching=None) -> list[BackgroundProcess]:
    """Waits until the processes the program left running, and those they start, have
    all exited, and says so on stderr; the signals heaptype run is sent meanwhile go to
    the daemon's main process (``forwarder``: signals.SignalForwarder), as they would to
    a program started directly. ``watching(gone, pids)`` shows them meanwhile (the live
    view): it calls ``gone(seconds)``, which waits up to that long and says whether they
    have all exited, until it says so; ``pids()`` are those running now. Ctrl-C stops
    the wait and leaves them running: returns those still running then (none when they
    all ended)."""
    names = ", ".join(f"{p.pid} ({p.name})" for p in processes[:5]) + (", ..." if len(processes) > 5 else "")
    it = "it" if len(processes) == 1 else "them"
    print(f"heaptype: the program exited and left {_processes(len(processes))} running in the background (pid "
          f"{names}): waiting for {it} to exit (Ctrl-C stops waiting; SIGTERM or SIGHUP sent to heaptype run is "
          "passed on)", file=sys.stderr, flush=True)
    waiting = _BackgroundWait(processes, forwarder)
    try:
        if watching is not None:
            watching(waiting.gone, waiting.pids)
        while not waiting.gone(POLL_SECONDS):
            pass
    except KeyboardInterrupt:
        return waiting.running
    return []


class _BackgroundWait:
    """The processes left running, looked at again every POLL_SECONDS while waited for."""

    def __init__(self, processes: list[BackgroundProcess], forwarder):
        self.running = processes
        self.forwarder = forwarder

    def gone(self, seconds: float) -> bool:
        """Waits up to ``seconds`` for them to exit; whether they all have."""
        deadline = time.monotonic() + seconds
        while self.running:
            self.forwarder.left_behind([p.pid for p in self.running if p.adopted])
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(POLL_SECONDS, left))
            reap_adopted()
            self.running = left_running()
        return True

    def pids(self) -> list[int]:
        return [p.pid for p in self.running]
