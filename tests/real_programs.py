"""Real programs of other open-source projects, fetched the way CI can (PyPI, Debian).

TinyXML-2 9.0.0 (an XML library that placement-news its nodes into 4 KiB memory
pools, MemPoolT) comes from the sdist of the PyPI package `pytinyxml2==9.0.0`,
whose tinyxml2.cpp and tinyxml2.h are the library's own files. It is downloaded and
unpacked once per test session (xdist workers share it: the `tinyxml2` fixture); the
benchmark scripts call `fetch_tinyxml2` directly. `build_tinyxml2_walk` builds
tests/cpp/real/tinyxml2_walk.cpp against it (parse a generated document, walk it, edit
it, print it back, print counts), the heaptrack cross-check's program.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tooling import missing, require_tool, run_once, shared_workdir

TINYXML2_REQUIREMENT = "pytinyxml2==9.0.0"
TINYXML2_SDIST = "pytinyxml2-9.0.0.tar.gz"
# The sdist's digest as PyPI lists it: a changed download is an error, not a new library.
TINYXML2_SDIST_SHA256 = "1d011e41ab40aa544e6ff72ed44dfc0c8f31138bf851724523e4b1786e46eb05"
TINYXML2_FILES = ("tinyxml2.cpp", "tinyxml2.h")
WALK_SOURCE = Path(__file__).resolve().parent / "cpp" / "real" / "tinyxml2_walk.cpp"


class FetchError(Exception):
    pass


def fetch_tinyxml2(dest: Path) -> Path:
    """Downloads the sdist into `dest` and unpacks tinyxml2.cpp/.h into dest/tinyxml2;
    returns that directory. Raises FetchError when pip cannot get it."""
    sources = dest / "tinyxml2"
    if all((sources / name).is_file() for name in TINYXML2_FILES):
        return sources
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
               "--dest", str(dest), TINYXML2_REQUIREMENT]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    sdist = dest / TINYXML2_SDIST
    if done.returncode != 0 or not sdist.is_file():
        raise FetchError(f"$ {' '.join(command)}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != TINYXML2_SDIST_SHA256:
        raise FetchError(f"{sdist} has sha256 {digest}, expected {TINYXML2_SDIST_SHA256}")
    unpacked = dest / "tinyxml2.partial"
    unpacked.mkdir(exist_ok=True)
    with tarfile.open(sdist) as archive:
        for name in TINYXML2_FILES:
            member = archive.getmember(f"pytinyxml2-9.0.0/{name}")
            (unpacked / name).write_bytes(archive.extractfile(member).read())
    os.replace(unpacked, sources)  # whole or not at all
    return sources


@pytest.fixture(scope="session")
def tinyxml2(tmp_path_factory) -> Path:
    """Directory holding TinyXML-2 9.0.0's tinyxml2.cpp and tinyxml2.h (once per session)."""
    workdir = shared_workdir(tmp_path_factory, "heaptype-real-programs")
    failure: list[str] = []

    def make() -> None:
        try:
            fetch_tinyxml2(workdir)
        except FetchError as e:
            failure.append(str(e))

    run_once(workdir / "tinyxml2.fetched", make)
    sources = workdir / "tinyxml2"
    if not all((sources / name).is_file() for name in TINYXML2_FILES):
        missing(f"TinyXML-2 could not be downloaded from PyPI ({TINYXML2_REQUIREMENT}): "
                f"{failure[0] if failure else 'an earlier worker failed'}")
    return sources


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
