"""``heaptype attach PID`` and ``heaptype detach PID``: the runtime put into a running
process, and taken out again, with gdb (as heaptrack and memray do).

gdb stops the process, calls ``dlopen`` on the shared runtime inside it and then the
runtime's ``heaptype_attach(path)`` (``heaptype_detach()`` to detach), and lets it go
on. What the runtime does then is in src/runtime/attach.hpp. ptrace must be allowed:
the caller owns the process and Yama's ``/proc/sys/kernel/yama/ptrace_scope`` is 0,
or the caller has CAP_SYS_PTRACE (root).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from . import flags


class AttachError(Exception):
    """The runtime could not be attached or detached; the message says why."""


def ptrace_hint() -> str:
    scope = Path("/proc/sys/kernel/yama/ptrace_scope")
    try:
        value = scope.read_text().strip()
    except OSError:
        return "ptrace was refused (are you the process's owner, or root?)"
    return (f"ptrace was refused: {scope} is {value}; attaching needs 0 (or root / CAP_SYS_PTRACE for 1 and 2; "
            "3 forbids it), e.g. `sudo sysctl kernel.yama.ptrace_scope=0`")


def gdb_call(pid: int, expressions: list[str], timeout: float = 120) -> list[str]:
    """Calls each expression in process ``pid`` through gdb; their printed values."""
    gdb = shutil.which("gdb")
    if gdb is None:
        raise AttachError("gdb is not installed (apt-get install gdb)")
    command = [gdb, "-nx", "-batch", "-p", str(pid), "-ex", "set confirm off"]
    for expression in expressions:
        command += ["-ex", f"call {expression}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    text = done.stdout + done.stderr
    if "ptrace: Operation not permitted" in text:
        raise AttachError(ptrace_hint())
    if "ptrace: No such process" in text:
        raise AttachError(f"no process {pid}")
    values = re.findall(r"^\$\d+ = (?:\([^)]*\) )?(\S+)", done.stdout, re.M)
    if len(values) != len(expressions):
        raise AttachError(f"gdb could not call into process {pid}:\n{text.strip()[-2000:]}")
    return values


def process_name(pid: int) -> str:
    """The program's name, as the runtime's %e would say it."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or "program"
    except OSError:
        raise AttachError(f"no process {pid}") from None


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def attach(pid: int, output: Path) -> Path:
    """Loads the runtime into process ``pid`` and starts recording into ``output``."""
    library = Path(flags.lib_dir()) / "libheaptype.so"
    output = output.resolve()  # the process has its own working directory
    handle, started = gdb_call(pid, [f"(void*)dlopen({c_string(str(library))}, 2)",
                                     f"(int)heaptype_attach({c_string(str(output))})"])
    if handle in ("0x0", "0"):
        raise AttachError(f"dlopen of {library} failed in process {pid}")
    if started != "1":
        raise AttachError(f"the runtime did not start in process {pid}: it is already there (linked, preloaded "
                          f"or attached before), or {output} cannot be created")
    return output


def detach(pid: int) -> None:
    """Gives the process's allocations back to glibc and finishes the profile."""
    (done,) = gdb_call(pid, ["(int)heaptype_detach()"])
    if done != "1":
        raise AttachError(f"process {pid} has no attached HeapType runtime")
