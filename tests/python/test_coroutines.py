"""C++20 coroutines' frames, which the compiler allocates with operator new where no
new-expression names a type: the report names each "coroutine frame of <the coroutine>",
found by the compiler's clones of the coroutine's body in the symbol table (GCC's
`<ramp>.Frame.actor`, Clang's `<ramp>.resume`). They were "(untyped)".

tests/cpp/coroutines.cpp makes 30 frames of a member coroutine, 20 and 10 of two
instances of a function template, 40 of a lambda's and 5 of a coroutine whose promise
type brings its own operator new; built with HeapType, and plain under `heaptype run`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import heaptype
from heaptype.capture import flags
from tooling import require_tool

SOURCE = Path(__file__).resolve().parents[1] / "cpp" / "coroutines.cpp"
HEAPTYPE = [sys.executable, "-m", "heaptype"]

GCC_FRAMES = {
    "coroutine frame of net::Session::serve(int)": 30,
    "coroutine frame of Task fill<double>(double, int)": 20,
    "coroutine frame of Task fill<long>(long, int)": 10,
    "coroutine frame of pooled(int)": 5,
}


def frame_rows(profile: heaptype.Profile) -> dict[str, int]:
    return {row.type: row.allocations for row in profile.by_type(infer=True)
            if (row.type or "").startswith("coroutine frame of ")}


def build(compiler: str, output: Path, *options: str, link: list[str] = ()) -> Path:
    done = subprocess.run([require_tool(compiler), "-std=c++20", *options, str(SOURCE), *link, "-o", str(output)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return output


def run_plain_under_heaptype(program: Path, output: Path) -> heaptype.Profile:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    done = subprocess.run([*HEAPTYPE, "run", "-o", str(output), "--", str(program)], capture_output=True, text=True,
                          env=environment, timeout=300)
    assert (done.returncode, done.stdout) == (0, "served 90\n"), done.stderr
    return heaptype.load(output)


def test_frames_of_a_program_built_with_heaptype(tmp_path):
    """GCC with HeapType's flags: every frame by its coroutine; the lambda's ramp is
    inlined into main, where nothing says it is a coroutine's (its 40 stay untyped)."""
    cxx = require_tool("g++")
    program = build("g++", tmp_path / "coroutines", "-O2", "-g", *flags.compile_flags(cxx=cxx),
                    link=flags.link_flags())
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_")}
    output = tmp_path / "built.htp"
    done = subprocess.run([str(program)], capture_output=True, text=True, timeout=120,
                          env={**environment, "HEAPTYPE_OUTPUT": str(output)})
    assert (done.returncode, done.stdout) == (0, "served 90\n"), done.stderr
    profile = heaptype.load(output)
    assert frame_rows(profile) == GCC_FRAMES
    assert profile.type_row("Node").allocations == 1
    assert profile.type_row("char[] of std::string").allocations == 30
    frame = next(row for row in profile.by_type(infer=True) if (row.type or "").endswith("Session::serve(int)"))
    assert not frame.inferred and frame.live_blocks == 0  # a row of its own, as the C library's are
    assert frame_rows(profile) == GCC_FRAMES and "coroutine frame" not in str(profile.by_type(infer=False))


def test_frames_of_a_plain_gcc_build_under_heaptype_run(tmp_path):
    program = build("g++", tmp_path / "coroutines", "-O2", "-g")
    assert frame_rows(run_plain_under_heaptype(program, tmp_path / "plain.htp")) == GCC_FRAMES


def test_frames_of_a_plain_clang_build_under_heaptype_run(tmp_path):
    """Clang names the body's clones `<ramp>.resume`; at -O0 it keeps each frame on the
    heap (at -O2 it elides these frames, which never outlive their caller) and the
    lambda's ramp out of line. The promise type's operator new is out of line too there:
    its 5 frames come from that function, not from the coroutine's, and stay untyped."""
    program = build("clang++", tmp_path / "coroutines", "-O0", "-g")
    rows = frame_rows(run_plain_under_heaptype(program, tmp_path / "clang.htp"))
    assert rows == {"coroutine frame of net::Session::serve(int)": 30,
                    "coroutine frame of Task fill<double>(double, int)": 20,
                    "coroutine frame of Task fill<long>(long, int)": 10,
                    "coroutine frame of main::$_0::operator()(int) const": 40}
