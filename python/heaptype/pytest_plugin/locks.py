"""CTest's RESOURCE_LOCK and RUN_SERIAL, kept across the processes of a run.

ctest never starts two tests that name the same RESOURCE_LOCK at once, nor a RUN_SERIAL
test beside any other. Under `pytest --heap-budget -n N` the tests run in N xdist
workers, so those promises are kept with file locks (flock) in the build tree, which
every worker (and every other run on the same tree) shares, as it shares the
resources themselves:

- each RESOURCE_LOCK name is a file held exclusively while the test runs;
- in a tree with a RUN_SERIAL test, every test holds the tree's serial lock, shared,
  and a RUN_SERIAL test holds it exclusively.

Locks are taken in one order (the serial lock, then the resources by name), so two
tests cannot wait for each other. A tree without these properties takes no lock.
"""

from __future__ import annotations

import contextlib
import fcntl
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .running import safe_name

LOCK_DIRECTORY = ".heaptype-locks"


class LockError(Exception):
    """A lock file cannot be made or taken (a read-only build tree): the message says where."""


@dataclass(frozen=True)
class TestLocks:
    """The locks one test holds while it runs."""

    directory: Path                 # where the lock files are (in the build tree)
    resources: tuple[str, ...] = ()  # RESOURCE_LOCK names, each held alone
    alone: bool = False             # RUN_SERIAL: no other test of the tree runs meanwhile
    beside_serial: bool = False     # the tree has RUN_SERIAL tests: this one waits for them

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            if self.alone or self.beside_serial:
                stack.enter_context(_locked(self.directory / "run-serial.lock", exclusive=self.alone))
            for name in sorted(set(self.resources)):
                stack.enter_context(_locked(self.directory / f"resource-{safe_name(name)}.lock", exclusive=True))
            yield


def locks_of(build_dir: Path, resources: list[str], run_serial: bool, tree_has_serial: bool) -> TestLocks | None:
    """The locks of a CTest test of ``build_dir``; None when it needs none."""
    if not resources and not tree_has_serial:
        return None
    return TestLocks(build_dir / LOCK_DIRECTORY, tuple(resources), alone=run_serial,
                     beside_serial=tree_has_serial and not run_serial)


@contextlib.contextmanager
def _locked(path: Path, *, exclusive: bool) -> Iterator[None]:
    try:
        path.parent.mkdir(exist_ok=True)
        f = open(path, "a")
    except OSError as e:
        raise LockError(f"cannot make the lock file {path} for CTest's RESOURCE_LOCK or RUN_SERIAL: "
                        f"{e.strerror}") from None
    with f:  # closing the file releases the lock
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield

