"""Does a program bring HeapType's runtime itself, or must ``heaptype run`` preload it?

A program built with HeapType links the runtime statically (its code, and so the
runtime's messages, are in the executable) or names ``libheaptype.so`` among the
executable's own libraries, ahead of libc. Anything else gets the shared runtime
preloaded, mixed programs included: a library built with HeapType that needs
``libheaptype.so`` loads it after libc, whose malloc would then come first, so the
runtime must be preloaded (the library's need is then met by the same file). A
script is neither: what it runs is unknown, so it is left alone unless ``--preload``
is given.
"""

from __future__ import annotations

import shutil
from enum import Enum
from pathlib import Path

# Only the runtime's own code holds this text (a message of control.cpp).
STATIC_MARK = b"HEAPTYPE_CALLSTACK="
# A DT_NEEDED entry of the executable itself.
SHARED_MARK = b"libheaptype.so\0"


class Linkage(Enum):
    LINKED = "linked"      # the executable holds the runtime or needs libheaptype.so itself
    PLAIN = "plain"        # an ELF program without it: preload
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
    return Linkage.LINKED if STATIC_MARK in data or SHARED_MARK in data else Linkage.PLAIN
