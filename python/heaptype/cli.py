"""The ``heaptype`` command."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from . import __version__, flags

EPILOG = """\
typical use:
  g++ -O2 $(heaptype --cflags) app.cpp $(heaptype --ldflags) -o app
  heaptype run -o app.htp -- ./app args...
  heaptype report app.htp --top 20
"""


class CommandError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.cflags or args.ldflags or args.include_dir or args.lib_dir or args.cmake_dir:
            return print_build_info(args)
        if not getattr(args, "handler", None):
            parser.print_help()
            return 2
        return args.handler(args)
    except CommandError as e:
        print(f"heaptype: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="heaptype", description="Type-preserving heap profiler for C++.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"heaptype {__version__}")
    parser.add_argument("--cflags", action="store_true", help="print the compile flags of a profiled build")
    parser.add_argument("--ldflags", action="store_true", help="print the link flags of a profiled build")
    parser.add_argument("--shared", action="store_true", help="with --ldflags: link the shared runtime")
    parser.add_argument("--no-stl-types", action="store_true",
                        help="with --cflags: leave std::allocator untyped (no libstdc++ shim)")
    parser.add_argument("--callstack", choices=flags.CALLSTACK_MODES, default="instrument",
                        help="with --cflags: how allocations get their calling context "
                             "(default: instrument, -finstrument-functions without system headers)")
    parser.add_argument("--cxx", dest="flags_cxx", metavar="COMPILER",
                        help="with --cflags: the compiler the flags are for (default: $CXX or g++)")
    parser.add_argument("--include-dir", action="store_true", help="print the public header directory")
    parser.add_argument("--lib-dir", action="store_true", help="print the runtime library directory")
    parser.add_argument("--cmake-dir", "--cmakedir", action="store_true", dest="cmake_dir",
                        help="print the directory of HeapTypeConfig.cmake (for -DHeapType_DIR=)")
    sub = parser.add_subparsers(metavar="command")

    run = sub.add_parser("run", help="run a profiled program and keep its profile",
                         description="Run PROGRAM (built with heaptype's flags) with profiling on.")
    run.add_argument("-o", "--output", help="profile file (default heaptype.<program>.<pid>.htp); "
                     "%%p is replaced by the pid")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    run.set_defaults(handler=cmd_run)

    report = sub.add_parser("report", help="print a profile's per-type report")
    report.add_argument("profile", help="a .htp file")
    report.add_argument("--by", choices=["type"], default="type", help="group rows by (default: type)")
    report.add_argument("--top", type=positive_int, help="show only the first N rows")
    report.add_argument("--sort", choices=["peak", "bytes", "allocations", "live"], default="peak")
    report.add_argument("--format", choices=["text", "json"], default="text")
    report.add_argument("--map", action="append", default=[], metavar="[MODULE=]FILE",
                        help="linker map file for a stripped binary (repeatable)")
    report.set_defaults(handler=cmd_report)

    demo = sub.add_parser("demo", help="build and profile a small example program, print its report")
    demo.add_argument("--workdir", help="build here instead of a temporary directory (kept afterwards)")
    demo.add_argument("--cxx", help="C++ compiler (default: $CXX, then g++, clang++, c++)")
    demo.set_defaults(handler=cmd_demo)
    return parser


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def print_build_info(args) -> int:
    flags.check_installed()
    out = []
    if args.cflags:
        out += flags.compile_flags(stl_types=not args.no_stl_types, callstack=args.callstack,
                                   cxx=args.flags_cxx)
    if args.ldflags:
        out += flags.link_flags(shared=args.shared)
    if out:
        print(shlex.join(out))
    if args.include_dir:
        print(flags.include_dir())
    if args.lib_dir:
        print(flags.lib_dir())
    if args.cmake_dir:
        print(flags.cmake_dir())
    return 0


# --- run ------------------------------------------------------------------------------

def run_profiled(command: list[str], output: str | None) -> tuple[int, Path | None]:
    """Runs `command` with profiling on; returns its exit status and the profile path."""
    if not command:
        raise CommandError("run: no program given (heaptype run [-o FILE] -- PROGRAM ARGS...)")
    env = dict(os.environ)
    env.pop("HEAPTYPE_DISABLE", None)
    if output:
        env["HEAPTYPE_OUTPUT"] = os.path.abspath(output)
    try:
        proc = subprocess.Popen(command, env=env)
    except FileNotFoundError:
        raise CommandError(f"run: {command[0]}: no such program") from None
    except PermissionError:
        raise CommandError(f"run: {command[0]}: not executable") from None
    status = proc.wait()
    pattern = env.get("HEAPTYPE_OUTPUT") or f"heaptype.{Path(command[0]).name[:15]}.%p.htp"
    path = Path(pattern.replace("%p", str(proc.pid)).replace("%e", Path(command[0]).name[:15]))
    return status, (path if path.exists() else None)


def cmd_run(args) -> int:
    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    status, path = run_profiled(command, args.output)
    if path is None:
        raise CommandError(
            f"{command[0]} wrote no profile: build it with HeapType "
            "(compile with `heaptype --cflags`, link with `heaptype --ldflags`)")
    signal_note = f" (killed by signal {-status})" if status < 0 else ""
    print(f"heaptype: profile written to {path}{signal_note}", file=sys.stderr)
    return status if status >= 0 else 128 - status


# --- report ---------------------------------------------------------------------------

def parse_map_options(options: list[str]) -> dict[str, str]:
    maps = {}
    for option in options:
        module, sep, path = option.partition("=")
        if not sep:
            module, path = "", option
        if not Path(path).is_file():
            raise CommandError(f"--map {option}: {path}: no such file")
        maps[module] = path
    return maps


def load_profile(path: str, map_files: dict[str, str] | None = None):
    from .profile import ProfileError, load

    if not Path(path).exists():
        raise CommandError(f"{path}: no such profile file")
    try:
        profile = load(path, map_files=map_files)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    for warning in profile.warnings:
        print(f"heaptype: warning: {warning}", file=sys.stderr)
    return profile


def cmd_report(args) -> int:
    from . import report

    profile = load_profile(args.profile, parse_map_options(args.map) or None)
    render = report.render_json if args.format == "json" else report.render_text
    print(render(profile, sort=args.sort, top=args.top))
    return 0


# --- demo -----------------------------------------------------------------------------

def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(workdir=args.workdir, cxx=args.cxx)


if __name__ == "__main__":
    raise SystemExit(main())
