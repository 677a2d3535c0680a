"""``heaptype demo``: build the example indexer with HeapType, run it, show the report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import flags

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


def build(cxx: str, sources: list[Path], output: Path) -> None:
    command = [cxx, "-std=c++17", "-O2", *flags.compile_flags(), *map(str, sources),
               *flags.link_flags(), "-o", str(output)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the demo failed:\n$ {' '.join(command)}\n{result.stderr}")


def run_demo(workdir: str | None = None, cxx: str | None = None) -> int:
    from .cli import CommandError, load_profile, run_profiled
    from .report import render_text

    try:
        flags.check_installed()
        compiler = find_compiler(cxx)
        sources = sorted((example_dir() / "src").glob("*.cpp"))
    except FileNotFoundError as e:
        raise CommandError(str(e)) from None
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="heaptype-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    binary, profile_path = base / "indexer", base / "indexer.htp"
    step(f"building {EXAMPLE} with {compiler} and HeapType's flags in {base}")
    try:
        build(compiler, sources, binary)
    except RuntimeError as e:
        raise CommandError(str(e)) from None
    step(f"running {binary.name} with profiling on")
    status, path = run_profiled([str(binary)], str(profile_path))
    if status != 0 or path is None:
        raise CommandError(f"the demo program failed (exit status {status})")
    step(f"report of {path}")
    print(render_text(load_profile(str(path)), top=15))
    if not workdir:
        shutil.rmtree(base, ignore_errors=True)
    return 0
