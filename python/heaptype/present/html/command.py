"""``heaptype html P [-o report.html]`` and ``heaptype html --diff A B``: the
self-contained HTML report, with the filters every view takes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..console import CommandError
from .ranges import DEFAULT_RANGES

EPILOG = """\
examples:
  heaptype html app.htp                       # writes app.html
  heaptype html app.htp --type 'std::*' -o std.html
  heaptype html --diff before.htp after.htp   # writes after.diff.html
"""


def add_html_parser(subparsers, add_filter_options) -> argparse.ArgumentParser:
    """Adds `heaptype html` to the command's subparsers."""
    html = subparsers.add_parser(
        "html", help="write a self-contained HTML report: timeline, flame graph, tables, memory view",
        description="Write one HTML file (scripts and data inline: it opens without a network) showing a profile, "
                    "or the difference of two profiles with --diff.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    html.add_argument("profile", nargs="?", help="a .htp file")
    html.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare profile B (after) with A (before)")
    html.add_argument("-o", "--output", help="the page to write (default: the profile's name with .html)")
    html.add_argument("--ranges", type=int, metavar="N",
                      help=f"cut the run into N time spans that a brushed range snaps to (default {DEFAULT_RANGES}; "
                           "one more pass over the profile makes them all; 0: no time ranges)")
    add_filter_options(html)
    html.set_defaults(handler=cmd_html)
    return html


def default_output(args) -> Path:
    if args.diff:
        return Path(Path(args.diff[1]).stem + ".diff.html")
    return Path(Path(args.profile).stem + ".html")


def cmd_html(args) -> int:
    from ...analyze.profile import ProfileError
    from ...cli import filtered_profile
    from . import diff_html, report_html, write_html

    if bool(args.diff) == bool(args.profile):
        raise CommandError("html: give one profile, or --diff A B")
    if args.ranges is not None and args.ranges < 0:
        raise CommandError("html: --ranges must be 0 or more")
    try:
        if args.diff:
            text = diff_html(filtered_profile(args, args.diff[0]), filtered_profile(args, args.diff[1]))
        else:
            text = report_html(filtered_profile(args), ranges=args.ranges)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    path = write_html(text, args.output or default_output(args))
    print(f"heaptype: HTML report written to {path} ({len(text.encode()) / 1e6:.2f} MB)", file=sys.stderr)
    return 0
