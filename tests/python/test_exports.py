"""Exports, each read back by the tool made for it (issue 3, acceptance point 3).

* pprof-text (gperftools' legacy heap profile): Debian's google-pprof reads it and
  symbolises the stacks itself; its top functions must be heaptype's top functions;
* pprof (gzipped profile.proto): decoded by protoc against tests/data/profile.proto;
* folded stacks: parsed the way flamegraph.pl parses its input (no folded-stack
  reader is packaged for Debian or PyPI here), and summed against the report.

The programs are the -finstrument-functions builds, run with
HEAPTYPE_CALLSTACK=instrument (hooks only, no walked stacks): their paths hold the
inlined make_and_free<T> under its symbol's name and nine make_deep frames (the
default build's walked stacks name inlined frames as DWARF does and lack the frame
of the make_deep call that tail-calls make_obj; see test_callpaths.py). Walked
stacks are left out here because libstdc++'s start-up allocation (its emergency
exception pool, allocated from ld.so's _dl_init, before any hook ran) then lies
wholly in runtime libraries, whose leading frames the analysis drops, its call site
included: a path with no frame, which google-pprof leaves out of its totals
(test_callpaths.py::test_start_up_allocation_keeps_its_call_site).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from callpath_programs import ALLOC_BENCH_ARGS, callpath_programs  # noqa: F401 (fixture)
from heaptype.present import exports
from tooling import require_tool

PROTO = Path(__file__).resolve().parents[1] / "data" / "profile.proto"


def heaptype_command() -> list[str]:
    path = shutil.which("heaptype")
    return [path] if path else [sys.executable, "-m", "heaptype"]


@pytest.fixture(scope="module")
def known(callpath_programs):
    return callpath_programs.load("known-instrument", "instrument")


@pytest.fixture(scope="module")
def bench(callpath_programs):
    return callpath_programs.load("alloc_bench-instrument", "instrument")


# --- pprof's ShortFunctionName, to compare names with google-pprof's -------------------

def pprof_short_name(name: str) -> str:
    """google-pprof's ShortFunctionName (with --no_strip_temp): no argument lists,
    and no leading return type."""
    previous = None
    while previous != name:
        previous = name
        name = re.sub(r"\([^()]*\)(\s*const)?", "", name)
    name = re.sub(r"<[0-9a-f]*>$", "", name)
    name = re.sub(r"^.*\s+(\w+::)", r"\1", name)
    return name


def google_pprof_text(program: Path, export: Path, *options: str) -> list[tuple[int, str]]:
    """(flat, function) rows of `google-pprof --text`, largest first."""
    pprof = require_tool("google-pprof")
    done = subprocess.run([pprof, "--text", "--show_bytes", "--no_strip_temp", *options, str(program), str(export)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = []
    for line in done.stdout.splitlines():
        match = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(.*)$", line)
        if match:
            name = match.group(3).strip()
            rows.append((int(match.group(1)), name[: -len(" (inline)")] if name.endswith(" (inline)") else name))
    assert rows, done.stdout + done.stderr
    return rows


# --- legacy pprof heap profile ------------------------------------------------------------

def test_google_pprof_lists_the_same_top_functions(callpath_programs, bench, tmp_path):
    """Acceptance 3: google-pprof --text on the export vs heaptype report --by function."""
    export = tmp_path / "bench.heap"
    done = subprocess.run([*heaptype_command(), "export", str(callpath_programs.profile_path("alloc_bench-instrument", "instrument")),
                           "--format", "pprof-text", "-o", str(export)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert export.read_text().startswith("heap profile: ")
    pprof_rows = google_pprof_text(callpath_programs.program("alloc_bench-instrument"), export, "--alloc_space")
    report = json.loads(subprocess.run(
        [*heaptype_command(), "report", str(callpath_programs.profile_path("alloc_bench-instrument", "instrument")), "--by", "function",
         "--format", "json"], capture_output=True, text=True, timeout=120, check=True).stdout)
    ours = Counter()
    for row in report["functions"]:
        if row["self"]["bytes"]:
            ours[pprof_short_name(row["function"])] += row["self"]["bytes"]
    # Every function with at least 1% of the bytes, in the same order, with the same
    # bytes. One is left out on both sides: libstdc++'s start-up pool, allocated in a
    # local function of libstdc++.so that heaptype calls `libstdc++.so.6+0x...` and
    # google-pprof names after the nearest exported symbol (`...@@GLIBCXX_...`).
    total = sum(ours.values())
    assert total == bench.totals.bytes
    pprof_top = [(name, flat) for flat, name in pprof_rows if flat * 100 >= total and "@@" not in name]
    our_top = [(name, flat) for name, flat in ours.most_common() if flat * 100 >= total and ".so" not in name]
    assert len(our_top) >= 5
    assert pprof_top == our_top, f"google-pprof: {pprof_top}\nheaptype:     {our_top}"
    assert [name for name, _ in our_top[:3]] == [
        "Large* make_obj<Large>", "Medium* make_obj<Medium>", "Small* make_obj<Small>"]


def test_google_pprof_counts_and_paths(callpath_programs, known, tmp_path):
    export = tmp_path / "known.heap"
    export.write_text(exports.pprof_text(known))
    text = export.read_text()
    header = text.splitlines()[0]
    assert re.fullmatch(r"heap profile:\s+\d+:\s+\d+ \[\s*\d+:\s+\d+\] @ heapprofile", header)
    assert "\nMAPPED_LIBRARIES:\n" in text
    program = callpath_programs.program("known-instrument")
    objects = google_pprof_text(program, export, "--alloc_objects")
    assert sum(flat for flat, _ in objects) == known.totals.allocations
    names = {name for _, name in objects}
    for function in ("main", "direct_inner", "recurse", "worker_d", "b_leaf", "c_rec"):
        assert any(name.split(" ")[0] == function for name in names), (function, names)
    # The stacks as google-pprof reads them: the leaf's caller chain is in each.
    stacks = subprocess.run([require_tool("google-pprof"), "--text", "--stacks", "--alloc_objects", str(program),
                             str(export)], capture_output=True, text=True, timeout=120)
    assert stacks.returncode == 0, stacks.stderr
    assert re.search(r"b_leaf.*\n.*b_mid.*\n.*worker_b", stacks.stdout), stacks.stdout


# --- pprof profile.proto ----------------------------------------------------------------

def parse_text_format(text: str) -> dict:
    """protoc's text format -> {field: [values or dicts]}."""
    tokens = re.findall(r'"(?:\\.|[^"\\])*"|[{}]|[^\s{}:]+:?', text)
    root: dict = defaultdict(list)
    stack = [root]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "}":
            stack.pop()
        elif token.endswith(":"):
            value = tokens[i + 1]
            i += 1
            if value.startswith('"'):
                value = bytes(value[1:-1], "utf-8").decode("unicode_escape").encode("latin-1").decode("utf-8")
            elif value in ("true", "false"):
                value = value == "true"
            else:
                value = int(value)
            stack[-1][token[:-1]].append(value)
        else:  # name {
            assert tokens[i + 1] == "{", tokens[i:i + 3]
            child: dict = defaultdict(list)
            stack[-1][token].append(child)
            stack.append(child)
            i += 1
        i += 1
    return root


def decode_pprof(data: bytes, tmp_path: Path) -> dict:
    protoc = require_tool("protoc")
    raw = gzip.decompress(data)
    done = subprocess.run([protoc, f"--proto_path={PROTO.parent}", "--decode", "perftools.profiles.Profile",
                           str(PROTO)], input=raw, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    text = done.stdout.decode()
    assert not re.search(r"^\s*\d+:", text, re.M), "fields the schema does not know"
    return parse_text_format(text)


@pytest.fixture(scope="module")
def known_proto(known, tmp_path_factory):
    return decode_pprof(exports.pprof_proto(known), tmp_path_factory.mktemp("proto"))


def test_pprof_proto_decodes_with_the_schema(known, known_proto):
    p = known_proto
    strings = p["string_table"]
    assert strings[0] == ""
    assert [(strings[t["type"][0]], strings[t["unit"][0]]) for t in p["sample_type"]] == [
        ("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"), ("inuse_space", "bytes")]
    assert strings[p["default_sample_type"][0]] == "alloc_space"
    samples = p["sample"]
    assert sum(s["value"][0] for s in samples) == known.totals.allocations
    assert sum(s["value"][1] for s in samples) == known.totals.bytes
    assert sum(s["value"][3] for s in samples) == known.totals.live_bytes
    by_type = Counter()
    for s in samples:
        labels = {strings[l["key"][0]]: (strings[l["str"][0]] if l["str"] else l["num"][0]) for l in s["label"]}
        by_type[labels["type"]] += s["value"][0]
    assert by_type["Direct"] == 8 and by_type["ThreadD"] == 40 and by_type["Oops"] == 2  # thrown objects
    assert {r.label: r.allocations for r in known.by_type(infer=True)} == dict(by_type)


def test_pprof_proto_locations_functions_mappings(known_proto):
    p = known_proto
    strings = p["string_table"]
    functions = {f["id"][0]: f for f in p["function"]}
    locations = {l["id"][0]: l for l in p["location"]}
    mappings = {m["id"][0]: m for m in p["mapping"]}
    assert strings[mappings[1]["filename"][0]].endswith("/known-instrument")  # the main binary first
    assert all(m["has_functions"] == [True] for m in mappings.values())
    for location in locations.values():
        assert location["mapping_id"][0] in mappings
        assert all(line["function_id"][0] in functions for line in location["line"])
    names = {strings[f["name"][0]] for f in functions.values()}
    assert {"main", "direct_inner()", "worker_b()", "thrower3()"} <= names

    def stack(sample):  # leaf first, inlined frames expanded, as pprof shows it
        out = []
        for location_id in sample["location_id"]:
            for line in locations[location_id]["line"]:
                out.append(strings[functions[line["function_id"][0]]["name"][0]])
        return out

    type_index = strings.index("type")
    direct = [s for s in p["sample"] if any(l["key"][0] == type_index and strings[l["str"][0]] == "Direct"
                                            for l in s["label"])]
    stacks = Counter()
    for s in direct:
        stacks[tuple(stack(s))] += s["value"][0]
    assert stacks == {("void make_and_free<Direct>()", "direct_inner()", "direct_outer()", "main"): 5,
                      ("void make_and_free<Direct>()", "direct_inner()", "main"): 3}
    leaf = locations[direct[0]["location_id"][0]]
    assert len(leaf["line"]) == 2 and leaf["line"][1]["line"][0] > 0  # an inlined frame and its function


def test_pprof_proto_marks_inferred_types(callpath_programs, tmp_path):
    out = tmp_path / "infer.pb.gz"
    subprocess.run([*heaptype_command(), "export", str(callpath_programs.profile_path("infer")), "--format", "pprof",
                    "-o", str(out)], check=True, capture_output=True, timeout=120)
    p = decode_pprof(out.read_bytes(), tmp_path)
    strings = p["string_table"]
    inferred = set()
    for s in p["sample"]:
        labels = {strings[l["key"][0]]: strings[l["str"][0]] for l in s["label"] if l["str"]}
        if labels.get("inferred") == "true":
            inferred.add(labels["type"])
    assert {"Foo", "Bar", "char[] of std::string"} <= inferred and "Plain" not in inferred, inferred


# --- folded stacks ----------------------------------------------------------------------

FLAMEGRAPH_LINE = re.compile(r"^(.*)\s+?(\d+(?:\.\d*)?)$")  # flamegraph.pl's own input pattern


def parse_folded(text: str) -> dict[tuple[str, ...], int]:
    out = {}
    for line in text.splitlines():
        match = FLAMEGRAPH_LINE.match(line)
        assert match, f"flamegraph.pl would skip {line!r}"
        frames = tuple(match.group(1).split(";"))
        assert frames not in out, "one line per stack"
        assert all(frames), line
        out[frames] = int(match.group(2))
    return out


def test_folded_stacks_have_the_type_as_leaf(known):
    stacks = parse_folded(exports.folded(known))
    assert sum(stacks.values()) == known.totals.bytes
    assert stacks[("main", "direct_outer()", "direct_inner()", "void make_and_free<Direct>()", "Direct")] == 5 * 16
    assert stacks[("worker_d()", "void make_and_free<ThreadD>()", "ThreadD")] == 40 * 120
    per_type = Counter()
    for frames, value in stacks.items():
        per_type[frames[-1]] += value
    assert dict(per_type) == {r.label: r.bytes for r in known.by_type(infer=True) if r.bytes}


def test_folded_values_and_filter(callpath_programs, known, tmp_path):
    counts = parse_folded(exports.folded(known, value="allocations", types="Thread*"))
    assert {frames[-1]: n for frames, n in counts.items()} == {"ThreadA": 10, "ThreadB": 20, "ThreadC": 30,
                                                               "ThreadD": 40}
    out = tmp_path / "bench.folded"
    subprocess.run([*heaptype_command(), "export", str(callpath_programs.profile_path("alloc_bench-instrument", "instrument")), "--format",
                    "folded", "--value", "objects", "--type", "Small", "-o", str(out)], check=True,
                   capture_output=True, timeout=120)
    stacks = parse_folded(out.read_text())
    assert len(stacks) == 2
    deep = next(frames for frames in stacks if len(frames) > 4)
    assert deep[2:11] == ("Small* make_deep<Small>(int, unsigned long)",) * 9 and deep[-1] == "Small"
    n = int(ALLOC_BENCH_ARGS[0])
    assert 0 < sum(stacks.values()) < n


def test_folded_inferred_and_inlined(callpath_programs):
    import heaptype

    profile = heaptype.load(callpath_programs.profile_path("infer"))
    stacks = parse_folded(exports.folded(profile, inlined=True, types="Foo"))
    (frames, value), = stacks.items()
    assert frames[-1] == "Foo (inferred)" and value == 300
    assert frames[-2] == "std::__new_allocator<Foo>::allocate(unsigned long, void const*)_[i]"


def test_export_command_errors(tmp_path):
    done = subprocess.run([*heaptype_command(), "export", str(tmp_path / "missing.htp"), "--format", "folded"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such profile file" in done.stderr
