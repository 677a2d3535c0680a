"""Helpers shared by the test folders (tests/ is on sys.path through tests/conftest.py)."""

from __future__ import annotations

import fcntl
import importlib
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest


def require_tool(name: str) -> str:
    """Return the path of an external tool, or skip the test when it is missing.

    CI sets HEAPTYPE_REQUIRE_TOOLS=1 so that a missing compiler or linker fails
    loudly instead of silently shrinking the test suite.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    missing(f"{name} is not installed")


def missing(message: str):
    """Skips the test for something it needs, or fails it under HEAPTYPE_REQUIRE_TOOLS=1."""
    if os.environ.get("HEAPTYPE_REQUIRE_TOOLS") == "1":
        pytest.fail(f"{message} (HEAPTYPE_REQUIRE_TOOLS=1)", pytrace=False)
    pytest.skip(message)


def require_file(path: str, package: str) -> Path:
    """Like require_tool, for a file a package installs (a library's header)."""
    if Path(path).exists():
        return Path(path)
    missing(f"{path} is missing: install {package}")


def require_module(name: str, package: str):
    """Like require_tool, for a Python module (imported and returned)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"the Python module {name} is missing: pip install {package}")


def run_once(marker: Path, make: Callable[[], None]) -> None:
    """Runs `make` unless `marker` exists, then creates it: once per test session
    even when pytest-xdist workers share the directory (they wait on an flock of
    `<marker>.lock`)."""
    with open(marker.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            make()
            marker.touch()


def shared_workdir(tmp_path_factory, name: str) -> Path:
    """A directory of this test session that every pytest-xdist worker sees (the parent of
    the workers' basetemps), made once: for builds and downloads the workers share."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder
