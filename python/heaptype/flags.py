"""Compiler and linker flags for programs profiled with HeapType.

The flag lists live in ``flags.json`` beside this file: one source of truth that
``heaptype --cflags/--ldflags``, the CMake package and the Bazel rules all read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
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


def bazel_dir() -> Path:
    """The Bazel repository shipped in the package (defs.bzl, heaptype.bazelrc)."""
    return PACKAGE_DIR / "bazel"


@lru_cache(maxsize=None)
def _table() -> dict:
    return json.loads((PACKAGE_DIR / "flags.json").read_text())


def _expand(options: list[list[str]], **extra: str) -> list[str]:
    """Flatten token groups into one argument list, filling in the directories."""
    places = {"include": str(include_dir()), "stl_shim": str(stl_shim_dir()), "lib": str(lib_dir()), **extra}
    return [token.format(**places) for option in options for token in option]


CALLSTACK_MODES = ("frame-pointer", "instrument", "none")
# The mode every integration uses unless told (flags.json): frame pointers, whose
# cost is per allocation, not per call.
DEFAULT_CALLSTACK: str = _table()["default_callstack"]


def default_compiler() -> str:
    return os.environ.get("CXX") or "g++"


@lru_cache(maxsize=None)
def compiler_family(cxx: str) -> str:
    """"GNU" or "Clang": the two flag dialects of flags.json."""
    name = Path(cxx).name
    if "clang" in name:
        return "Clang"
    try:
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "GNU"
    return "Clang" if "clang" in version.lower() else "GNU"


@lru_cache(maxsize=None)
def system_include_dirs(cxx: str) -> tuple[str, ...]:
    """The compiler's own include directories: code inlined from them (the standard
    library) is not instrumented, which keeps -finstrument-functions cheap."""
    if not shutil.which(cxx):
        return ("/usr/include", "/usr/lib/gcc")
    result = subprocess.run([cxx, "-E", "-x", "c++", "-v", os.devnull], capture_output=True, text=True)
    block = re.search(r"#include <\.\.\.> search starts here:\n(.*?)End of search list", result.stderr, re.S)
    dirs = [line.strip() for line in block.group(1).splitlines()] if block else []
    return tuple(os.path.normpath(d) for d in dirs if d) or ("/usr/include",)


def callstack_flags(mode: str = DEFAULT_CALLSTACK, cxx: str | None = None) -> list[str]:
    """Flags that give allocations their calling context (see flags.json)."""
    if mode not in CALLSTACK_MODES:
        raise ValueError(f"unknown call stack mode {mode!r}: use one of {', '.join(CALLSTACK_MODES)}")
    cxx = cxx or default_compiler()
    exclude = ",".join([*system_include_dirs(cxx), str(include_dir())])
    return _expand(_table()["callstack"][mode][compiler_family(cxx)], exclude=exclude)


def compile_flags(*, types: bool = True, stl_types: bool = True, debug: bool = True,
                  callstack: str = DEFAULT_CALLSTACK, cxx: str | None = None) -> list[str]:
    """Flags for every compile of a profiled program (for compiler `cxx`, default
    $CXX or g++)."""
    table = _table()["compile"]
    options = list(table["headers"])
    if types:
        options += table["types"]
    if stl_types:
        options += table["stl_types"]
    if debug:
        options += table["debug"]
    return _expand(options) + callstack_flags(callstack, cxx)


def link_flags(*, shared: bool = False) -> list[str]:
    """Flags for linking a profiled program with the runtime (static by default)."""
    return _expand(_table()["link"]["shared" if shared else "static"])


def check_installed() -> None:
    """Raise FileNotFoundError naming what is missing from a broken install."""
    for path in (include_dir() / "heaptype" / "new.hpp", lib_dir() / "libheaptype.a"):
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: reinstall heaptype (pip install heaptype)")
