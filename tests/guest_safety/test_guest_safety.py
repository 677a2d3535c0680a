"""Guest safety on real programs: HeapType never changes what the program does.

Real code of other open-source projects, unmodified, run plain and with HeapType in
each capture mode, several times each: every run must exit as the plain run does and
print (stdout, stderr) and write (every file) byte for byte what it prints and writes.

- TinyXML-2 9.0.0 (from PyPI's pytinyxml2 sdist: tests/real_programs.py, shared with the heaptrack cross-check), which
  placement-news its nodes into 4 KiB memory pools, driven by xml_driver.cpp (a
  generated document parsed, walked, changed, printed, deep-copied, reloaded, and
  every document destroyed): built with `heaptype --cflags/--ldflags` in the
  frame-pointer, instrument and none call-stack modes (g++), in the type-aware mode
  (Clang 22 of the ziglang wheel), and the plain build under `heaptype run`.
- GCC's compiler proper, cc1plus (C++, Debian's g++), under `heaptype run`: the
  assembly it writes and its warnings.

The runtime's failures here are rare (a pooled object overwritten in about 1 run in
100 of a 20 MiB parse, issue 22): CI makes a few runs of a 2 MiB document per mode;
bench/guest_safety.py makes hundreds (README, "Guest safety").
"""

from __future__ import annotations

from pathlib import Path

import pytest

import heaptype
import guest_runs
from guest_runs import Outcome
from real_programs import tinyxml2_tree  # noqa: F401  (a fixture)
from tooling import missing, require_module, require_tool, run_once, shared_workdir

SEED = 22
SIZE_KIB = 2048     # 2 MiB: ~430,000 allocations; ~170,000 pooled nodes and attributes per document
XML_RUNS = 5        # per mode, in CI; bench/guest_safety.py for the long run
CC1PLUS_RUNS = 2    # each ~260,000 allocations under stack walking: seconds, not fractions
POOL_BLOCKS = {f"tinyxml2::MemPoolT<{size}>::Block" for size in (80, 104, 112, 120)}


class XmlBuilds:
    """The XML driver built in each mode on demand, once per session (xdist workers share)."""

    def __init__(self, tinyxml2: Path, workdir: Path):
        self.tinyxml2 = tinyxml2
        self.workdir = workdir

    def program(self, mode: str) -> Path:
        require_tool("g++")
        if mode == "type-aware":
            require_module("ziglang", "ziglang (its wheel brings Clang 22)")
        name = guest_runs.build_name(mode)
        errors: list[str] = []

        def make() -> None:
            try:
                guest_runs.build_xml_driver(mode, self.tinyxml2, self.workdir)
            except guest_runs.BuildError as e:
                errors.append(str(e))

        run_once(self.workdir / f"{name}.built", make)
        exe = self.workdir / name / "xml_driver"
        if not exe.is_file():
            pytest.fail(errors[0] if errors else f"the {name} build of the XML driver failed (another worker)",
                        pytrace=False)
        return exe


@pytest.fixture(scope="session")
def xml_builds(tinyxml2_tree, tmp_path_factory) -> XmlBuilds:  # noqa: F811
    return XmlBuilds(tinyxml2_tree, shared_workdir(tmp_path_factory, "heaptype-guest-safety"))


@pytest.fixture(scope="session")
def xml_reference(xml_builds, tmp_path_factory) -> Outcome:
    """The plain build's run: what every other run must reproduce."""
    rundir = tmp_path_factory.mktemp("xml-reference")
    return guest_runs.run_xml_driver("plain", xml_builds.program("plain"), SEED, SIZE_KIB, rundir / "run",
                                     rundir / "unused.htp")


def repeated_differences(runs: int, run_once_more) -> list[str]:
    """Runs `run_once_more(i)` -> (Outcome, reference) `runs` times; the differences, per run."""
    failures = []
    for i in range(runs):
        outcome, reference = run_once_more(i)
        failures += [f"run {i + 1} of {runs}: {d}" for d in outcome.differences(reference)]
    return failures


def test_the_plain_xml_driver_is_deterministic_and_checks_itself(xml_builds, xml_reference, tmp_path):
    """The reference is worth comparing against: the plain program exits 0, its own
    checks pass (the deep copy and the reloaded output equal the changed document),
    it writes its two files, and a second plain run is identical to the first."""
    assert xml_reference.returncode == 0, xml_reference.stderr
    assert xml_reference.stderr == b""
    lines = xml_reference.stdout.decode().splitlines()
    assert [line.split(":")[0] for line in lines] == ["generated", "parsed", "changes", "changed", "printed",
                                                       "deep copy", "reloaded", "done"]
    assert lines[-3:] == ["deep copy: same", "reloaded: same", "done"]
    assert sorted(xml_reference.files) == ["input.xml", "output.xml"]
    again = guest_runs.run_xml_driver("plain", xml_builds.program("plain"), SEED, SIZE_KIB, tmp_path / "run",
                                      tmp_path / "unused.htp")
    assert again.differences(xml_reference) == []


def test_the_comparison_sees_a_line_the_runtime_prints(xml_builds, xml_reference, tmp_path):
    """The one line the runtime prints by design (a profile it cannot create) is a difference."""
    exe = xml_builds.program("frame-pointer")
    unwritable = guest_runs.guest_environment(HEAPTYPE_OUTPUT=str(tmp_path / "no-such-dir" / "p.htp"))
    outcome = guest_runs.run_in(tmp_path / "run", guest_runs.xml_command(exe, SEED, SIZE_KIB), unwritable, 600)
    assert outcome.stdout == xml_reference.stdout and outcome.files == xml_reference.files
    [difference] = outcome.differences(xml_reference)
    assert difference.startswith("stderr differs:") and "cannot create the profile file" in difference


@pytest.mark.parametrize("mode", [m for m in guest_runs.XML_MODES if m != guest_runs.REFERENCE])
def test_xml_driver_behaves_as_the_plain_build(mode, xml_builds, xml_reference, tmp_path):
    exe = xml_builds.program(mode)
    profile = tmp_path / "profile.htp"

    def once(i: int):
        return guest_runs.run_xml_driver(mode, exe, SEED, SIZE_KIB, tmp_path / "run", profile), xml_reference

    assert repeated_differences(XML_RUNS, once) == []
    # The runtime was there: the last run's profile is whole and saw the pools.
    taken = heaptype.load(profile)
    assert (taken.mode, taken.complete, taken.warnings) == ("preloaded" if mode == "preload" else "linked",
                                                            True, [])
    assert taken.totals.allocations > 400_000
    if mode != "preload":  # built with HeapType: the pools' blocks by type
        typed = {row.type: row.allocations for row in taken.by_type() if row.type in POOL_BLOCKS}
        assert set(typed) == POOL_BLOCKS and min(typed.values()) > 0, typed


# --- GCC's cc1plus under `heaptype run` ---------------------------------------------------------

@pytest.fixture(scope="session")
def cc1plus_input(tinyxml2_tree, tmp_path_factory) -> tuple[Path, Path]:  # noqa: F811
    """(cc1plus, TinyXML-2's tinyxml2.cpp preprocessed)."""
    require_tool("g++")
    cc1plus = guest_runs.cc1plus_path()
    if cc1plus is None:
        missing("g++ -print-prog-name=cc1plus names no file")
    workdir = tmp_path_factory.mktemp("cc1plus")
    return cc1plus, guest_runs.preprocess(tinyxml2_tree / "tinyxml2.cpp", tinyxml2_tree, workdir / "tinyxml2.ii")


def test_cc1plus_under_heaptype_run_behaves_as_without(cc1plus_input, tmp_path):
    cc1plus, preprocessed = cc1plus_input
    command = guest_runs.cc1plus_command(cc1plus, preprocessed)
    reference = guest_runs.run_in(tmp_path / "plain", command, guest_runs.guest_environment(), timeout=600)
    assert reference.returncode == 0, reference.stderr
    assert b"warning:" in reference.stderr  # -Wall -Wextra have something to say: stderr is compared too
    assert sorted(reference.files) == ["out.s"]
    profile = tmp_path / "cc1plus.htp"

    def once(i: int):
        return guest_runs.heaptype_run(tmp_path / "run", command, profile, timeout=900), reference

    assert repeated_differences(CC1PLUS_RUNS, once) == []
    taken = heaptype.load(profile)
    assert (taken.mode, taken.complete) == ("preloaded", True)
    assert taken.totals.allocations > 100_000
