"""Allocations on a stack the program made itself (a coroutine's, a fiber's: ucontext,
boost.context, PowerDNS's MTasker). The walk of frame pointers reads between an
allocation's frame and the top of the thread's stack, memory that is mapped only on the
thread's own stack: on a coroutine's stack mapped below it, the frame pointer left at the
stack's bottom could lead it into unmapped memory. Such frames are stepped over by their
frame rules alone, each from the call frame information (the words the unwinder would
read, no frame pointer followed on a guess), and their paths are whole; before, a coroutine's stack
far from the thread's lost its path (the allocating function alone), and one near it was
walked by frame pointers, its distance counted as stack depth (64 MiB).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import heaptype
from heaptype.capture import flags
from tooling import missing, require_tool

SOURCE = Path(__file__).resolve().parents[1] / "cpp" / "coroutine_stacks.cpp"
HEAPTYPE = [sys.executable, "-m", "heaptype"]
COUNT = 3000
CALLERS = tuple(f"(anonymous namespace)::{f}()" for f in ("work_in_coroutine", "level1", "level2"))


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, Path]:
    cxx = require_tool("g++")
    out = tmp_path_factory.mktemp("coroutine_stacks")
    commands = {
        "linked": [cxx, "-std=c++17", "-O2", "-g", *flags.compile_flags(cxx=cxx), str(SOURCE), *flags.link_flags(),
                   "-ldl", "-o", str(out / "linked")],
        "plain": [cxx, "-std=c++17", "-O2", "-g", "-fno-allocation-dce", "-rdynamic", str(SOURCE), "-pthread",
                  "-ldl", "-o", str(out / "plain")],
    }
    for name, command in commands.items():
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return {name: out / name for name in commands}


def profile_of(program: Path, build: str, args: list[str], output: Path) -> tuple[heaptype.Profile, int]:
    """The profile of `program args` (the plain build under `heaptype run`, the linked one
    as it is), and how many backtraces the runtime asked the unwinder for."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    command = [str(program), *args]
    if build == "plain":
        command = [*HEAPTYPE, "run", "-o", str(output), "--", *command]
    else:
        environment["HEAPTYPE_OUTPUT"] = str(output)
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith(f"done {COUNT} backtraces="), done.stderr
    return heaptype.load(output), int(done.stdout.split("=")[1])


@pytest.mark.parametrize("stack", ["malloc", "below"])
@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize("build", ["linked", "plain"])
def test_allocations_on_a_coroutines_stack_keep_their_call_paths(builds, build, where, stack, tmp_path):
    profile, backtraces = profile_of(builds[build], build, [where, stack, str(COUNT)],
                                     tmp_path / f"{build}.{where}.{stack}.htp")
    main_type = "Main" if build == "linked" else None  # preloaded: 24-byte blocks, untyped
    paths = {row.path: row.allocations for row in profile.call_paths()
             if row.type == main_type and row.path[-3:] == CALLERS}
    assert sum(paths.values()) == COUNT, {row.path: row.allocations for row in profile.call_paths()}
    # The deepest any thread's own stack went: a few KiB, not the 64 MiB to the coroutine's.
    assert 0 < profile.timeline().stack_peak_bytes < 1 << 20
    # Stepped over by rules the unwinder taught once, not a backtrace per allocation
    # (the coroutine's entry frame, whose caller the unwinder cannot find, was asked again
    # at every walk: PowerDNS Recursor ran 4.8x slower).
    assert backtraces <= 20, backtraces


BOOST_SOURCE = SOURCE.parent / "fcontext_stacks.cpp"
BOOST_CALLERS = ("coroutine_entry(boost::context::detail::transfer_t)", "serve()", "make_reply()")


@pytest.fixture(scope="module")
def boost_builds(tmp_path_factory) -> dict[str, Path]:
    """tests/cpp/fcontext_stacks.cpp, with HeapType and plain (boost.context's library:
    Debian's libboost-context-dev)."""
    cxx = require_tool("g++")
    if not Path("/usr/include/boost/context/detail/fcontext.hpp").exists():
        missing("boost.context's headers and library (apt-get install libboost-context-dev)")
    out = tmp_path_factory.mktemp("fcontext_stacks")
    commands = {
        "linked": [cxx, "-std=c++17", "-O2", "-g", *flags.compile_flags(cxx=cxx), str(BOOST_SOURCE),
                   *flags.link_flags(), "-lboost_context", "-ldl", "-o", str(out / "linked")],
        "plain": [cxx, "-std=c++17", "-O2", "-g", "-fno-allocation-dce", "-rdynamic", str(BOOST_SOURCE),
                  "-lboost_context", "-ldl", "-o", str(out / "plain")],
    }
    for name, command in commands.items():
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 and "boost_context" in done.stderr:
            missing(f"boost.context's library (apt-get install libboost-context-dev): {done.stderr[-300:]}")
        assert done.returncode == 0, done.stderr
    return {name: out / name for name in commands}


@pytest.mark.parametrize("build", ["linked", "plain"])
def test_allocations_in_a_boost_context_start_at_the_coroutines_entry(boost_builds, build, tmp_path):
    """boost.context (PowerDNS Recursor's coroutines): the bottom of each context's stack
    is a return address into make_fcontext, without call frame information. The walk ends
    there without a backtrace each time (pdns_recursor ran 4.8x slower), and the path
    starts at the function the context runs (it started at `make_fcontext`, 85% of
    pdns_recursor's allocations)."""
    profile, backtraces = profile_of(boost_builds[build], build, [str(COUNT)], tmp_path / f"{build}.htp")
    reply_type = "Reply" if build == "linked" else None
    paths = {row.path: row.allocations for row in profile.call_paths() if row.type == reply_type and
             row.path[-1] == "make_reply()"}
    assert paths == {BOOST_CALLERS: COUNT}, paths
    assert backtraces <= 20, backtraces
