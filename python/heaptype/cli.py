"""The ``heaptype`` command."""

from __future__ import annotations

import argparse
import json
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
        if args.cflags or args.ldflags or args.include_dir or args.lib_dir or args.cmake_dir or args.bazel_dir:
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
    parser.add_argument("--bazel-dir", action="store_true",
                        help="print the directory of the Bazel repository (defs.bzl, heaptype.bazelrc)")
    sub = parser.add_subparsers(metavar="command")

    run = sub.add_parser("run", help="run a profiled program and keep its profile",
                         description="Run PROGRAM (built with heaptype's flags) with profiling on.")
    run.add_argument("-o", "--output", help="profile file (default heaptype.<program>.<pid>.htp); "
                     "%%p is replaced by the pid")
    run.add_argument("--budget", metavar="FILE",
                     help="then check the profile against this budget file, as `heaptype check` does "
                          "(exit status 1 when over budget)")
    run.add_argument("--budget-test", metavar="NAME", help="with --budget: whose budgets to apply")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    run.set_defaults(handler=cmd_run)

    report = sub.add_parser("report", help="print a profile's report: by type, by function or by call path")
    report.add_argument("profile", help="a .htp file")
    report.add_argument("--by", choices=["type", "function", "callpath"], default="type",
                        help="group rows by type (default), by function (self and total), or show the "
                             "merged call tree (callpath)")
    report.add_argument("--bottom-up", action="store_true",
                        help="with --by callpath: start at the allocating functions, then their callers")
    report.add_argument("--type", action="append", dest="types", metavar="PATTERN",
                        help="only types matching this glob, e.g. 'std::vector<*>' (repeatable)")
    report.add_argument("--inlined", action="store_true", default=None,
                        help="count functions inlined at call sites (from DWARF) as frames of their own: the "
                             "default with --by function, as pprof does; --no-inlined turns it off")
    report.add_argument("--no-inlined", dest="inlined", action="store_false", help=argparse.SUPPRESS)
    report.add_argument("--no-infer", dest="infer", action="store_false",
                        help="do not infer types of untyped allocations from allocator frames")
    report.add_argument("--top", type=positive_int,
                        help="show only the first N rows (with --by callpath: N children per frame)")
    report.add_argument("--sort", choices=["peak", "bytes", "allocations", "live"],
                        help="order by (default: peak for --by type, bytes otherwise)")
    report.add_argument("--format", choices=["text", "json"], default="text")
    report.add_argument("--map", action="append", default=[], metavar="[MODULE=]FILE",
                        help="linker map file for a stripped binary (repeatable)")
    report.set_defaults(handler=cmd_report)

    export = sub.add_parser("export", help="write a profile's call paths for other tools (pprof, flame graphs)")
    export.add_argument("profile", help="a .htp file")
    export.add_argument("--format", choices=["pprof-text", "folded", "pprof"], required=True,
                        help="pprof-text: gperftools heap profile (google-pprof PROGRAM FILE); folded: "
                             "'frame;...;type value' lines for flamegraph.pl; pprof: gzipped profile.proto")
    export.add_argument("-o", "--output", help="output file (default: standard output)")
    export.add_argument("--type", action="append", dest="types", metavar="PATTERN",
                        help="only types matching this glob (repeatable)")
    export.add_argument("--value", choices=["bytes", "allocations", "objects", "peak", "live"], default="bytes",
                        help="with --format folded: what each line counts (default: bytes allocated)")
    export.add_argument("--inlined", action="store_true", default=None,
                        help="include frames inlined at call sites (the default with --format pprof)")
    export.add_argument("--no-inlined", dest="inlined", action="store_false", help=argparse.SUPPRESS)
    export.add_argument("--map", action="append", default=[], metavar="[MODULE=]FILE",
                        help="linker map file for a stripped binary (repeatable)")
    export.set_defaults(handler=cmd_export)

    demo = sub.add_parser("demo", help="build and profile a small example program, print its report")
    demo.add_argument("--workdir", help="build here instead of a temporary directory (kept afterwards)")
    demo.add_argument("--cxx", help="C++ compiler (default: $CXX, then g++, clang++, c++)")
    demo.set_defaults(handler=cmd_demo)
    from .check_command import add_check_parser
    add_check_parser(sub)
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
    if args.bazel_dir:
        print(flags.bazel_dir())
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
    program_status = status if status >= 0 else 128 - status
    if not args.budget:
        return program_status
    from .check_command import cmd_check

    verdict = cmd_check(argparse.Namespace(profile=str(path), budget=args.budget, test=args.budget_test,
                                           quiet=False))
    if program_status != 0:
        print(f"heaptype: {command[0]} failed (exit status {program_status})", file=sys.stderr)
        return program_status
    return verdict


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
    if args.bottom_up and args.by != "callpath":
        raise CommandError("report: --bottom-up goes with --by callpath")
    if args.by == "type":
        render = report.render_json if args.format == "json" else report.render_text
        print(render(profile, sort=args.sort or "peak", top=args.top, types=args.types, infer=args.infer))
        return 0
    inlined = args.inlined if args.inlined is not None else args.by == "function"
    options = dict(sort=args.sort or "bytes", top=args.top, types=args.types, inlined=inlined,
                   infer=args.infer)
    if args.by == "function":
        if args.format == "json":
            print(json.dumps(report.functions_json(profile, **options), indent=2))
        else:
            print(report.render_functions_text(profile, **options))
    else:
        if args.format == "json":
            print(json.dumps(report.callpaths_json(profile, bottom_up=args.bottom_up, **options), indent=2))
        else:
            print(report.render_callpaths_text(profile, bottom_up=args.bottom_up, **options))
    return 0


def cmd_export(args) -> int:
    from .exports import export

    profile = load_profile(args.profile, parse_map_options(args.map) or None)
    data = export(profile, args.format, types=args.types, value=args.value, inlined=args.inlined)
    if args.output and args.output != "-":
        Path(args.output).write_bytes(data)
        print(f"heaptype: {args.format} export written to {args.output}", file=sys.stderr)
    elif args.format == "pprof" and sys.stdout.isatty():
        raise CommandError("export: --format pprof is binary: give -o FILE (or redirect standard output)")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


# --- demo -----------------------------------------------------------------------------

def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(workdir=args.workdir, cxx=args.cxx)


if __name__ == "__main__":
    raise SystemExit(main())
