"""Builds and runs of real programs, plain and under HeapType, compared byte for byte.

Shared by the guest-safety suite (test_guest_safety.py, a few runs in CI) and the long
run (bench/guest_safety.py, hundreds of runs): one place that says how each mode is
built and run and what "behaves the same" means (exit status, stdout, stderr and every
file the program writes, byte for byte).

Modes of the TinyXML-2 driver (xml_driver.cpp):
  plain                    g++ -O2, no HeapType: the reference
  frame-pointer, instrument, none
                           g++ with `heaptype --cflags` in that call-stack mode, and
                           `heaptype --ldflags` (the static runtime)
  type-aware               Clang 22 of the ziglang wheel (libc++), type-aware capture
  preload                  the plain binary under `heaptype run` (runtime preloaded)
  aggregate                the frame-pointer build with HEAPTYPE_MODE=aggregate (counts per site)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
XML_DRIVER = HERE / "xml_driver.cpp"
ZIG_CXX = [sys.executable, "-m", "ziglang", "c++"]

XML_MODES = ("plain", "frame-pointer", "instrument", "none", "type-aware", "preload", "aggregate")
REFERENCE = "plain"
HEAPTYPE_CLI = [sys.executable, "-m", "heaptype"]


class BuildError(Exception):
    pass


@dataclass(frozen=True)
class Outcome:
    """What a run did, as far as anyone outside the process can tell."""

    returncode: int
    stdout: bytes
    stderr: bytes
    files: dict[str, str] = field(default_factory=dict)  # name -> sha256 of what the program wrote

    def digest(self) -> str:
        """sha256 of everything compared: exit status, stdout, stderr, files and their bytes."""
        h = hashlib.sha256(f"{self.returncode}\n".encode())
        for stream in (self.stdout, self.stderr):
            h.update(f"{len(stream)}\n".encode() + stream)
        for name, sha in sorted(self.files.items()):
            h.update(f"{name} {sha}\n".encode())
        return h.hexdigest()

    def differences(self, reference: "Outcome") -> list[str]:
        """How this run differs from the reference run, in words (empty: identical)."""
        out = []
        if self.returncode != reference.returncode:
            out.append(f"exit status {describe_status(self.returncode)}, expected "
                       f"{describe_status(reference.returncode)}")
        for name in ("stdout", "stderr"):
            mine, theirs = getattr(self, name), getattr(reference, name)
            if mine != theirs:
                out.append(f"{name} differs:\n--- expected\n{theirs[-2000:].decode(errors='replace')}"
                           f"\n--- got\n{mine[-2000:].decode(errors='replace')}")
        if self.files != reference.files:
            out.append(f"files written differ: {sorted(self.files.items())} != {sorted(reference.files.items())}")
        return out


def describe_status(returncode: int) -> str:
    if returncode < 0:
        try:
            import signal

            return f"{returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            return str(returncode)
    return str(returncode)


def files_in(directory: Path) -> dict[str, str]:
    """Every file under `directory`, by relative path, with the sha256 of its bytes."""
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def guest_environment(**settings: str) -> dict[str, str]:
    """The caller's environment without HeapType's settings or a preload, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPTYPE_") and k != "LD_PRELOAD"}
    env.update(settings)
    return env


def run_in(rundir: Path, command: list[str], env: dict[str, str], timeout: float) -> Outcome:
    """Runs `command` in an empty directory `rundir` and records what it did there."""
    if rundir.exists():
        shutil.rmtree(rundir)
    rundir.mkdir(parents=True)
    done = subprocess.run(command, cwd=rundir, env=env, capture_output=True, timeout=timeout)
    return Outcome(done.returncode, done.stdout, done.stderr, files_in(rundir))


def without_cli_note(outcome: Outcome, profile: Path) -> Outcome:
    """`heaptype run`'s own last line on stderr (`heaptype: profile written to <profile> ...`),
    printed by the command after the program ended, is not the program's output: drop
    exactly that line. Anything else the runtime printed stays and differs."""
    note = f"heaptype: profile written to {profile}".encode()
    lines = outcome.stderr.splitlines(keepends=True)
    if lines and lines[-1].startswith(note):
        lines = lines[:-1]
    return Outcome(outcome.returncode, outcome.stdout, b"".join(lines), outcome.files)


def heaptype_run(rundir: Path, command: list[str], profile: Path, timeout: float) -> Outcome:
    """`heaptype run -o <profile> -- command` (the runtime preloaded into a plain binary)."""
    if profile.exists():
        profile.unlink()
    outcome = run_in(rundir, [*HEAPTYPE_CLI, "run", "-o", str(profile), "--", *command], guest_environment(),
                     timeout)
    return without_cli_note(outcome, profile)


# --- the TinyXML-2 driver ----------------------------------------------------------------------

def _compile_command(mode: str, source: Path, include: Path, obj: Path) -> list[str]:
    from heaptype.capture import flags

    if mode in ("plain", "preload"):
        return ["g++", "-std=c++17", "-O2", "-g", f"-I{include}", "-c", str(source), "-o", str(obj)]
    if mode == "type-aware":
        zig = " ".join(ZIG_CXX)
        return [*ZIG_CXX, "-std=c++20", "-O2", *flags.compile_flags(cxx=zig, capture="type-aware"),
                f"-I{include}", "-c", str(source), "-o", str(obj)]
    return ["g++", "-std=c++17", "-O2", *flags.compile_flags(cxx="g++", callstack=mode), f"-I{include}", "-c",
            str(source), "-o", str(obj)]


def _link_command(mode: str, objects: list[Path], exe: Path) -> list[str]:
    from heaptype.capture import flags

    if mode in ("plain", "preload"):
        return ["g++", "-O2", *map(str, objects), "-o", str(exe)]
    if mode == "type-aware":
        return [*ZIG_CXX, "-O2", *map(str, objects), *flags.link_flags(cxx=" ".join(ZIG_CXX)), "-o", str(exe)]
    return ["g++", "-O2", *map(str, objects), *flags.link_flags(cxx="g++"), "-o", str(exe)]


def _build_step(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise BuildError(f"{what} failed (exit {done.returncode}):\n$ {' '.join(command)}\n{done.stderr[-6000:]}")


def build_name(mode: str) -> str:
    """The build a mode runs: the preload mode runs the plain one, the aggregate mode the
    frame-pointer one."""
    return {"preload": "plain", "aggregate": "frame-pointer"}.get(mode, mode)


def build_xml_driver(mode: str, tinyxml2: Path, workdir: Path) -> Path:
    """The driver and TinyXML-2, built unmodified in `mode`: workdir/<build_name>/xml_driver."""
    mode = build_name(mode)
    build = workdir / mode
    build.mkdir(parents=True, exist_ok=True)
    exe = build / "xml_driver"
    objects = []
    for source in (tinyxml2 / "tinyxml2.cpp", XML_DRIVER):
        obj = build / f"{source.stem}.o"
        _build_step(_compile_command(mode, source, tinyxml2, obj), f"compiling {source.name} ({mode})")
        objects.append(obj)
    _build_step(_link_command(mode, objects, exe), f"linking the XML driver ({mode})")
    return exe


def xml_command(exe: Path, seed: int, size_kib: int) -> list[str]:
    return [str(exe), str(seed), str(size_kib), "."]


def run_xml_driver(mode: str, exe: Path, seed: int, size_kib: int, rundir: Path, profile: Path,
                   timeout: float = 900) -> Outcome:
    """One run of the driver in `mode`; its profile (none for plain) goes to `profile`,
    outside `rundir`, so that rundir holds only what the program wrote."""
    command = xml_command(exe, seed, size_kib)
    if mode == "preload":
        return heaptype_run(rundir, command, profile, timeout)
    if mode == "plain":
        return run_in(rundir, command, guest_environment(), timeout)
    if profile.exists():
        profile.unlink()
    settings = {"HEAPTYPE_MODE": "aggregate"} if mode == "aggregate" else {}
    return run_in(rundir, command, guest_environment(HEAPTYPE_OUTPUT=str(profile), **settings), timeout)


# --- GCC's compiler proper (cc1plus, a C++ program of Debian's gcc package) ---------------------

def cc1plus_path() -> Path | None:
    """The cc1plus that g++ runs, or None without g++."""
    if not shutil.which("g++"):
        return None
    done = subprocess.run(["g++", "-print-prog-name=cc1plus"], capture_output=True, text=True)
    path = Path(done.stdout.strip())
    return path if done.returncode == 0 and path.is_absolute() and path.is_file() else None


def preprocess(source: Path, include: Path, out: Path) -> Path:
    """`g++ -E` of `source`: cc1plus's input, made once, plain."""
    _build_step(["g++", "-std=c++17", "-E", f"-I{include}", str(source), "-o", str(out)], f"preprocessing {source}")
    return out


def cc1plus_command(cc1plus: Path, preprocessed: Path, optimization: str = "-O0") -> list[str]:
    """What `g++ -Wall -Wextra -Wconversion` would run to compile `preprocessed` to assembly
    (out.s in the working directory); the warnings give stderr something to compare.
    -O0 by default: under `heaptype run` each allocation costs a stack walk through
    cc1plus's deep recursion, and -O2 makes three times as many allocations."""
    return [str(cc1plus), "-fpreprocessed", "-quiet", "-std=c++17", optimization, "-Wall", "-Wextra",
            "-Wconversion", "-frandom-seed=guest-safety", "-dumpbase", preprocessed.stem, str(preprocessed),
            "-o", "out.s"]
