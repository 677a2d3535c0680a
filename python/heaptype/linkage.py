"""Does a program bring HeapType's runtime itself, or must ``heaptype run`` preload it?

A program built with HeapType links the runtime statically (its code, and so the
runtime's messages, are in the executable) or needs ``libheaptype.so`` (directly,
or through a library built with HeapType: a mixed program). Anything else is a
plain binary: ``heaptype run`` preloads the shared runtime into it. A script is
neither: what it runs is unknown, so it is left alone unless ``--preload`` is given.
"""

from __future__ import annotations

import shutil
import subprocess
from enum import Enum
from pathlib import Path

# Only the runtime's own code holds this text (a message of control.cpp).
STATIC_MARK = b"HEAPTYPE_CALLSTACK="
SHARED_NAME = "libheaptype.so"


class Linkage(Enum):
    LINKED = "linked"      # the runtime is in the program or among its libraries
    PLAIN = "plain"        # an ELF program without it
    UNKNOWN = "unknown"    # not an ELF file (a script), or unreadable


def program_path(program: str, cwd: Path | None = None) -> Path | None:
    if "/" in program:
        path = (cwd or Path.cwd()) / program
        return path if path.is_file() else None
    found = shutil.which(program)
    return Path(found) if found else None


def runtime_linkage(program: str, cwd: Path | None = None) -> Linkage:
    path = program_path(program, cwd)
    try:
        data = path.read_bytes() if path is not None else b""
    except OSError:
        return Linkage.UNKNOWN
    if data[:4] != b"\x7fELF":
        return Linkage.UNKNOWN
    if STATIC_MARK in data:
        return Linkage.LINKED
    return Linkage.LINKED if SHARED_NAME in needed_libraries(path) else Linkage.PLAIN


def needed_libraries(path: Path) -> str:
    """ldd's list of the libraries the program loads at start (all of them, not only
    its own DT_NEEDED: a library built with HeapType brings the runtime too)."""
    try:
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout
