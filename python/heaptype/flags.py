"""Compiler and linker flags for programs profiled with HeapType.

The flag lists live in ``flags.json`` beside this file: one source of truth that
``heaptype --cflags/--ldflags``, the CMake package and the Bazel rules all read.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def include_dir() -> Path:
    """Public headers (``heaptype/new.hpp`` ...), installed with the package."""
    return PACKAGE_DIR / "include"


def stl_shim_dir() -> Path:
    """Include directory with the typed ``bits/c++allocator.h`` for libstdc++."""
    return include_dir() / "heaptype-stl"


def lib_dir() -> Path:
    return PACKAGE_DIR / "lib"


def cmake_dir() -> Path:
    """Directory of HeapTypeConfig.cmake: pass it as -DHeapType_DIR=..."""
    return PACKAGE_DIR / "cmake"


@lru_cache(maxsize=None)
def _table() -> dict:
    return json.loads((PACKAGE_DIR / "flags.json").read_text())


def _expand(options: list[list[str]], **extra: str) -> list[str]:
    """Flatten token groups into one argument list, filling in the directories."""
    places = {"include": str(include_dir()), "stl_shim": str(stl_shim_dir()), "lib": str(lib_dir()), **extra}
    return [token.format(**places) for option in options for token in option]


def compile_flags(*, types: bool = True, stl_types: bool = True, debug: bool = True) -> list[str]:
    """Flags for every compile of a profiled program."""
    table = _table()["compile"]
    options = list(table["headers"])
    if types:
        options += table["types"]
    if stl_types:
        options += table["stl_types"]
    if debug:
        options += table["debug"]
    return _expand(options)


def link_flags(*, shared: bool = False) -> list[str]:
    """Flags for linking a profiled program with the runtime (static by default)."""
    return _expand(_table()["link"]["shared" if shared else "static"])


def check_installed() -> None:
    """Raise FileNotFoundError naming what is missing from a broken install."""
    for path in (include_dir() / "heaptype" / "new.hpp", lib_dir() / "libheaptype.a"):
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: reinstall heaptype (pip install heaptype)")
