"""Running a program with profiling on, for every integration: ``heaptype run``,
``pytest --heap-budget``, the CTest helper and the Bazel budget test.

The runtime names its profile from HEAPTYPE_OUTPUT (``%p`` the pid, ``%e`` the
program's name). The runner sets it, runs the program, and finds the profile of the
process it started: by its pid, else (a wrapper script that ran one profiled
program) the only profile the run wrote.

A preloaded runtime profiles the process started and not the programs it execs
(HEAPTYPE_CHILDREN, see src/runtime/child_environment.hpp) unless asked to follow
them. The runtime prints nothing into the program's output: its messages go to a log
file (HEAPTYPE_LOG) that the runner reads after the run, for the caller to show.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Callable

from .background import BackgroundProcess, adopting_orphans, left_running_settled, wait_for
from .signals import SignalForwarder, signals_forwarded

DEFAULT_PATTERN = "heaptype.%e.%p.htp"
# What the runtime says, as it is loaded, of a program whose malloc comes before its own
# (src/runtime/control.cpp, note_an_allocator_ahead).
ALLOCATOR_AHEAD = "ahead of the preloaded runtime"
ALLOCATOR_AHEAD_LINKED = "ahead of HeapType's runtime in"  # libheaptype.so, linked as a library
NOT_INSTRUMENTED_FIX = ("build it with HeapType: compile with `heaptype --cflags` and link with "
                        "`heaptype --ldflags`, or call heaptype_instrument(<target>) after "
                        "find_package(HeapType) in CMake")


class RunError(Exception):
    """The program could not be run, or its run cannot be judged; the message says
    why and what to do."""


@dataclass
class ProfiledRun:
    """One profiled run: the exit status, the output if captured, the profile written."""

    command: list[str]
    returncode: int
    profile_path: Path | None
    duration: float
    timed_out: bool = False
    stdout: str | None = None
    stderr: str | None = None
    other_profiles: list[Path] = field(default_factory=list)  # of other processes the run started
    preloaded: bool = False  # the runtime was preloaded into a program built without it
    runtime_messages: list[str] = field(default_factory=list)  # the runtime's lines ("heaptype: ...")
    # what the program left running at its exit (a daemon), when the run looked (``background``)
    left_running: list[BackgroundProcess] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return self.returncode < 0

    @property
    def exit_status(self) -> int:
        """As a shell reports it: 128+N for death by signal N."""
        return self.returncode if self.returncode >= 0 else 128 - self.returncode

    def exit_text(self) -> str:
        return exit_text(self.returncode)

    def no_profile_text(self) -> str:
        status = f" ({self.exit_text()})" if self.returncode else ""
        if self.preloaded:
            if any(ALLOCATOR_AHEAD in line for line in self.runtime_messages):
                return (f"{self.command[0]} wrote no profile{status}: its allocations never reached the preloaded "
                        "runtime (it brings its own malloc, see above). Fix: " + NOT_INSTRUMENTED_FIX +
                        "; or build it with the system's allocator")
            return (f"{self.command[0]} wrote no profile{status} although the runtime was preloaded: it ended "
                    "before its first allocation, or it is linked statically (LD_PRELOAD reaches only "
                    "dynamically linked programs). Fix: " + NOT_INSTRUMENTED_FIX)
        if script := script_path(self.command[0]):
            return (f"{self.command[0]} wrote no profile{status}: it is a script ({script}), and `heaptype run` "
                    "preloads the runtime into programs only (what a script runs is its own business). Fix: "
                    f"`heaptype run --preload --follow-children -- {shlex.join(self.command)}` profiles its "
                    "interpreter and each program it starts, one profile each; or run the program it starts")
        if any(ALLOCATOR_AHEAD_LINKED in line for line in self.runtime_messages):
            return (f"{self.command[0]} wrote no profile{status}: its allocations never reached HeapType's runtime, "
                    "which it links as a shared library (it brings its own malloc, see above, and a program's "
                    "own comes before any library's). Fix: build it with the system's allocator")
        return (f"{self.command[0]} wrote no profile{status}: it is not built with HeapType, or it did not start. "
                f"Fix: {NOT_INSTRUMENTED_FIX}")


def script_path(program: str) -> Path | None:
    """The file ``program`` names when it is a script (``#!``), as a wrapper such as a
    pyenv or asdf shim is."""
    from .linkage import program_path

    path = program_path(program)
    try:
        with open(path, "rb") as f:
            return path if f.read(2) == b"#!" else None
    except (OSError, TypeError):
        return None


def exit_text(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"exit status {returncode}"


def profiled_environment(output: str, *, extra: dict[str, str] | None = None,
                         keep_settings: bool = True) -> dict[str, str]:
    """The caller's environment with profiling on and the profile sent to ``output``.
    ``keep_settings=False`` drops the caller's HEAPTYPE_* settings: a budget must not
    depend on who runs it."""
    env = {k: v for k, v in os.environ.items() if keep_settings or not k.startswith("HEAPTYPE_")}
    env.pop("HEAPTYPE_DISABLE", None)
    env.update(extra or {})
    env["HEAPTYPE_OUTPUT"] = output
    return env


def _check_program(command: list[str], cwd: Path | None) -> None:
    if not command:
        raise RunError("no program given")
    program = command[0]
    base = cwd or Path.cwd()
    if not (base / program).exists() if "/" in program else shutil.which(program) is None:
        raise RunError(f"command not found: {program}: build the program first, or fix the command")
    if cwd is not None and not cwd.is_dir():
        raise RunError(f"working directory {cwd} does not exist")


def _prepare_output_dir(directory: Path) -> None:
    """Creates the profile's directory, and proves that one already there takes a file:
    otherwise the program would run unprofiled, and the failure would look like a build
    without HeapType. A directory made just now needs no proof (on ext4 the probe file
    costs ~0.4 ms, a tenth of a short test's run)."""
    try:
        try:
            os.mkdir(directory)
            return
        except FileNotFoundError:
            directory.mkdir(parents=True)
            return
        except FileExistsError:
            pass  # a directory (probed below) or a file (the probe says so)
        probe = directory / f".heaptype-probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except (FileExistsError, NotADirectoryError):  # a file where the directory should be
        raise RunError(f"cannot write the profile in {directory}: {e_not_a_directory(directory)}") from None
    except OSError as e:
        raise RunError(f"cannot write the profile in {directory}: {e.strerror}") from None


def e_not_a_directory(directory: Path) -> str:
    """Which part of the path is a file, for the message."""
    for part in [directory, *directory.parents]:
        if part.exists() and not part.is_dir():
            return f"{part} is not a directory"
    return "not a directory"


# A profile name's directives (%p the pid, %e the program, %% a percent sign), found
# from the left as the runtime reads them.
_DIRECTIVE = re.compile(r"(%[pe%])")


def _expand(pattern: str, pid: int, program: str) -> str:
    """The path the runtime makes of ``pattern``."""
    directives = {"%p": str(pid), "%e": program, "%%": "%"}
    return _DIRECTIVE.sub(lambda m: directives[m.group()], pattern)


def _files_like(directory: Path, *name_globs: str) -> set[Path]:
    """The entries of ``directory`` whose names match one of ``name_globs`` (one listing: a
    budget run looks twice per test, and pathlib's glob costs ten times as much)."""
    try:
        names = os.listdir(directory)
    except OSError:  # not there (yet), or not a directory
        return set()
    return {directory / name for name_glob in name_globs for name in fnmatch.filter(names, name_glob)}


def _name_glob(name: str, pid: int | None = None) -> str:
    """The fnmatch glob of a profile's file name pattern: ``%p`` the pid (any, when
    None), ``%e`` any program name, ``%%`` a percent sign, everything else literal
    (a ``[`` or ``*`` in the name too)."""
    directives = {"%p": "*" if pid is None else str(pid), "%e": "*", "%%": "%"}
    return "".join(directives.get(part) or glob_escape(part) for part in _DIRECTIVE.split(name) if part)


def profiles_of_a_run_like(pattern: str) -> set[Path]:
    """The files a profile name pattern (``%p``, ``%e``) matches now, and the
    ``<path>.<pid>`` files beside them: a forked child's without ``%p``, and a profile
    an exec moved aside for the image after it (a shell that execs the program: both
    wrote ``<name>.<pid>.htp``, docs/modes.md, "Exec")."""
    name = _name_glob(Path(pattern).name)
    return _files_like(_directory_of(pattern), name, name + ".*")


def profiles_of_processes(pattern: str, pids: list[int]) -> list[Path]:
    """The profiles the processes ``pids`` write now: the pattern with each pid (any
    program name), or ``<path>.<pid>`` for a forked process when it has no ``%p``."""
    name = Path(pattern).name
    with_pid = "%p" in _DIRECTIVE.findall(name)
    names = [_name_glob(name, pid) if with_pid else f"{_name_glob(name)}.{pid}" for pid in pids]
    return sorted(_files_like(_directory_of(pattern), *names))


def _directory_of(pattern: str) -> Path:
    return Path(pattern.replace("%%", "%")).parent


def find_profile(pattern: str, pid: int, program: str, before: set[Path]) -> tuple[Path | None, list[Path]]:
    """The profile of process ``pid``, and the others the run wrote (forked or exec'ed
    processes). Without ``%p`` a forked child writes ``<path>.<pid>``."""
    exact = Path(_expand(pattern, pid, program))
    written = profiles_of_a_run_like(pattern) - before
    mine = exact if exact.exists() else None
    if mine is None:
        by_pid = [p for p in written if p.name.endswith(f".{pid}.htp") or p.name.endswith(f".{pid}")]
        if len(by_pid) == 1:
            mine = by_pid[0]
        elif len(written) == 1:
            mine = next(iter(written))  # a wrapper's only profiled process
    others = sorted(p for p in written if p != mine)
    return mine, others


def preload_environment(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the shared runtime ahead of whatever LD_PRELOAD already names."""
    from ..capture import flags

    library = str(Path(flags.lib_dir()) / "libheaptype.so")
    earlier = env.get("LD_PRELOAD", "")
    return {**env, "LD_PRELOAD": f"{library}:{earlier}" if earlier else library}


def children_environment(env: dict[str, str], follow_children: bool) -> dict[str, str]:
    """Tells a preloaded runtime whether the programs its process execs keep it."""
    return {**env, "HEAPTYPE_CHILDREN": "profiled" if follow_children else "unprofiled"}


_log_directory: Path | None = None
_log_runs = itertools.count()


def _runtime_log_path() -> Path:
    """A log file name of its own for each run, in one temporary directory per
    process (removed at exit): the runtime creates the file only when it has
    something to say, so a quiet run costs one failed open."""
    global _log_directory
    if _log_directory is None:
        _log_directory = Path(tempfile.mkdtemp(prefix="heaptype-log-"))
        atexit.register(shutil.rmtree, _log_directory, True)
    return _log_directory / f"run-{next(_log_runs)}.log"


class RuntimeLog:
    """Where the runtime's messages go during a run (HEAPTYPE_LOG), read and removed
    after the run. A HEAPTYPE_LOG the caller set is theirs: left alone, not read."""

    def __init__(self, env: dict[str, str]):
        self.path = None if env.get("HEAPTYPE_LOG") else _runtime_log_path()
        self.env = env if self.path is None else {**env, "HEAPTYPE_LOG": str(self.path)}

    def messages(self) -> list[str]:
        """The lines the run's processes wrote, once each, in order."""
        if self.path is None:
            return []
        try:
            text = self.path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        self.path.unlink()
        return list(dict.fromkeys(text.splitlines()))


def should_preload(command: list[str], cwd: Path | None, preload: bool | None,
                   follow_children: bool = False) -> bool:
    """``preload`` if given, else whether the program is a plain binary, or a script whose
    children are to be followed (a wrapper such as mariadbd-safe: the runtime goes into
    its interpreter and from there into each program it starts; without it the run
    profiled nothing and said so only when the server had exited)."""
    if preload is not None:
        return preload
    from .linkage import Linkage, runtime_linkage

    linkage = runtime_linkage(command[0], cwd)
    if follow_children and linkage is Linkage.UNKNOWN and script_path(command[0]) is not None:
        return True
    return linkage is Linkage.PLAIN


def run_profiled(command: list[str], *, output: str | os.PathLike | None = None, cwd: Path | None = None,
                 env: dict[str, str] | None = None, timeout: float | None = None, capture: bool = False,
                 keep_settings: bool = True, preload: bool | None = False, follow_children: bool = False,
                 while_running: Callable[[subprocess.Popen, Path], None] | None = None,
                 background: str | None = None,
                 while_background: Callable[[Callable[[float], bool], Callable[[], list[Path]]], None] | None = None,
                 ) -> ProfiledRun:
    """Runs ``command`` with profiling on. ``output`` is the profile's path or pattern
    (default ``heaptype.%e.%p.htp`` in the working directory); relative to ``cwd``.
    ``preload``: put the shared runtime into the program; None: when the program does
    not bring it (see linkage.py). A preloaded runtime profiles the process started
    only; ``follow_children``: also each program it execs, into a profile of its own
    (``other_profiles``). ``while_running(process, profile path)`` runs while the
    program does (the live view) and returns when it has exited. ``background``: what
    to do with the processes the program leaves running when it exits (a daemon):
    "list" them (``left_running``), or "wait" for them, running
    ``while_background(gone, profiles)`` meanwhile (see background.wait_for; ``profiles()``
    are their profiles' paths)."""
    _check_program(command, cwd)
    preloaded = should_preload(command, cwd, preload, follow_children)
    base = Path(cwd) if cwd else Path.cwd()
    pattern = str(base / (os.fspath(output) if output else DEFAULT_PATTERN))
    _prepare_output_dir(Path(pattern).parent)
    before = profiles_of_a_run_like(pattern)
    if "%p" not in pattern and Path(pattern).exists():
        Path(pattern).unlink()  # a stale file of the same name is not this run's
    environment = profiled_environment(pattern, extra=env, keep_settings=keep_settings)
    if preloaded:
        environment = children_environment(preload_environment(environment), follow_children)
    log = RuntimeLog(environment)
    started = time.monotonic()
    try:
        with adopting_orphans() if background else contextlib.nullcontext() as reaper, \
                signals_forwarded() as forwarder:
            proc, stdout, stderr, timed_out = _run_to_the_end(command, cwd, log.env, capture, timeout, pattern,
                                                              while_running, forwarder, reaper)
            running = _left_in_background(background, forwarder, while_background, pattern)
    finally:
        messages = log.messages()
    duration = time.monotonic() - started
    mine, others = find_profile(pattern, proc.pid, os.path.basename(command[0]), before)
    return ProfiledRun(list(command), proc.returncode, mine, duration, timed_out, stdout, stderr, others, preloaded,
                       messages, running)


def _left_in_background(background: str | None, forwarder: SignalForwarder, while_background,
                        pattern: str) -> list[BackgroundProcess]:
    """What the program left running, after waiting for it when asked to; the signals
    heaptype run is sent meanwhile go to it."""
    if not background:
        forwarder.left_behind([])
        return []
    running = left_running_settled()
    if running and background == "wait":
        watching = None
        if while_background is not None:
            def watching(gone, pids):
                while_background(gone, lambda: profiles_of_processes(pattern, pids()))
        running = wait_for(running, forwarder, watching)
    forwarder.left_behind([])  # signals come to this process again after the run
    return running


def _run_to_the_end(command: list[str], cwd: Path | None, environment: dict[str, str], capture: bool,
                    timeout: float | None, pattern: str,
                    while_running: Callable[[subprocess.Popen, Path], None] | None, forwarder: SignalForwarder,
                    reaper=None):
    """Starts the program and waits for its end: (process, stdout, stderr, timed out).
    ``forwarder`` and ``reaper`` are told the program's process (signals.py, background.py)."""
    pipe = subprocess.PIPE if capture else None
    try:
        proc = subprocess.Popen(command, cwd=cwd, env=environment, stdout=pipe, stderr=pipe,
                                text=True if capture else None, errors="replace" if capture else None)
    except PermissionError:
        raise RunError(f"{command[0]} is not executable (chmod +x, or is it a directory?)") from None
    except OSError as e:
        raise RunError(f"cannot run {command[0]}: {e.strerror}") from None
    forwarder.started(proc)
    if reaper is not None:
        reaper.program_pid = proc.pid
    timed_out = False
    try:
        if while_running is not None:
            while_running(proc, Path(_expand(pattern, proc.pid, os.path.basename(command[0]))))
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        timed_out = True
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise
    return proc, stdout, stderr, timed_out


def run_for_budget(command: list[str], *, output: str | os.PathLike | None = None, cwd: Path | None = None,
                   env: dict[str, str] | None = None, timeout: float | None = None,
                   capture: bool = False, call_paths: bool = True, aggregate: bool = False) -> ProfiledRun:
    """A run whose profile a budget judges: the one way for ``pytest --heap-budget``,
    the CTest helper (``heaptype run --budget``) and the Bazel budget test. The caller's
    HEAPTYPE_* settings are dropped: a budget must not depend on who runs it (with
    HEAPTYPE_START=stopped in a shell's environment, nothing would be recorded). A
    wrapper that started several profiled processes, none of them the command's own,
    cannot be judged: budgets apply to one process. ``call_paths=False`` records each
    allocation's call site only (HEAPTYPE_CALLSTACK=none, unless ``env`` sets it): the
    same figures per type, at a fraction of a start-up-heavy program's cost. ``aggregate``:
    counts per call site instead of events (HEAPTYPE_MODE=aggregate): every figure a
    budget limits, exact, but a type's peak only where the runtime kept it (see
    heaptype.budget.evaluate.MeasuredFigures.snapshot_peaks)."""
    if not call_paths:
        env = {"HEAPTYPE_CALLSTACK": "none", **(env or {})}
    if aggregate:
        env = {"HEAPTYPE_MODE": "aggregate", **(env or {})}
    run = run_profiled(command, output=output, cwd=cwd, env=env, timeout=timeout, capture=capture,
                       keep_settings=False)
    if run.other_profiles and run.profile_path is None:
        names = ", ".join(p.name for p in run.other_profiles)
        raise RunError(f"the command started {len(run.other_profiles)} profiled processes ({names}) in "
                       f"{run.other_profiles[0].parent}: budgets apply to one process; run the program itself, "
                       "not a wrapper")
    return run
