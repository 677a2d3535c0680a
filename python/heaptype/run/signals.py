"""Signals sent to `heaptype run` while its program runs go to the program.

A service manager, `timeout`, `kill` or a terminal's job control signals the process it
started (`heaptype run`) to stop, reload or ask a program: the program gets the signal,
as it would if it had been started directly. A `heaptype run` that SIGTERM ended at once
left its program running on, detached, with no summary of its run. SIGINT reaches the
program from the terminal itself (the runner passes a KeyboardInterrupt on when this
process alone got it).

After the program's exit, while `heaptype run` looks for what it left running in the
background and waits for it (background.py), the signals go to the daemon it left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from typing import Iterator

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)


class SignalForwarder:
    """Passes FORWARDED_SIGNALS on: to the program, then to the processes it left in
    the background. A signal that comes while there is nobody to pass it to yet (before
    the program is started: the handlers are set first, so that none ends this process
    meanwhile; after its exit, before its background is known) is passed on as soon as
    there is."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.background: list[int] | None = None  # known after the program's exit
        self.pending: list[int] = []

    def __call__(self, signum, _frame) -> None:
        if self.proc is None:
            self.pending.append(signum)
        elif self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
        elif self.background is None:
            self.pending.append(signum)
        else:
            for pid in self.background:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)

    def _pass_pending(self) -> None:
        pending, self.pending = self.pending, []
        for signum in pending:
            self(signum, None)

    def started(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self._pass_pending()

    def left_behind(self, pids: list[int]) -> None:
        """After the program's exit: the processes that get the signals now (the daemon
        it left running; none)."""
        self.background = list(pids)
        self._pass_pending()


@contextlib.contextmanager
def signals_forwarded() -> Iterator[SignalForwarder]:
    """FORWARDED_SIGNALS sent to this process go where the yielded forwarder says for
    the block's time. Only the main thread can set handlers (an embedding caller's
    worker thread forwards nothing)."""
    forwarder = SignalForwarder()
    if threading.current_thread() is not threading.main_thread():
        yield forwarder
        return
    previous = {number: signal.signal(number, forwarder) for number in FORWARDED_SIGNALS}
    try:
        yield forwarder
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
