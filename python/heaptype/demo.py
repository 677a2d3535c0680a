"""``heaptype demo``: build the example indexer with HeapType, run it, show the report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .capture import flags

EXAMPLE = "cmake-basic"


def example_dir() -> Path:
    """The example's sources: shipped in the package, or in a source checkout."""
    for candidate in (flags.PACKAGE_DIR / "examples" / EXAMPLE,
                      flags.PACKAGE_DIR.parent.parent / "examples" / EXAMPLE):
        if (candidate / "src" / "main.cpp").is_file():
            return candidate
    raise FileNotFoundError(f"the {EXAMPLE} example is missing from {flags.PACKAGE_DIR}: reinstall heaptype")


def find_compiler(preferred: str | None) -> str:
    for name in (preferred, os.environ.get("CXX"), "g++", "clang++", "c++"):
        if name and shutil.which(name):
            return name
    raise FileNotFoundError("no C++ compiler found: install g++ or clang++, or pass --cxx")


def step(message: str) -> None:
    print(f"==> {message}", file=sys.stderr, flush=True)


def run_step(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the demo failed:\n$ {' '.join(command)}\n{result.stdout}{result.stderr}")


def build_with_cmake(cmake: str, cxx: str, source: Path, build_dir: Path) -> Path:
    """Configure and build the example the way a user's project would: find_package."""
    run_step([cmake, "-S", str(source), "-B", str(build_dir), f"-DCMAKE_CXX_COMPILER={cxx}",
              "-DCMAKE_BUILD_TYPE=RelWithDebInfo", f"-DHeapType_DIR={flags.cmake_dir()}"])
    run_step([cmake, "--build", str(build_dir)])
    return build_dir / "indexer"


def build_directly(cxx: str, source: Path, build_dir: Path) -> Path:
    """Without CMake: the flags `heaptype --cflags` and `--ldflags` print."""
    build_dir.mkdir(parents=True, exist_ok=True)
    binary = build_dir / "indexer"
    sources = sorted(str(p) for p in (source / "src").glob("*.cpp"))
    run_step([cxx, "-std=c++17", "-O2", *flags.compile_flags(), *sources, *flags.link_flags(),
              "-o", str(binary)])
    return binary


def run_demo(workdir: str | None = None, cxx: str | None = None) -> int:
    from .present.console import CommandError, load_profile
    from .present.report import render_types_text
    from .run.runner import RunError, run_profiled

    try:
        flags.check_installed()
        compiler = find_compiler(cxx)
        source = example_dir()
    except FileNotFoundError as e:
        raise CommandError(str(e)) from None
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="heaptype-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    profile_path = base / "indexer.htp"
    cmake = shutil.which("cmake")
    try:
        if cmake:
            step(f"building {EXAMPLE} with CMake (find_package(HeapType), heaptype_instrument) "
                 f"and {compiler} in {base}")
            binary = build_with_cmake(cmake, compiler, source, base / "build")
        else:
            step(f"cmake not found: building {EXAMPLE} with {compiler} and `heaptype --cflags/--ldflags`")
            binary = build_directly(compiler, source, base / "build")
    except RuntimeError as e:
        raise CommandError(str(e)) from None
    step(f"running {binary.name} with profiling on")
    try:
        run = run_profiled([str(binary)], output=profile_path)
    except RunError as e:
        raise CommandError(str(e)) from None
    if run.returncode != 0 or run.profile_path is None:
        raise CommandError(f"the demo program failed ({run.exit_text()})")
    step(f"report of {run.profile_path}")
    print(render_types_text(load_profile(str(run.profile_path)), top=15))
    if not workdir:
        shutil.rmtree(base, ignore_errors=True)
    return 0
