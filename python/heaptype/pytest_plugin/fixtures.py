"""CTest's fixtures (FIXTURES_SETUP, FIXTURES_REQUIRED, FIXTURES_CLEANUP), kept in a
run of budget items as ctest keeps them.

ctest runs the setup tests of a fixture before any test that requires it and its
cleanup tests after the last of them; a run that selects only some tests (``ctest -R``)
still runs the setup and cleanup tests of the fixtures they require; and a test whose
fixture's setup failed is not run. Under ``pytest --heap-budget``:

- the items are ordered so that setups come before the tests that require their
  fixture, and cleanups after them (any other order is kept), and -k, -m and
  --heap-shard bring back the setup and cleanup tests of the fixtures that the
  selected tests require;
- across xdist workers, a test waits until the setups of its fixtures have run (and
  fails without running when one of them failed), and a cleanup waits until every
  test of its fixture has: each awaited item leaves a mark in the build tree's
  ``.heaptype-fixtures/<run id>/`` when it ends. xdist hands each worker its items in
  collection order, so a test only ever waits for an item that comes before it, which
  another worker runs or has run, never for one queued behind it on its own worker.
"""

from __future__ import annotations

import heapq
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .running import safe_name

FIXTURE_DIRECTORY = ".heaptype-fixtures"
CTEST_DEFAULT_TIMEOUT = 1500.0  # s: ctest's own default for a test without TIMEOUT
POLL_SECONDS = 0.05
STALE_RUN_SECONDS = 24 * 3600


@dataclass(frozen=True)
class FixtureRoles:
    """What one CTest test is to the fixtures of its build tree."""

    tree: Path
    setup: tuple[str, ...] = ()
    cleanup: tuple[str, ...] = ()
    required: tuple[str, ...] = ()


def roles_from_properties(tree: Path, properties: dict[str, list[str]]) -> FixtureRoles | None:
    """The test's fixture roles from its FIXTURES_* properties; None when it has none."""
    roles = FixtureRoles(tree, *(tuple(properties.get(key, ())) for key in
                                 ("FIXTURES_SETUP", "FIXTURES_CLEANUP", "FIXTURES_REQUIRED")))
    return roles if roles.setup or roles.cleanup or roles.required else None


def roles_of(item) -> FixtureRoles | None:
    spec = getattr(item, "spec", None)
    return getattr(spec, "fixtures", None)


@dataclass
class Fixture:
    setups: list = field(default_factory=list)
    cleanups: list = field(default_factory=list)
    requirers: list = field(default_factory=list)


def _fixtures(items: list) -> dict[tuple[Path, str], Fixture]:
    """Each fixture (its build tree and name) with its items, in the items' order."""
    found: dict[tuple[Path, str], Fixture] = {}
    for item in items:
        roles = roles_of(item)
        if roles is None:
            continue
        for names, role in ((roles.setup, "setups"), (roles.cleanup, "cleanups"), (roles.required, "requirers")):
            for name in names:
                getattr(found.setdefault((roles.tree, name), Fixture()), role).append(item)
    return found


def bring_back(collected: list, selected: list) -> list:
    """The items of ``collected`` that ``selected`` lacks and that its tests need: the
    setup and cleanup tests of every fixture a selected test requires (and of the
    fixtures those require in turn)."""
    fixtures = _fixtures(collected)
    chosen = {id(item) for item in selected}
    added, queue = [], list(selected)
    while queue:
        roles = roles_of(queue.pop())
        for name in roles.required if roles else ():
            fixture = fixtures.get((roles.tree, name))
            for item in (fixture.setups + fixture.cleanups) if fixture else ():
                if id(item) not in chosen:
                    chosen.add(id(item))
                    added.append(item)
                    queue.append(item)
    return added


def ordered(items: list) -> list:
    """``items`` with every setup before the tests requiring its fixture and every
    cleanup after them; otherwise in their order. Items no fixture relates keep their
    place; a cycle (a setup that requires its own fixture) is left in the given order."""
    fixtures = _fixtures(items)
    position = {id(item): i for i, item in enumerate(items)}
    after: dict[int, set[int]] = {}
    for fixture in fixtures.values():
        for first, then in ([(s, r) for s in fixture.setups for r in fixture.requirers + fixture.cleanups] +
                            [(r, c) for r in fixture.requirers for c in fixture.cleanups]):
            if first is not then:
                after.setdefault(position[id(first)], set()).add(position[id(then)])
    if not after:
        return items
    waiting_on = [0] * len(items)
    for successors in after.values():
        for s in successors:
            waiting_on[s] += 1
    ready = [i for i in range(len(items)) if waiting_on[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for s in after.get(i, ()):
            waiting_on[s] -= 1
            if waiting_on[s] == 0:
                heapq.heappush(ready, s)
    if len(order) < len(items):
        placed = set(order)
        order += [i for i in range(len(items)) if i not in placed]
    return [items[i] for i in order]


@dataclass(frozen=True)
class Awaited:
    """An item another one waits for, and why."""

    nodeid: str
    test: str            # its CTest test's name
    fixture: str
    is_setup: bool       # a setup (its failure stops the waiting test) or a test of the fixture
    timeout: float


@dataclass
class FixturePlan:
    """Who waits for whom in this run, and where the marks are left."""

    run_id: str
    waits: dict[str, list[Awaited]] = field(default_factory=dict)  # nodeid -> what it waits for
    awaited: set[str] = field(default_factory=set)                 # nodeids whose end is marked
    trees: dict[str, Path] = field(default_factory=dict)           # nodeid -> its build tree

    def board(self, nodeid: str) -> "FixtureBoard":
        return FixtureBoard(self.trees[nodeid] / FIXTURE_DIRECTORY / self.run_id)


def plan(items: list, run_id: str, will_run) -> FixturePlan | None:
    """The waits of ``items`` (in their final order); ``will_run(item)``: False for a
    skipped item, which leaves no mark. None when no item has a fixture."""
    fixtures = _fixtures(items)
    if not fixtures:
        return None
    result = FixturePlan(run_id)
    for (tree, name), fixture in fixtures.items():
        setups = [s for s in fixture.setups if will_run(s)]
        tests = [r for r in fixture.requirers if will_run(r)]
        for item in fixture.requirers + fixture.cleanups:
            earlier = [s for s in setups if s is not item] + ([r for r in tests if r is not item]
                                                             if item in fixture.cleanups else [])
            for other in earlier:
                result.waits.setdefault(item.nodeid, []).append(
                    Awaited(other.nodeid, other.spec.ctest_test or other.name, name, other in setups,
                            other.spec.timeout or CTEST_DEFAULT_TIMEOUT))
                result.awaited.add(other.nodeid)
                result.trees[other.nodeid] = tree
            result.trees[item.nodeid] = tree
    return result


class FixtureBoard:
    """One run's marks in one build tree: an awaited item's end, passed or failed."""

    def __init__(self, directory: Path):
        self.directory = directory

    def leave_mark(self, nodeid: str, passed: bool) -> None:
        self._make_directory()
        mark = self.directory / f"{safe_name(nodeid)}.{'passed' if passed else 'failed'}"
        partial = mark.with_suffix(".partial")
        partial.write_text(nodeid + "\n")
        partial.replace(mark)

    def outcome(self, nodeid: str) -> bool | None:
        """True or False once the item has ended, None before."""
        stem = safe_name(nodeid)
        if (self.directory / f"{stem}.passed").exists():
            return True
        if (self.directory / f"{stem}.failed").exists():
            return False
        return None

    def wait_for(self, awaited: list[Awaited]) -> dict[str, bool]:
        """Each awaited item's outcome, once all have ended. Raises TimeoutError when they
        take longer than their timeouts together (an item whose worker died)."""
        deadline = time.monotonic() + sum(a.timeout for a in awaited)
        outcomes: dict[str, bool] = {}
        while True:
            for a in awaited:
                if a.nodeid not in outcomes:
                    outcome = self.outcome(a.nodeid)
                    if outcome is not None:
                        outcomes[a.nodeid] = outcome
            if len(outcomes) == len(awaited):
                return outcomes
            if time.monotonic() > deadline:
                missing = ", ".join(a.test for a in awaited if a.nodeid not in outcomes)
                raise TimeoutError(f"waited {sum(a.timeout for a in awaited):g} s for {missing} (CTest fixture "
                                   f"'{awaited[0].fixture}') to end, in vain: did the process running it die?")
            time.sleep(POLL_SECONDS)

    def _make_directory(self) -> None:
        if self.directory.is_dir():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for other in self.directory.parent.iterdir():  # earlier runs' marks
            try:
                if other != self.directory and time.time() - other.stat().st_mtime > STALE_RUN_SECONDS:
                    shutil.rmtree(other, ignore_errors=True)
            except OSError:
                pass
