"""Swiss tables' backing arrays and btree nodes are rows of their containers.

abseil's (and parallel-hashmap's) hash tables allocate their control bytes and slots as
one array of an alignment type, `absl::container_internal::AlignedType<8>`: the block's
static type, which names neither the table nor what it holds. The analysis names such a
block by the raw_hash_set frame that allocates it ("table of absl::flat_hash_map<int,
Foo>"), one table per block, in both capture modes: built with HeapType (the type
reported by the allocator) and preloaded into a plain build (the type inferred from
the allocator's frames). tests/cpp/hash_tables.cpp counts its tables itself (a new one
at each change of capacity) and prints the truth; a btree's nodes, from the same
allocation function, are "node of absl::btree_set<int>". Debian's libabsl-dev provides
abseil.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import heaptype
from tooling import require_file, require_tool

SOURCE = Path(__file__).resolve().parents[1] / "cpp" / "hash_tables.cpp"
CLI = [sys.executable, "-m", "heaptype"]
ABSEIL_MODULES = ["absl_flat_hash_map", "absl_node_hash_map", "absl_flat_hash_set", "absl_btree"]


def abseil_libraries() -> list[str]:
    require_file("/usr/include/absl/container/flat_hash_map.h", "libabsl-dev")
    pkg_config = require_tool("pkg-config")
    return subprocess.run([pkg_config, "--libs", *ABSEIL_MODULES], capture_output=True, text=True,
                          check=True).stdout.split()


def build(tmp_path: Path, with_heaptype: bool) -> Path:
    cxx = require_tool("g++")
    flags = {opt: subprocess.run([*CLI, opt], capture_output=True, text=True, check=True).stdout.split()
             if with_heaptype else [] for opt in ("--cflags", "--ldflags")}
    exe = tmp_path / ("hash_tables_heaptype" if with_heaptype else "hash_tables_plain")
    subprocess.run([cxx, "-std=c++17", "-O2", "-g", *flags["--cflags"], str(SOURCE), *flags["--ldflags"],
                    *abseil_libraries(), "-o", str(exe)], check=True, capture_output=True)
    return exe


@pytest.mark.parametrize("mode", ["built with HeapType", "preloaded"])
def test_swiss_tables_and_btree_nodes_are_rows_of_their_containers(tmp_path, mode):
    exe = build(tmp_path, with_heaptype=mode == "built with HeapType")
    out = tmp_path / "tables.htp"
    command = [str(exe)] if mode == "built with HeapType" else [*CLI, "run", "-o", str(out), "--", str(exe)]
    done = subprocess.run(command, capture_output=True, text=True, env={"HEAPTYPE_OUTPUT": str(out), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    truth = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", done.stdout)}
    mark = "" if mode == "built with HeapType" else " (inferred)"
    rows = {t.label: t for t in heaptype.load(out).by_type(infer=True)}
    expected = {
        "table of absl::flat_hash_map<int, Foo>": truth["flat"],
        "table of absl::node_hash_map<int, Foo>": truth["node"],
        "table of absl::flat_hash_set<long>": truth["set"],
        "table of absl::flat_hash_set<int>": truth["inner"],
    }
    for row, tables in expected.items():
        group = rows[row + mark]
        # one table per block; every one freed as the containers go out of scope
        assert (group.allocations, group.objects, group.live_blocks) == (tables, tables, 0), row
    assert rows["std::pair<int const, Foo>" + mark].allocations == truth["nodes"]
    outer = [label for label in rows if label.startswith("table of absl::flat_hash_map<int, absl::")]
    assert len(outer) == 1 and "flat_hash_set<int" in outer[0], outer
    assert (rows[outer[0]].allocations, rows[outer[0]].objects) == (truth["outer"], truth["outer"])
    # The btree's nodes come from the same allocation function: a node per block, none a table.
    btree = rows["node of absl::btree_set<int>" + mark]
    assert btree.allocations > 0 and (btree.objects, btree.live_blocks) == (btree.allocations, 0)
    assert not any("AlignedType" in label or "table of absl::btree" in label for label in rows), sorted(rows)
