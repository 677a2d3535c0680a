"""Where the runtime's code lies in the programs that carry it.

The kernel maps a program's code 64 KiB around each page that runs (or a whole large
folio of the page cache), so code that never runs costs memory when it lies between code
that does. The runtime's private zstd (400 KiB, run only when a profile is compressed)
follows the runtime's own functions (cmake/PrivateZstd.cmake), in an executable linked
with libheaptype.a and in the preloaded libheaptype.so alike; bench/README.md measures
what its place among them cost the aggregated mode's peak RSS.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import require_tool

ZSTD_PREFIXES = ("ZSTD_", "ZSTDMT_", "FSE_", "HUF_", "HIST_")


def code_symbols(binary: Path) -> list[tuple[int, str]]:
    """(address, demangled name) of the functions `binary` defines."""
    nm = require_tool("nm")
    listing = subprocess.run([nm, "--defined-only", "--demangle", str(binary)], capture_output=True, text=True,
                             check=True).stdout
    symbols = []
    for line in listing.splitlines():
        fields = line.split(" ", 2)
        if len(fields) == 3 and fields[1] in "tTwW" and fields[0]:
            symbols.append((int(fields[0], 16), fields[2]))
    return symbols


def assert_zstd_after_the_runtime(binary: Path) -> None:
    symbols = code_symbols(binary)
    runtime = [(a, n) for a, n in symbols if n.startswith("heaptype::runtime::")]
    # ZSTD_trace_compress_begin and _end are the runtime's own (no-op tracing hooks).
    zstd = [(a, n) for a, n in symbols if n.startswith(ZSTD_PREFIXES) and not n.startswith("ZSTD_trace_")]
    assert len(runtime) > 50 and len(zstd) > 50, f"{binary}: {len(runtime)} runtime, {len(zstd)} zstd functions"
    last_runtime = max(runtime)
    first_zstd = min(zstd)
    assert last_runtime < first_zstd, (f"{binary}: {first_zstd[1]} at {first_zstd[0]:#x} lies before "
                                       f"{last_runtime[1]} at {last_runtime[0]:#x}")


def test_zstd_follows_the_runtime_in_a_linked_program(cpp_programs):
    assert_zstd_after_the_runtime(cpp_programs.program("empty"))


def test_zstd_follows_the_runtime_in_the_preloaded_library():
    from heaptype.capture import flags

    assert_zstd_after_the_runtime(Path(flags.lib_dir()) / "libheaptype.so")
