"""Temporary allocations by heaptrack's rule, in every view (tests/cpp/temporaries.cpp).

A free is temporary when the program's previous allocation event (allocation or free)
was an allocation at the freed block's site. The program's cases, each its own type or
function, and their exact counts (the comment at the top of the program explains each):
the same figures in the JSON and text reports, the folded export, and the HTML page's
data. tests/integration/test_heaptrack_crosscheck.py runs the same program's plain build
under heaptrack and HeapType and finds the same totals.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

import heaptype
from conftest import run_profiled

# type -> (allocations, temporaries)
TYPES = {
    "InOrder": (10, 0),
    "SameSite": (10, 1),
    "Pair": (50, 50),
    "Outer": (1, 0),
    "Inner": (1, 1),
    "Front": (1, 0),
    "Back": (1, 0),
    "Row": (5, 1),
    "Spacer": (1, 0),
}
# function -> (allocations, temporaries) on its call paths: malloc'd blocks, untyped
FUNCTIONS = {"warm_up()": (1, 1), "grow()": (2, 2), "regrow()": (3, 0)}
PROGRAM_TEMPORARIES = 56


def cli(*args: str) -> str:
    path = shutil.which("heaptype")
    command = [path] if path else [sys.executable, "-m", "heaptype"]
    done = subprocess.run([*command, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def profile_path(cpp_programs, tmp_path_factory):
    program = cpp_programs.program("temporaries")
    path = tmp_path_factory.mktemp("temporaries") / "temporaries.htp"
    run = run_profiled(program, path)
    assert run.returncode == 0 and run.stdout == "done\n", run.stderr
    return path


def test_json_types_report(profile_path):
    rows = {r["label"]: r for r in json.loads(cli("report", str(profile_path), "--format", "json"))["rows"]}
    assert {label: (rows[label]["allocations"], rows[label]["temporary_allocations"]) for label in TYPES} == TYPES


def test_totals_are_the_cases_sum(profile_path):
    """Nothing else the process allocates is freed right away: libstdc++'s emergency
    pool goes at exit after other frees, stdio's buffer stays."""
    totals = json.loads(cli("report", str(profile_path), "--format", "json"))["totals"]
    assert sum(t for _, t in TYPES.values()) + sum(t for _, t in FUNCTIONS.values()) == PROGRAM_TEMPORARIES
    assert totals["temporary_allocations"] == PROGRAM_TEMPORARIES


def test_json_functions_report(profile_path):
    report = json.loads(cli("report", str(profile_path), "--by", "function", "--format", "json"))
    functions = {f["function"]: f["total"] for f in report["functions"]}
    assert {name: (functions[name]["allocations"], functions[name]["temporary_allocations"])
            for name in FUNCTIONS} == FUNCTIONS
    assert functions["pairs()"]["temporary_allocations"] == 50
    assert functions["main"]["temporary_allocations"] == PROGRAM_TEMPORARIES


def test_text_report(profile_path):
    """The types table: type, allocations, temporary, ..."""
    text = cli("report", str(profile_path))
    for label, (allocations, temporaries) in TYPES.items():
        assert re.search(rf"^{label}\s+{allocations}\s+{temporaries}\s", text, re.M), (label, text)


def test_sorted_by_temporaries(profile_path):
    rows = json.loads(cli("report", str(profile_path), "--sort", "temporary", "--format", "json"))["rows"]
    assert rows[0]["label"] == "Pair"


def test_folded_export_of_temporaries(profile_path):
    lines = cli("export", str(profile_path), "--format", "folded", "--value", "temporary").splitlines()
    by_leaf: dict[str, int] = {}
    for line in lines:
        stack, value = line.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        by_leaf[leaf] = by_leaf.get(leaf, 0) + int(value)
    assert {label: by_leaf.get(label, 0) for label in TYPES} == {label: t for label, (_, t) in TYPES.items()}
    assert sum(by_leaf.values()) == PROGRAM_TEMPORARIES


def test_html_page_data(profile_path):
    from heaptype.present.html.data import report_data

    data = report_data(heaptype.load(profile_path))
    rows = {r["label"]: r for r in data["types"]["rows"]}
    assert {label: rows[label]["temporary_allocations"] for label in TYPES} == \
        {label: t for label, (_, t) in TYPES.items()}
    assert data["selected"]["temporary_allocations"] == PROGRAM_TEMPORARIES
    flame = data["flame"]
    assert flame["figures"]["temporary_allocations"][0] == PROGRAM_TEMPORARIES  # the root
    functions = {f["function"]: f for f in data["functions"]["functions"]}
    assert functions["grow()"]["total"]["temporary_allocations"] == 2


def test_python_api(profile_path):
    profile = heaptype.load(profile_path)
    assert profile.totals.temporary_allocations == PROGRAM_TEMPORARIES
    by_type = {g.label: g.temporary_allocations for g in profile.by_type()}
    assert by_type["Row"] == 1 and by_type["Back"] == 0
