"""The ``heaptype`` command: argument parsing and dispatch. Each command's work
lives in its stage's package (present/report, present/exports, run/runner, judge/check_command,
judge/merge_command) or in demo."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from collections import Counter
from pathlib import Path

from . import __version__
from .capture import flags
from .present.console import CommandError, load_profile, warn_found_later

EPILOG = """\
typical use:
  g++ -O2 $(heaptype --cflags) app.cpp $(heaptype --ldflags) -o app
  heaptype run -o app.htp -- ./app args...
  heaptype report app.htp --top 20
"""

VIEWS = ("type", "function", "callpath", "thread")
TIMELINE_VIEWS = ("type", "function", "callpath", "thread")
SORTS = ("peak", "bytes", "allocations", "objects", "live", "temporary")


class Parser(argparse.ArgumentParser):
    """argparse with HeapType's one error line, ``heaptype: error: WHAT``, status 2
    (subcommands' parsers are of this class too)."""

    def error(self, message: str):
        command = self.prog.partition(" ")[2]
        where = f"{command}: " if command else ""
        self.exit(2, f"heaptype: error: {where}{message} (see `{self.prog} --help`)\n")


def main(argv: list[str] | None = None) -> int:
    # Names from a profile may hold any bytes: never fail on printing them.
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
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
    except BrokenPipeError:
        return 0
    except OSError as e:  # an output file that cannot be written, a full disk...
        where = f"{e.filename}: " if e.filename is not None else ""
        print(f"heaptype: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        warn_found_later()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def span(parse):
    """A "LOW:HIGH" argument, either end may be empty."""

    def read(text: str) -> tuple:
        low, sep, high = text.partition(":")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected LOW:HIGH (either may be empty), not {text!r}")
        try:
            bounds = (parse(low) if low.strip() else None, parse(high) if high.strip() else None)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None
        if None not in bounds and bounds[0] > bounds[1]:
            raise argparse.ArgumentTypeError(f"{text!r}: LOW is larger than HIGH")
        return bounds

    return read


def size_value(text: str) -> int:
    from .budget.values import parse_size

    return parse_size(text)


DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def duration_value(text: str) -> float:
    """A duration in seconds: '2.5', '10ms', '3us', '500ns'."""
    text = text.strip()
    for unit in sorted(DURATION_UNITS, key=len, reverse=True):
        if text.endswith(unit) and text[:-len(unit)].strip():
            number, scale = text[:-len(unit)], DURATION_UNITS[unit]
            break
    else:
        number, scale = text, 1.0
    value = float(number) * scale
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text} is not a duration (0 or more; units s, ms, us, ns)")
    return value


def seconds(text: str) -> float:
    """A time since the program started: finite and not negative."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{text} is not a time since the start (seconds, 0 or more)")
    return value


def when(text: str) -> str | float:
    if text == "peak":
        return text
    try:
        return seconds(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'peak' or a time in seconds (0 or more), not {text!r}") from None


def add_view_options(parser: argparse.ArgumentParser) -> None:
    """What every view of a profile takes: text or JSON, type inference, the filters."""
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--no-infer", dest="infer", action="store_false",
                        help="do not infer types of untyped allocations from allocator frames")
    add_filter_options(parser)


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    """The one filter model: the same flags for every view and export."""
    parser.add_argument("--type", action="append", dest="types", metavar="GLOB",
                        help="only types matching this glob, e.g. 'std::vector<*>' (repeatable)")
    parser.add_argument("--function", action="append", dest="functions", metavar="GLOB",
                        help="only allocations with this function anywhere on their call path (repeatable)")
    parser.add_argument("--thread", action="append", dest="threads", metavar="N|NAME",
                        help="only allocations made by this thread: HeapType's number, or its name as a glob "
                             "(repeatable)")
    parser.add_argument("--size", type=span(size_value), metavar="MIN:MAX",
                        help="only blocks of this size, e.g. 64:1KiB or 4096: (either end may be empty)")
    parser.add_argument("--time", type=span(seconds), metavar="A:B",
                        help="only what happened between A and B seconds: allocations made then, peaks reached "
                             "then, live figures at B")
    parser.add_argument("--lifetime", type=span(duration_value), metavar="MIN:MAX",
                        help="only blocks that lived this long from allocation to free, e.g. :1ms (short-lived) "
                             "or 1s: (long-lived; a block never freed lives forever); units s, ms, us, ns "
                             "(default s). Needs a profile recorded with HEAPTYPE_ADDRESSES=1")
    parser.add_argument("--at", type=when, metavar="peak|SECONDS",
                        help="the heap as it stood at the peak, or at that time: live_bytes and live_blocks are "
                             "what was live then")
    parser.add_argument("--live", action="store_true", help="only groups with blocks live at the end, by live bytes")
    parser.add_argument("--map", action="append", default=[], metavar="[MODULE=]FILE",
                        help="linker map file for a stripped binary (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="heaptype", description="Type-preserving heap profiler for C++.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"heaptype {__version__}")
    parser.add_argument("--cflags", action="store_true", help="print the compile flags of a profiled build")
    parser.add_argument("--ldflags", action="store_true", help="print the link flags of a profiled build")
    parser.add_argument("--shared", action="store_true", help="with --ldflags: link the shared runtime")
    parser.add_argument("--no-stl-types", action="store_true",
                        help="with --cflags: leave std::allocator untyped (no libstdc++ shim)")
    parser.add_argument("--callstack", choices=flags.CALLSTACK_MODES, default=flags.DEFAULT_CALLSTACK,
                        help="with --cflags: how allocations get their calling context (default: "
                             f"{flags.DEFAULT_CALLSTACK}; frame-pointer: the stack walked at each allocation; "
                             "instrument: -finstrument-functions without system headers; none: the call site only)")
    parser.add_argument("--capture", choices=flags.CAPTURE_MODES, default="auto",
                        help="with --cflags: how new-expressions report their types (default auto: type-aware for "
                             f"Clang {flags.TYPE_AWARE_MIN_CLANG} or later, else the new macro); the choice is "
                             "said on stderr")
    parser.add_argument("--cxx", dest="flags_cxx", metavar="COMPILER",
                        help="with --cflags, --ldflags: the compiler the flags are for (default: $CXX or g++)")
    parser.add_argument("--include-dir", action="store_true", help="print the public header directory")
    parser.add_argument("--lib-dir", action="store_true", help="print the runtime library directory")
    parser.add_argument("--cmake-dir", "--cmakedir", action="store_true", dest="cmake_dir",
                        help="print the directory of HeapTypeConfig.cmake (for -DHeapType_DIR=)")
    parser.add_argument("--bazel-dir", action="store_true",
                        help="print the directory of the Bazel repository (defs.bzl, heaptype.bazelrc)")
    sub = parser.add_subparsers(metavar="command")

    run = sub.add_parser("run", help="run a program with profiling on and keep its profile",
                         description="Run PROGRAM with profiling on. A program built without HeapType gets the "
                                     "shared runtime preloaded (call paths by stack walking, types inferred).")
    run.add_argument("-o", "--output", help="profile file (default heaptype.<program>.<pid>.htp); "
                     "%%p is replaced by the pid, %%e by the program's name")
    run.add_argument("--budget", metavar="FILE",
                     help="then check the profile against this budget file, as `heaptype check` does "
                          "(exit status 1 when over budget)")
    run.add_argument("--budget-test", metavar="NAME", help="with --budget: whose budgets to apply")
    run.add_argument("--preload", action="store_true", default=None,
                     help="preload the shared runtime (default: when the program does not link it)")
    run.add_argument("--no-preload", dest="preload", action="store_false", help="never preload the runtime")
    run.add_argument("--aggregate", action="store_true",
                     help="keep counts per call site instead of every event (HEAPTYPE_MODE=aggregate): memory "
                          "and file bounded by call sites, for long runs; totals, types, call paths, leaks and "
                          "the peak stay exact, timelines are not available")
    run.add_argument("--follow-children", action="store_true",
                     help="with the runtime preloaded: also profile each program it starts, into a profile of "
                          "its own (by default only the process started is profiled)")
    run.add_argument("--wait", action="store_true",
                     help="when the program exits and leaves processes running in the background (a daemon, "
                          "a server's `daemon on`), wait for them to exit too, then list their profiles")
    run.add_argument("--watch", action="store_true",
                     help="show what is live while the program runs (redrawn every --interval), then the report; "
                          "with --wait, then what the processes it left running hold, summed")
    run.add_argument("--interval", type=float, default=1.0, metavar="S", help="with --watch: seconds between "
                                                                             "refreshes (1)")
    run.add_argument("--report", action="store_true", help="print the report when the program has exited")
    run.add_argument("--by", choices=("type", "function", "callpath"), default="type",
                     help="with --watch or --report: by type (default), by function or by call path")
    run.add_argument("--top", type=positive_int, default=10, help="with --watch or --report: rows shown (10)")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")
    run.set_defaults(handler=cmd_run)

    report = sub.add_parser("report", help="print a profile's report: by type, function, call path or thread")
    report.add_argument("profile", help="a .htp file")
    report.add_argument("--by", choices=VIEWS, default="type",
                        help="group by type (default), by function (self and total), by thread, or show the "
                             "merged call tree (callpath)")
    report.add_argument("--bottom-up", action="store_true",
                        help="with --by callpath: start at the allocating functions, then their callers")
    add_view_options(report)
    report.add_argument("--inlined", action="store_true", default=None,
                        help="count functions inlined at call sites (from DWARF) as frames of their own: the "
                             "default with --by function, as pprof does; --no-inlined turns it off")
    report.add_argument("--no-inlined", dest="inlined", action="store_false", help=argparse.SUPPRESS)
    report.add_argument("--top", type=positive_int,
                        help="show only the first N rows (with --by callpath: N children per node)")
    report.add_argument("--sort", choices=SORTS, help="order by (default: peak for --by type and thread, "
                                                      "bytes otherwise)")
    report.add_argument("--progress", action="store_true",
                        help="show progress on stderr (shown anyway on a terminal when a step takes over a second)")
    report.set_defaults(handler=cmd_report)

    export = sub.add_parser("export", help="write a profile's call paths for other tools (pprof, flame graphs)")
    export.add_argument("profile", help="a .htp file")
    export.add_argument("more_profiles", nargs="*", metavar="PROFILE",
                        help="with --format pprof: more profiles of the same program (other processes), merged "
                             "into one profile (see heaptype merge)")
    export.add_argument("--format", choices=["pprof-text", "folded", "pprof", "chrome", "massif", "heaptrack"],
                        required=True,
                        help="pprof-text: gperftools heap profile (google-pprof PROGRAM FILE); folded: "
                             "'frame;...;type value' lines for flamegraph.pl; pprof: gzipped profile.proto; "
                             "chrome: trace-event JSON, live bytes per type over time (Perfetto, chrome://tracing); "
                             "massif: valgrind massif's format (ms_print, massif-visualizer), types as the leaves; "
                             "heaptrack: heaptrack's data file (heaptrack_print, heaptrack_gui), the type as the "
                             "innermost frame, compressed by -o's suffix: .zst, .gz, else plain")
    export.add_argument("-o", "--output", help="output file (default: standard output)")
    add_filter_options(export)
    export.add_argument("--value", choices=["bytes", "allocations", "objects", "peak", "live", "temporary"],
                        default="bytes", help="with --format folded: what each line counts (default: bytes)")
    export.add_argument("--inlined", action="store_true", default=None,
                        help="include frames inlined at call sites (the default with --format pprof and "
                             "heaptrack)")
    export.add_argument("--no-inlined", dest="inlined", action="store_false", help=argparse.SUPPRESS)
    export.set_defaults(handler=cmd_export)

    timeline = sub.add_parser("timeline", help="live bytes over time, stacked by type, function, call path or thread")
    timeline.add_argument("profile", help="a .htp file")
    timeline.add_argument("--by", choices=TIMELINE_VIEWS, default="type",
                          help="stack by type (default), by function (what each allocated itself), by call path "
                               "(path and type) or by thread")
    timeline.add_argument("--top", type=positive_int, default=10, help="groups shown, the rest is 'other' (10)")
    add_view_options(timeline)
    timeline.set_defaults(handler=cmd_timeline)

    leaks = sub.add_parser("leaks", help="the blocks live at exit, by type and full call stack")
    leaks.add_argument("profile", help="a .htp file")
    leaks.add_argument("--top", type=positive_int, help="show only the N largest")
    add_view_options(leaks)
    leaks.set_defaults(handler=cmd_leaks)

    memory = sub.add_parser("memory", help="the address space: live blocks by address and type (needs a profile "
                                           "recorded with HEAPTYPE_ADDRESSES=1)")
    memory.add_argument("profile", help="a .htp file")
    add_view_options(memory)
    memory.set_defaults(handler=cmd_memory)

    diff = sub.add_parser("diff", help="compare two profiles group by group (matched by name)",
                          description="Compare profile B against profile A. Exit status 1 when --threshold is "
                                      "given and a group's peak grew by more than it (new groups count), else 0.")
    diff.add_argument("a", help="the profile before (a .htp file)")
    diff.add_argument("b", help="the profile after")
    diff.add_argument("--by", choices=VIEWS, default="type")
    diff.add_argument("--threshold", type=float, metavar="PCT",
                      help="exit status 1 when a peak grew by more than PCT percent")
    diff.add_argument("--top", type=positive_int, help="show only the N largest changes")
    add_view_options(diff)
    diff.set_defaults(handler=cmd_diff)

    attach = sub.add_parser("attach", help="start profiling a running process (with gdb)",
                            description="Load the runtime into process PID and record its allocations from now "
                                        "on. Blocks allocated before are unknown: their frees are ignored and "
                                        "counted. Needs gdb and ptrace permission.")
    attach.add_argument("pid", type=positive_int)
    attach.add_argument("-o", "--output", help="profile file (default heaptype.<program>.<pid>.htp here)")
    attach.set_defaults(handler=cmd_attach)
    detach = sub.add_parser("detach", help="stop profiling a process attached to, and finish its profile")
    detach.add_argument("pid", type=positive_int)
    detach.set_defaults(handler=cmd_detach)

    demo = sub.add_parser("demo", help="build and profile a small example program, print its report")
    demo.add_argument("--workdir", help="build here instead of a temporary directory (kept afterwards)")
    demo.add_argument("--cxx", help="C++ compiler (default: $CXX, then g++, clang++, c++)")
    demo.set_defaults(handler=cmd_demo)

    from .judge.check_command import add_check_parser
    from .judge.merge_command import add_fleet_parser, add_merge_parsers
    from .present.html.command import add_html_parser

    add_check_parser(sub)
    add_merge_parsers(sub)
    add_fleet_parser(sub)
    add_html_parser(sub, add_filter_options)
    return parser


def print_build_info(args) -> int:
    flags.check_installed()
    out = []
    if args.cflags:
        mode, why = flags.capture_mode(args.capture, args.flags_cxx)
        print(f"heaptype: type capture: {mode} ({why})", file=sys.stderr)
        out += flags.compile_flags(stl_types=not args.no_stl_types, callstack=args.callstack, cxx=args.flags_cxx,
                                   capture=mode)
    if args.ldflags:
        out += flags.link_flags(shared=args.shared, cxx=args.flags_cxx)
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


def cmd_run(args) -> int:
    from .run.runner import RunError, run_for_budget, run_profiled

    command = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not command:
        raise CommandError("run: no program given (heaptype run [-o FILE] -- PROGRAM ARGS...)")
    watching = watching_background = None
    if args.watch and args.aggregate:
        raise CommandError("run: --watch reads the events as they are written; an aggregated run writes its "
                           "counts at exit (and at HEAPTYPE_SIGNAL snapshots): use one or the other")
    env = {"HEAPTYPE_MODE": "aggregate"} if args.aggregate else {}
    # The runtime's ticker writes the file every second from the start, so that it can
    # be read while the program runs (--watch, `heaptype report`): a program that
    # allocates only in its first 50 ms would otherwise be written at its next
    # allocation. The caller's setting stands.
    env["HEAPTYPE_TICKER_AFTER_MS"] = os.environ.get("HEAPTYPE_TICKER_AFTER_MS", "0")
    if args.watch:
        from functools import partial

        from .run.live_view import show_live, watch

        watching = partial(watch, interval=args.interval, by=args.by, top=args.top)
        watching_background = partial(show_live, interval=args.interval, by=args.by, top=args.top)
    try:
        if args.budget:  # a budget's run is made as pytest's: counts first (docs/aggregate.md)
            run = run_for_budget(command, output=args.output, aggregate=True)
        else:
            run = run_profiled(command, output=args.output, preload=args.preload,
                               follow_children=args.follow_children, while_running=watching, env=env,
                               background="wait" if args.wait else "list", while_background=watching_background)
    except RunError as e:
        raise CommandError(f"run: {e}") from None
    print_runtime_messages(run)
    if run.profile_path is None:
        raise CommandError(run.no_profile_text())
    signal_note = f" ({run.exit_text()})" if run.crashed else ""
    mode_note = " (runtime preloaded: the program does not link it)" if run.preloaded else ""
    print(f"heaptype: profile written to {run.profile_path}{signal_note}{mode_note}", file=sys.stderr)
    print_other_profiles(run.other_profiles)
    print_left_running(run.left_running, waited=args.wait, watched=args.watch)
    if args.watch or args.report:
        cmd_report(build_parser().parse_args(["report", str(run.profile_path), "--by", args.by,
                                              "--top", str(args.top)]))
    if not args.budget:
        return run.exit_status
    from .judge.check_command import NeedsEvents, check_profile

    check = argparse.Namespace(profile=str(run.profile_path), budget=args.budget, test=args.budget_test, quiet=False,
                               full_names=False)
    try:
        verdict = check_profile(check)
    except NeedsEvents as e:  # once more, recording events
        print(f"heaptype: {e}: running it again, recording events", file=sys.stderr)
        try:
            run = run_for_budget(command, output=args.output)
        except RunError as error:
            raise CommandError(f"run: {error}") from None
        if run.profile_path is None:
            raise CommandError(run.no_profile_text())
        check.profile = str(run.profile_path)
        verdict = check_profile(check)
    if run.exit_status != 0:
        print(f"heaptype: {command[0]} failed ({run.exit_text()})", file=sys.stderr)
        return run.exit_status
    return verdict


# The runtime's notes that a process wrote "<path>.<pid>" because another one (or its
# image before an exec) had the path: `heaptype run` lists every profile written instead.
OWN_PROFILE_NOTES = ("heaptype: another process writes ", "heaptype: this process's image before its exec wrote ")

# More profiles than this are listed by name pattern, with their counts.
LISTED_PROFILES = 10


def print_runtime_messages(run) -> None:
    """What the runtime said during the run (it writes nothing into the program's
    output), after the program's own output."""
    for line in run.runtime_messages:
        if not line.startswith(OWN_PROFILE_NOTES):
            print(line, file=sys.stderr)


def print_other_profiles(paths: list[Path]) -> None:
    """The profiles of the other processes of the run (forked, or followed children):
    each path, or for a build's hundreds, how many match each name with its numbers
    between dots (the pids) as `*`, a glob to give `heaptype report`."""
    if not paths:
        return
    count = f"{len(paths)} more profile{'s' if len(paths) > 1 else ''}"
    if len(paths) <= LISTED_PROFILES:
        print(f"heaptype: {count}, of the processes it started:", file=sys.stderr)
        for path in paths:
            print(f"  {path}", file=sys.stderr)
        return
    groups = Counter(str(path.parent / re.sub(r"(?<![^.])\d+(?![^.])", "*", path.name)) for path in paths)
    names = f"{len(groups)} name{'s' if len(groups) > 1 else ''}"
    print(f"heaptype: {count}, of the processes it started ({names}, the pids as *):", file=sys.stderr)
    for glob, n in sorted(groups.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {n:5d}  {glob}", file=sys.stderr)


def print_left_running(processes, waited: bool, watched: bool = False) -> None:
    """The processes the program left running in the background (a daemon): their
    profiles are written as they run, so the run's list cannot hold them yet."""
    if not processes:
        return
    count = f"{len(processes)} process{'es' if len(processes) > 1 else ''}"
    names = ", ".join(f"{p.pid} ({p.name})" for p in processes[:LISTED_PROFILES])
    more = f" and {len(processes) - LISTED_PROFILES} more" if len(processes) > LISTED_PROFILES else ""
    how = ("stopped waiting for them" if waited else
           "`heaptype run --wait --watch` goes on showing what they hold until they exit" if watched else
           "`heaptype run --wait` waits for such processes and lists their profiles")
    print(f"heaptype: {count} the program started still run{'s' if len(processes) == 1 else ''} in the "
          f"background: pid {names}{more}; each profiled one writes its profile as it runs and finishes it "
          f"when it exits ({how})", file=sys.stderr)


def cmd_attach(args) -> int:
    from .capture.attach import AttachError, attach, process_name

    output = Path(args.output or f"heaptype.{process_name(args.pid)}.{args.pid}.htp")
    try:
        path = attach(args.pid, output)
    except AttachError as e:
        raise CommandError(f"attach: {e}") from None
    print(f"heaptype: attached to process {args.pid}, recording into {path}; `heaptype detach {args.pid}` "
          "finishes it", file=sys.stderr)
    return 0


def cmd_detach(args) -> int:
    from .capture.attach import AttachError, detach

    try:
        detach(args.pid)
    except AttachError as e:
        raise CommandError(f"detach: {e}") from None
    print(f"heaptype: detached from process {args.pid}; its profile is finished", file=sys.stderr)
    return 0


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


def filtered_profile(args, path: str | None = None):
    """The profile named on the command line with the one filter model applied."""
    from .analyze.profile import ProfileError

    profile = load_profile(path or args.profile, parse_map_options(args.map) or None)
    try:
        profile = profile.filter(types=args.types, functions=args.functions, threads=args.threads, sizes=args.size,
                                 time=args.time, lifetime=args.lifetime)
        if args.at is not None:
            profile = profile.at(args.at)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    return profile


def cmd_report(args) -> int:
    from .analyze.profile import ProfileError
    from .present import report

    if args.bottom_up and args.by != "callpath":
        raise CommandError("report: --bottom-up goes with --by callpath")
    profile = filtered_profile(args)
    json_out = args.format == "json"
    sort = args.sort or ("live" if args.live or args.at is not None else
                         "peak" if args.by in ("type", "thread") else "bytes")
    try:
        profile.analysis(call_tree=args.by in ("function", "callpath"), functions=args.by == "function",
                         bottom_up=args.bottom_up, inlined=_inlined(args), infer=args.infer,
                         progress=args.progress or sys.stderr.isatty())
        if args.by == "type":
            render = report.types_json if json_out else report.render_types_text
            output = render(profile, sort, args.top, infer=args.infer, live=args.live)
        elif args.by == "thread":
            render = report.threads_json if json_out else report.render_threads_text
            output = render(profile, sort, args.top, live=args.live)
        elif args.by == "function":
            render = report.functions_json if json_out else report.render_functions_text
            output = render(profile, sort, args.top, inlined=_inlined(args), infer=args.infer, live=args.live)
        else:
            render = report.callpaths.callpaths_json_text if json_out else report.render_callpaths_text
            output = render(profile, sort, args.top, bottom_up=args.bottom_up, inlined=_inlined(args),
                            infer=args.infer)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    if isinstance(output, dict):
        import json

        output = json.dumps(output, indent=2)
    print(output)
    return 0


def print_view(args, as_json, as_text, *views) -> None:
    """Prints a view as JSON or text (by --format); a profile that cannot be read or
    named is a command error."""
    import json

    from .analyze.profile import ProfileError

    try:
        print(json.dumps(as_json(*views), indent=2) if args.format == "json" else as_text(*views))
    except ProfileError as e:
        raise CommandError(str(e)) from None


def cmd_timeline(args) -> int:
    from functools import partial

    from .present.report import render_timeline_text, timeline_json

    options = dict(by=args.by, top=args.top, infer=args.infer)
    print_view(args, partial(timeline_json, **options), partial(render_timeline_text, **options),
               filtered_profile(args))
    return 0


def cmd_leaks(args) -> int:
    from functools import partial

    from .present.report import leaks_json, render_leaks_text

    options = dict(top=args.top, infer=args.infer)
    print_view(args, partial(leaks_json, **options), partial(render_leaks_text, **options), filtered_profile(args))
    return 0


def cmd_memory(args) -> int:
    from functools import partial

    from .present.report import memory_json, render_memory_text

    print_view(args, partial(memory_json, infer=args.infer), partial(render_memory_text, infer=args.infer),
               filtered_profile(args))
    return 0


def cmd_diff(args) -> int:
    from functools import partial

    from .analyze.profile import ProfileError
    from .present.report import diff_json, diff_rows, over_threshold, render_diff_text

    a, b = filtered_profile(args, args.a), filtered_profile(args, args.b)
    options = dict(by=args.by, threshold=args.threshold, infer=args.infer, top=args.top)
    print_view(args, partial(diff_json, **options), partial(render_diff_text, **options), a, b)
    try:
        grown = over_threshold(diff_rows(a, b, args.by, infer=args.infer), args.threshold)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    return 1 if grown else 0


def _inlined(args) -> bool:
    return args.inlined if args.inlined is not None else args.by == "function"


def cmd_export(args) -> int:
    from .analyze.profile import ProfileError
    from .present.exports import export

    if args.format == "pprof" and not args.output and sys.stdout.isatty():
        raise CommandError("export: --format pprof is binary: give -o FILE (or redirect standard output)")
    if args.more_profiles:
        return _export_fleet(args)
    profile = filtered_profile(args)
    if args.format == "heaptrack":
        return _export_heaptrack(profile, args)
    try:
        data = export(profile, args.format, value=args.value, inlined=args.inlined)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    if args.output and args.output != "-":
        Path(args.output).write_bytes(data)
        print(f"heaptype: {args.format} export written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _export_fleet(args) -> int:
    """pprof of several processes of one program, each symbolized with its own module map."""
    from .analyze import fleet
    from .analyze.profile import ProfileError

    if args.format != "pprof":
        raise CommandError(f"export: several profiles are merged for --format pprof only, not {args.format}")
    if not args.output or args.output == "-":
        raise CommandError("export: give -o FILE for the merged pprof profile")
    paths = [args.profile, *args.more_profiles]
    try:
        profiles = [filtered_profile(args, p) for p in paths]
        fleet.check_one_program(profiles)
        data = fleet.pprof_proto(profiles, inlined=args.inlined is not False)
    except ProfileError as e:
        raise CommandError(f"export: {e}") from None
    Path(args.output).write_bytes(data)
    print(f"heaptype: pprof export of {len(paths)} processes written to {args.output}", file=sys.stderr)
    return 0


def _export_heaptrack(profile, args) -> int:
    from .analyze.profile import ProfileError
    from .present.exports import write_heaptrack

    try:
        write_heaptrack(profile, args.output, inlined=args.inlined is not False)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    if args.output and args.output != "-":
        print(f"heaptype: heaptrack export written to {args.output}", file=sys.stderr)
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(workdir=args.workdir, cxx=args.cxx)


if __name__ == "__main__":
    raise SystemExit(main())
