"""CTest discovery: the tests of a CMake build tree (``ctest --show-only=json-v1``),
GoogleTest binaries split into one case each, shared by the xdist workers of a run."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import budget as hb
from ..run import gtest
from ..run.gtest import LIST_TIMEOUT, parse_gtest_list


class DiscoveryError(Exception):
    pass


@dataclass
class CTestCase:
    """A CTest test (or one GoogleTest case of it) to run as a budget item."""

    name: str
    test: str
    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float | None
    will_fail: bool = False
    skip_reason: str | None = None
    resource_locks: list[str] = dataclasses.field(default_factory=list)  # RESOURCE_LOCK (see locks.py)
    run_serial: bool = False                                             # RUN_SERIAL
    fixtures: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # FIXTURES_* (see fixtures.py)


def discover_ctest(settings: hb.CTestSettings, session_id: str | None = None) -> list[CTestCase]:
    """The tests of a CMake build tree, from `ctest --show-only=json-v1`. ``session_id``:
    the test run's id shared by its xdist workers; the first worker's discovery is kept
    in the build tree for the others (each would run ctest and list every GoogleTest
    binary again, one after the other)."""
    ctest = shutil.which("ctest")
    if ctest is None:
        raise DiscoveryError("ctest is not installed: install CMake (e.g. `pip install cmake`) to discover tests")
    if not (settings.build_dir / "CTestTestfile.cmake").is_file():
        state = "does not exist" if not settings.build_dir.exists() else "has no CTestTestfile.cmake"
        raise DiscoveryError(f"build_dir {settings.build_dir} {state}: configure and build the project first "
                             "(with enable_testing() and add_test())")
    # gtest_discover_tests(... DISCOVERY_MODE PRE_TEST) lists a binary's cases when
    # ctest first needs them: xdist workers must not race to it (they would collect
    # different tests), and the listing run of an instrumented binary writes no profile.
    with open(settings.build_dir / ".heaptype-discovery.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shared = _shared_discovery_path(settings, session_id)
        cases = _read_shared_discovery(shared) if shared else None
        if cases is None:
            cases = _run_discovery(ctest, settings)
            if shared:
                _write_shared_discovery(shared, cases, session_id)
    return cases


def discover_for_workers(settings: hb.CTestSettings, session_id: str) -> threading.Thread:
    """The xdist controller's discovery, started at configure time in a thread of its
    own: it runs while the workers start their interpreters (~0.2 s of ctest a run,
    which the first worker would otherwise spend with the other waiting on the lock),
    and leaves the result where the workers look for it. A failure is left to the
    workers, which discover again and report it."""
    def discover() -> None:
        try:
            discover_ctest(settings, session_id)
        except (DiscoveryError, OSError):
            pass

    thread = threading.Thread(target=discover, name="heaptype-ctest-discovery", daemon=True)
    thread.start()
    return thread


def _run_discovery(ctest: str, settings: hb.CTestSettings) -> list[CTestCase]:
    command = [ctest, "--show-only=json-v1"] + (["-C", settings.configuration] if settings.configuration else [])
    environment = {**os.environ, "HEAPTYPE_DISABLE": "1"}
    try:
        done = subprocess.run(command, cwd=settings.build_dir, capture_output=True, text=True,
                              timeout=LIST_TIMEOUT, env=environment)
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"`{shlex.join(command)}` did not finish in {LIST_TIMEOUT} s") from None
    if done.returncode != 0:
        raise DiscoveryError(f"`{shlex.join(command)}` failed: {done.stderr.strip() or done.stdout.strip()}")
    try:
        tests = json.loads(done.stdout)["tests"]
    except (ValueError, KeyError, TypeError):
        raise DiscoveryError(f"`{shlex.join(command)}` printed no test list (CMake 3.14 or newer is needed)") from None
    cases = []
    for test in tests:
        if _selected(test.get("name", ""), settings):
            cases += _cases(test, settings)
    return cases


SHARED_DISCOVERY_PREFIX = ".heaptype-discovery-"


def _shared_discovery_path(settings: hb.CTestSettings, session_id: str | None) -> Path | None:
    if not session_id or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", session_id):
        return None
    # the same build tree may be discovered with other [ctest] settings in the same run
    key = hashlib.sha1(repr((settings.configuration, settings.include, settings.exclude,
                             settings.gtest_split)).encode()).hexdigest()[:12]
    return settings.build_dir / f"{SHARED_DISCOVERY_PREFIX}{session_id}-{key}.json"


def _read_shared_discovery(path: Path) -> list[CTestCase] | None:
    try:
        return [CTestCase(**{**entry, "cwd": Path(entry["cwd"])}) for entry in json.loads(path.read_text())]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not written yet (the first worker), or damaged: discover again


def _write_shared_discovery(path: Path, cases: list[CTestCase], session_id: str) -> None:
    """Written whole (rename) while the discovery lock is held; earlier runs' files go."""
    for stale in path.parent.glob(SHARED_DISCOVERY_PREFIX + "*.json"):
        if not stale.name.startswith(f"{SHARED_DISCOVERY_PREFIX}{session_id}-"):
            stale.unlink(missing_ok=True)
    entries = [{**dataclasses.asdict(case), "cwd": str(case.cwd)} for case in cases]
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(json.dumps(entries))
        partial.replace(path)
    except OSError:
        partial.unlink(missing_ok=True)  # a read-only build tree: each worker discovers on its own


def _selected(name: str, settings: hb.CTestSettings) -> bool:
    return any(hb.name_matches(g, name) for g in settings.include) and \
        not any(hb.name_matches(g, name) for g in settings.exclude)


FIXTURE_PROPERTIES = ("FIXTURES_SETUP", "FIXTURES_CLEANUP", "FIXTURES_REQUIRED")


def _properties(test: dict) -> dict[str, Any]:
    return {p.get("name"): p.get("value") for p in test.get("properties", []) if isinstance(p, dict)}


def _cases(test: dict, settings: hb.CTestSettings) -> list[CTestCase]:
    props = _properties(test)
    name = test["name"]
    env = dict(entry.split("=", 1) for entry in props.get("ENVIRONMENT", []) if "=" in entry)
    cwd = Path(props.get("WORKING_DIRECTORY") or settings.build_dir)
    timeout = float(props["TIMEOUT"]) if props.get("TIMEOUT") else None
    command = test.get("command")
    locks = [str(r) for r in props.get("RESOURCE_LOCK") or []]
    serial = bool(props.get("RUN_SERIAL"))
    fixtures = {key: [str(v) for v in props[key]] for key in FIXTURE_PROPERTIES if props.get(key)}
    case = CTestCase(name, name, list(command or []), cwd, env, timeout, bool(props.get("WILL_FAIL")),
                     resource_locks=locks, run_serial=serial, fixtures=fixtures)
    if not command:
        case.skip_reason = f"CTest test {name} has no command in this configuration"
        return [case]
    if props.get("DISABLED"):
        case.skip_reason = f"CTest test {name} is DISABLED"
        return [case]
    if _split_gtest(name, command, settings):
        names = list_gtest_cases(command, cwd, env)
        if names:
            return [CTestCase(f"{name}[{case_name}]", name, command + [f"--gtest_filter={case_name}"], cwd, env,
                              timeout, False, resource_locks=locks, run_serial=serial, fixtures=fixtures)
                    for case_name in names]
    return [case]


def _split_gtest(name: str, command: list[str], settings: hb.CTestSettings) -> bool:
    """Split only GoogleTest binaries (the program holds gtest's flag names) that CTest
    runs whole (gtest_discover_tests already gives one CTest test per case)."""
    wanted = settings.gtest_split is True or (
        isinstance(settings.gtest_split, list) and any(hb.name_matches(g, name) for g in settings.gtest_split))
    if not wanted or any(arg.startswith("--gtest_filter") for arg in command[1:]):
        return False
    return gtest.is_gtest_program(command[0])


def list_gtest_cases(command: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """`Suite.Case` names of a GoogleTest program (heaptype.run.gtest), a failure to list
    them as a DiscoveryError."""
    try:
        return gtest.list_gtest_cases(command, cwd, env)
    except gtest.ListError as e:
        raise DiscoveryError(str(e)) from None
