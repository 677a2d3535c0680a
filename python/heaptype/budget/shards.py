"""One suite over many runners: which shard runs a test, and joining what the shards
wrote (baselines, results) back into what one full run writes.

A test's shard is a stable hash of its test id (SHA-256, never Python's salted
``hash``), so it depends on nothing but the id: not on the order tests were collected
in, on the other tests, on xdist, or on PYTHONHASHSEED. Adding a test moves no other
test to another shard (a split by position in a sorted list would shift every test
after it), and two runners that collect different sets (a platform's skip, a binary
that failed to build on one of them) still never run a test twice. The price is
balance: shards differ in size by a few per cent of a large suite.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

from .values import BudgetError

Entry = TypeVar("Entry")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based, as pytest-split and the --heap-shard option count) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``I/N``, e.g. ``2/4``: the second of four shards."""
        index, slash, count = text.partition("/")
        try:
            shard = cls(int(index), int(count)) if slash else None
        except ValueError:
            shard = None
        if shard is None:
            raise BudgetError(f"{text!r} is not a shard: write I/N, e.g. 1/4 for the first of four")
        if shard.count < 1:
            raise BudgetError(f"{text!r}: the number of shards N must be 1 or more")
        if not 1 <= shard.index <= shard.count:
            raise BudgetError(f"{text!r}: the shard number must be 1 to {shard.count} (I/N counts from 1)")
        return shard

    def holds(self, test: str) -> bool:
        return shard_of(test, self.count) == self.index

    def text(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(test: str, count: int) -> int:
    """The shard (1 to ``count``) that runs the test with this id."""
    digest = hashlib.sha256(test.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def join_by_test(sources: Iterable[tuple[Path, Mapping[str, Entry]]], what: str,
                 same: Callable[[Entry, Entry], bool] = lambda a, b: a == b) -> dict[str, Entry]:
    """The entries of several files, keyed by test id, as one mapping. A test in two
    files must hold the same entry in both (the same file given twice, or a test that
    both runs measured alike); else it is an error naming the test and both files:
    the shards of one run never measure a test twice. ``what``: the entries' name in
    that error (figures, results)."""
    joined: dict[str, Entry] = {}
    origin: dict[str, Path] = {}
    for path, entries in sources:
        for test, entry in entries.items():
            if test in joined and not same(joined[test], entry):
                raise BudgetError(f"test {test!r} is in {origin[test]} and in {path} with different {what}: "
                                  "merge the files of one run's shards (each test runs in one shard)")
            joined.setdefault(test, entry)
            origin.setdefault(test, path)
    return joined
