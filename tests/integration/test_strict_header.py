"""The force-included header under a strict project's warning flags.

Projects build with -Wall -Wextra -Weffc++ -Werror -pedantic; HeapType's headers are
force-included into every translation unit, so one warning of theirs would break the
whole build. Each compiler, in each calling-context mode, compiles tests/cpp/strict_warnings.cpp
(every new-expression form the macro rewrites, standard containers through the typed
allocator shim) without a diagnostic.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from heaptype.capture import flags
from tooling import require_tool

SOURCE = Path(__file__).resolve().parents[1] / "cpp" / "strict_warnings.cpp"
STRICT = ["-Wall", "-Wextra", "-Weffc++", "-Werror", "-pedantic"]


@pytest.mark.parametrize("compiler", ["g++", "clang++"])
@pytest.mark.parametrize("std", ["-std=c++11", "-std=c++20"])
@pytest.mark.parametrize("callstack", flags.CALLSTACK_MODES)
def test_header_compiles_cleanly_under_strict_warnings(tmp_path, compiler, std, callstack):
    cxx = require_tool(compiler)
    command = [cxx, std, "-O2", *STRICT, *flags.compile_flags(callstack=callstack, cxx=cxx),
               "-c", str(SOURCE), "-o", str(tmp_path / "strict.o")]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
