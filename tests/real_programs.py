"""Real programs of other projects for the tests, from where CI can get them (PyPI and
Debian only).

TinyXML-2 9.0.0: the sdist of PyPI's ``pytinyxml2==9.0.0`` (a SWIG binding) carries
TinyXML-2's own tinyxml2.cpp and tinyxml2.h, version 9.0.0. ``tinyxml2_source`` downloads
it once per test session (pip download) and unpacks those two files;
``build_tinyxml2_walk`` builds tests/cpp/real/tinyxml2_walk.cpp against them (parse a
generated document of a few MiB, walk it, edit it, print it back, print counts).

Use the fixtures from a test module:

    from real_programs import tinyxml2_tree  # noqa: F401 (fixture)

    def test_something(tinyxml2_tree, tmp_path):
        program = build_tinyxml2_walk(tinyxml2_tree, tmp_path / "walk", ["-O2", "-g"])
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tooling import missing, require_tool, run_once, shared_workdir

TINYXML2_REQUIREMENT = "pytinyxml2==9.0.0"
TINYXML2_VERSION = (9, 0, 0)
TINYXML2_FILES = ("tinyxml2.cpp", "tinyxml2.h")
WALK_SOURCE = Path(__file__).resolve().parent / "cpp" / "real" / "tinyxml2_walk.cpp"


def _header_version(header: Path) -> tuple[int, int, int]:
    text = header.read_text(encoding="utf-8", errors="replace")
    parts = [re.search(rf"TIXML2_{part}_VERSION\s*=\s*(\d+)", text) for part in ("MAJOR", "MINOR", "PATCH")]
    return tuple(int(m.group(1)) if m else -1 for m in parts)


def _download_tinyxml2(into: Path) -> None:
    downloads = into / "download"
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                           TINYXML2_REQUIREMENT, "-d", str(downloads)], capture_output=True, text=True, timeout=300)
    archives = sorted(downloads.glob("pytinyxml2-*.tar.gz"))
    if done.returncode != 0 or not archives:
        missing(f"pip download {TINYXML2_REQUIREMENT} failed: {done.stderr.strip()[-500:]}")
    tree = into / "tinyxml2"
    tree.mkdir(exist_ok=True)
    with tarfile.open(archives[0]) as archive:
        for member in archive.getmembers():
            name = Path(member.name).name
            if member.isfile() and name in TINYXML2_FILES:
                (tree / name).write_bytes(archive.extractfile(member).read())


def tinyxml2_source(cache: Path) -> Path:
    """The folder holding TinyXML-2 9.0.0's tinyxml2.cpp and tinyxml2.h, downloaded into
    ``cache`` the first time (pip download of the sdist; skips the test when that is
    impossible, fails it in CI)."""
    tree = cache / "tinyxml2"
    run_once(cache / "tinyxml2.ready", lambda: _download_tinyxml2(cache))
    if not all((tree / name).is_file() for name in TINYXML2_FILES):
        missing(f"{TINYXML2_REQUIREMENT}'s sdist holds no {' and '.join(TINYXML2_FILES)}")
    version = _header_version(tree / "tinyxml2.h")
    assert version == TINYXML2_VERSION, f"{TINYXML2_REQUIREMENT} brought TinyXML-2 {version}"
    return tree


@pytest.fixture(scope="session")
def tinyxml2_tree(tmp_path_factory) -> Path:
    """TinyXML-2 9.0.0's source folder, downloaded once per session (see tinyxml2_source)."""
    return tinyxml2_source(shared_workdir(tmp_path_factory, "real-programs"))


def build_tinyxml2_walk(tree: Path, output: Path, flags: list[str], link_flags: list[str] = ()) -> Path:
    """Builds tests/cpp/real/tinyxml2_walk.cpp with TinyXML-2 from ``tree`` into ``output``:
    g++ <flags> -I<tree> walk.cpp tinyxml2.cpp <link_flags>. Its argument: the document's
    size in MiB (default 4)."""
    cxx = require_tool("g++")
    output.parent.mkdir(parents=True, exist_ok=True)
    command = [cxx, *flags, "-I", str(tree), str(WALK_SOURCE), str(tree / "tinyxml2.cpp"), *link_flags,
               "-o", str(output)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"$ {' '.join(command)}\n{done.stderr[-4000:]}"
    return output
