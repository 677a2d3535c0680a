"""Compiler and linker flags for programs profiled with HeapType.

The flag lists live in ``flags.json`` at the package's top (where the CMake package and
the Bazel rules find it too): one source of truth that ``heaptype --cflags/--ldflags``,
the CMake package and the Bazel rules all read.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

# The installed package (capture/ is one of its stages): include/, lib/, cmake/, flags.json
PACKAGE_DIR = Path(__file__).resolve().parent.parent


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
def _version_text(cxx: str) -> str:
    """``cxx --version``; `cxx` may be a command of several words (``python -m ziglang c++``)."""
    try:
        return subprocess.run([*shlex.split(cxx), "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, ValueError, subprocess.SubprocessError):
        return ""


@lru_cache(maxsize=None)
def compiler_family(cxx: str) -> str:
    """"GNU" or "Clang": the two flag dialects of flags.json."""
    name = Path(shlex.split(cxx)[0] if cxx.strip() else cxx).name
    if "clang" in name:
        return "Clang"
    return "Clang" if "clang" in _version_text(cxx).lower() else "GNU"


def compiler_version(cxx: str) -> tuple[str, int | None]:
    """(family, major version) of a compiler; the version None when unknown."""
    family = compiler_family(cxx)
    text = _version_text(cxx)
    pattern = r"clang version (\d+)" if family == "Clang" else r"\(.*?\)\s+(\d+)\.\d+"
    match = re.search(pattern, text)
    return family, int(match.group(1)) if match else None


# How new-expressions report their types (docs/capture.md): the `new` macro, or Clang's
# type-aware operator new (Clang >= TYPE_AWARE_MIN_CLANG). `auto` picks by compiler.
CAPTURE_MODES = ("auto", "macro", "type-aware")
TYPE_AWARE_MIN_CLANG: int = _table()["type_aware_min_clang"]


# new.hpp: the type-aware mode needs std::type_identity, a translation unit of an earlier
# standard takes the macro (said once, with the mode).
MACRO_BELOW_CXX20 = "translation units below C++20 take the macro"


def capture_mode(requested: str = "auto", cxx: str | None = None) -> tuple[str, str]:
    """The capture mode for compiler `cxx` ("macro" or "type-aware") and why, in words:
    `auto` gives type-aware for Clang >= 21, the macro for anything else (GCC, older
    Clang); a forced mode is taken as it is."""
    if requested not in CAPTURE_MODES:
        raise ValueError(f"unknown capture mode {requested!r}: use one of {', '.join(CAPTURE_MODES)}")
    cxx = cxx or default_compiler()
    family, major = compiler_version(cxx)
    compiler = f"{family} {major}" if major is not None else f"{family} (version unknown)"
    if requested != "auto":
        return requested, f"{compiler}, forced"
    if family == "Clang" and major is not None and major >= TYPE_AWARE_MIN_CLANG:
        return "type-aware", f"{compiler}: type-aware allocation; {MACRO_BELOW_CXX20}"
    return "macro", f"{compiler}: no type-aware allocation (Clang {TYPE_AWARE_MIN_CLANG} or later has it)"


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
                  callstack: str = DEFAULT_CALLSTACK, cxx: str | None = None, capture: str = "auto") -> list[str]:
    """Flags for every compile of a profiled program (for compiler `cxx`, default
    $CXX or g++). `capture`: macro, type-aware, or auto (capture_mode)."""
    table = _table()["compile"]
    options = list(table["headers"])
    if types:
        options += table["types"]
        options += table["capture"][capture_mode(capture, cxx)[0]]
    if stl_types:
        options += table["stl_types"]
    if debug:
        options += table["debug"]
    return _expand(options) + callstack_flags(callstack, cxx)


def is_zig(cxx: str) -> bool:
    """zig's Clang, called as `python -m ziglang c++`, `zig c++` or through a wrapper of
    another name (its --version names the ziglang directory it runs from)."""
    return "zig" in cxx or "zig" in _version_text(cxx).lower()


def link_flags(*, shared: bool = False, cxx: str | None = None) -> list[str]:
    """Flags for linking a profiled program with the runtime (static by default).
    zig's Clang rejects --export-dynamic-symbol (`unsupported linker arg`): it exports
    every symbol instead (-rdynamic), as the CMake package does for such linkers."""
    out = _expand(_table()["link"]["shared" if shared else "static"])
    if cxx and is_zig(cxx):
        out = ["-rdynamic" if token.startswith("-Wl,--export-dynamic-symbol=") else token for token in out]
    return out


def check_installed() -> None:
    """Raise FileNotFoundError naming what is missing from a broken install."""
    for path in (include_dir() / "heaptype" / "new.hpp", lib_dir() / "libheaptype.a"):
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: reinstall heaptype (pip install heaptype)")
