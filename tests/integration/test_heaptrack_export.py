"""`heaptype export --format heaptrack` on a real program, read by heaptrack's own tools.

The program: TinyXML-2 9.0.0 (tests/real_programs.py) parsing, walking, editing and
printing a generated 4 MiB document, built twice: plain (-O2 -g, run under `heaptype run`,
the runtime preloaded, and under heaptrack) and with HeapType's flags (types from its
new-expressions and typed allocators). Both builds make the same 269,438 allocations.

- heaptrack_print on the export (.zst, .gz and plain text) prints the allocations,
  temporary allocations, peak and leaked bytes `heaptype report` prints (269,438, 76,241,
  59.86M, 4.10K), and heaptrack's own run of the plain build has the same figures: its
  trace file replayed exactly, as in test_heaptrack_crosscheck.py, and heaptrack_print's
  summary of it, which shows 76,242 temporaries: it counts the free of its first
  allocation info after a free as one (core/temporaries.hpp); the export has no such free.
- The allocated type is the innermost frame: heaptrack_print's allocators are the types,
  each with the allocations `heaptype report` gives it.
- heaptrack_gui opens the export under Xvfb; its Summary, Bottom-Up and Flame Graph tabs
  (chosen with Ctrl+Tab through xdotool) are kept as screenshots under
  artifacts/screenshots/ (Xvfb's -fbdir framebuffer, an XWD image, turned into PNG here).
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from real_programs import build_tinyxml2_walk, tinyxml2_tree  # noqa: F401 (fixture)
from test_heaptrack_crosscheck import PLAIN_FLAGS, environment, heaptrack_bytes, print_summary, run_heaptrack
from tooling import require_tool

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "artifacts" / "screenshots"
SCREEN = (1280, 900)


@dataclass
class Build:
    profile: Path
    report: dict       # `heaptype report --format json`


@pytest.fixture(scope="module")
def tinyxml2_builds(tinyxml2_tree, tmp_path_factory):
    """The plain and the typed build's profiles, and heaptrack's run of the plain one."""
    from heaptype.capture import flags

    work = tmp_path_factory.mktemp("heaptrack_export")
    plain = build_tinyxml2_walk(tinyxml2_tree, work / "walk_plain", PLAIN_FLAGS)
    typed = build_tinyxml2_walk(tinyxml2_tree, work / "walk_typed", ["-std=c++17", *PLAIN_FLAGS,
                                                                     *flags.compile_flags()], flags.link_flags())
    builds = {name: profile_of([str(program), "4"], work / f"{name}.htp", work)
              for name, program in (("plain", plain), ("typed", typed))}
    return builds, run_heaptrack([str(plain), "4"], work / "heaptrack", work)


def profile_of(command: list[str], profile: Path, cwd: Path) -> Build:
    done = subprocess.run([sys.executable, "-m", "heaptype", "run", "-o", str(profile), "--", *command],
                          capture_output=True, text=True, env=environment(cwd), cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stderr
    report = subprocess.run([sys.executable, "-m", "heaptype", "report", str(profile), "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    return Build(profile, json.loads(report))


def export(profile: Path, output: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "heaptype", "export", str(profile), "--format", "heaptrack",
                           "-o", str(output)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return output


@pytest.mark.parametrize("build,suffix", [("plain", ".zst"), ("typed", ".zst"), ("typed", ".gz"), ("typed", "")])
def test_heaptrack_print_shows_the_reports_figures(tinyxml2_builds, build, suffix, tmp_path):
    builds, heaptrack_run = tinyxml2_builds
    totals = builds[build].report["totals"]
    exported = print_summary(export(builds[build].profile, tmp_path / f"walk.heaptrack{suffix}"))
    # heaptrack_print's summary of the export: `heaptype report`'s figures.
    assert (exported.allocations, exported.temporaries) == (totals["allocations"], totals["temporary_allocations"])
    assert (exported.peak_text, exported.leaked_text) == (heaptrack_bytes(totals["peak_bytes"]),
                                                          heaptrack_bytes(totals["live_bytes"]))
    # ... exactly, in bytes, and with no temporary counted by heaptrack_print's accident.
    replay = exported.replay
    assert (replay.allocations, replay.peak, replay.leaked) == (totals["allocations"], totals["peak_bytes"],
                                                                totals["live_bytes"])
    assert replay.print_temporaries == replay.temporaries == totals["temporary_allocations"]
    # heaptrack's own run of the plain build: its file replayed, and heaptrack_print on it,
    # which counts one temporary more there (the exception pool's free, info 0, after a free).
    theirs = heaptrack_run.replay
    assert (theirs.allocations, theirs.temporaries, theirs.peak, theirs.leaked) == \
        (replay.allocations, replay.temporaries, replay.peak, replay.leaked)
    assert (heaptrack_run.allocations, heaptrack_run.peak_text, heaptrack_run.leaked_text) == \
        (exported.allocations, exported.peak_text, exported.leaked_text)
    assert heaptrack_run.temporaries == exported.temporaries + 1 == theirs.print_temporaries
    assert totals["allocations"] == 269_438 and totals["temporary_allocations"] == 76_241


def heaptrack_allocators(data_file: Path) -> dict[str, int]:
    """heaptrack_print's allocators (innermost frames after operator new) with their calls."""
    printer = require_tool("heaptrack_print")
    text = subprocess.run([printer, "--print-peaks", "0", "--print-temporary", "0", "--print-leaks", "0",
                           "--peak-limit", "1000", "--sub-peak-limit", "0", "--shorten-templates", "0",
                           str(data_file)],
                          capture_output=True, text=True, check=True).stdout
    section = text.split("MOST CALLS TO ALLOCATION FUNCTIONS", 1)[1]
    found = re.findall(r"^(\d+) calls to allocation functions with .* from\n(.+)\n  in (.+)$", section, re.M)
    assert {module for _, _, module in found} == {"(allocated type)"}
    return {name: int(calls) for calls, name, _ in found}


def test_types_are_the_innermost_frames(tinyxml2_builds, tmp_path):
    builds, _ = tinyxml2_builds
    typed = builds["typed"]
    allocators = heaptrack_allocators(export(typed.profile, tmp_path / "walk.heaptrack.zst"))
    assert allocators == {row["label"]: row["allocations"] for row in typed.report["rows"]}
    assert allocators["tinyxml2::MemPoolT<80>::Block"] == 3_285
    assert allocators["char[] of std::string"] == 246_158


def xwd_to_png(data: bytes) -> bytes:
    """An X window dump (the TrueColor framebuffer Xvfb keeps with -fbdir) as a PNG."""
    header = struct.unpack(">25I", data[:100])
    header_size, width, height = header[0], header[4], header[5]
    byte_order, bits_per_pixel, bytes_per_line, colors = header[7], header[11], header[12], header[19]
    assert bits_per_pixel == 32, f"{bits_per_pixel} bits per pixel"
    masks = header[14:17]
    shifts = [(mask & -mask).bit_length() - 1 for mask in masks]
    start = header_size + 12 * colors
    rows = bytearray()
    for y in range(height):
        line = data[start + y * bytes_per_line:start + y * bytes_per_line + 4 * width]
        pixels = struct.unpack(("<" if byte_order == 0 else ">") + f"{width}I", line)
        rows.append(0)
        for pixel in pixels:
            rows += bytes((pixel & mask) >> shift for mask, shift in zip(masks, shifts))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(bytes(rows), 6)) + chunk(b"IEND", b""))


# Runs inside xvfb-run: opens the file, waits for it to load, dumps the screen on three
# tabs (Summary, then Bottom-Up one Ctrl+Tab on, Flame Graph three more), and fails when
# heaptrack_gui is no longer running at the end.
GUI_SCRIPT = r"""
file=$1 out=$2 fb=$3
heaptrack_gui "$file" >"$out/gui.log" 2>&1 &
gui=$!
window=$(timeout 60 xdotool search --sync --onlyvisible --name Heaptrack) || exit 2
xdotool windowsize "$window" 1280 900 windowmove "$window" 0 0
sleep 8
cp "$fb/Xvfb_screen0" "$out/summary.xwd"
xdotool windowfocus --sync "$window" key ctrl+Tab
sleep 3
cp "$fb/Xvfb_screen0" "$out/bottom_up.xwd"
xdotool key ctrl+Tab ctrl+Tab ctrl+Tab
sleep 3
cp "$fb/Xvfb_screen0" "$out/flame_graph.xwd"
kill -0 "$gui" || exit 3
kill "$gui"
"""


def test_heaptrack_gui_opens_the_export(tinyxml2_builds, tmp_path):
    for tool in ("heaptrack_gui", "xdotool"):
        require_tool(tool)
    xvfb_run = require_tool("xvfb-run")
    builds, _ = tinyxml2_builds
    data_file = export(builds["typed"].profile, tmp_path / "walk.heaptrack.zst")
    framebuffer = tmp_path / "framebuffer"
    framebuffer.mkdir()
    done = subprocess.run([xvfb_run, "-a", "-s", f"-screen 0 {SCREEN[0]}x{SCREEN[1]}x24 -fbdir {framebuffer}",
                           "bash", "-c", GUI_SCRIPT, "gui", str(data_file), str(tmp_path), str(framebuffer)],
                          capture_output=True, text=True, timeout=300)
    log = (tmp_path / "gui.log").read_text() if (tmp_path / "gui.log").exists() else ""
    assert done.returncode == 0, f"{done.stdout}{done.stderr}\n{log}"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    images = {}
    for tab in ("summary", "bottom_up", "flame_graph"):
        png = xwd_to_png((tmp_path / f"{tab}.xwd").read_bytes())
        (SCREENSHOTS / f"heaptrack_gui_{tab}.png").write_bytes(png)
        images[tab] = png
    # Three different pages (the tabs did change), none of them blank.
    assert len(set(images.values())) == 3
    for tab in images:
        pixels = xwd_pixels((tmp_path / f"{tab}.xwd").read_bytes())
        assert len(set(pixels)) > 8, tab


def xwd_pixels(data: bytes) -> list[bytes]:
    """A sample of a window dump's pixels."""
    header = struct.unpack(">25I", data[:100])
    start = header[0] + 12 * header[19]
    raw = data[start:start + header[12] * header[5]]
    return [raw[i:i + 4] for i in range(0, len(raw), 4 * 97)]
