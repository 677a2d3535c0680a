"""The memory view (the paper's Fig. 4): the address space at one moment, each live
block coloured by its type.

The core gives the blocks live at a time (``Profile.memory_view(t)``: ``{time_s,
mappings: [{start, end, path}], blocks: [{address, size, type}]}``); a profile has
addresses only when it was recorded with ``HEAPTYPE_ADDRESSES=1``. A page cannot
carry millions of blocks, so blocks are condensed: neighbours of one type merge
into runs, spans of unused addresses wider than ``REGION_GAP`` split the space into
regions (drawn one after another, the gap marked), and when more than ``MAX_RUNS``
runs remain, each region is cut into equal cells coloured by the type holding the
most bytes in it.
"""

from __future__ import annotations

REGION_GAP = 1 << 20   # unused addresses wider than this start a new region
MERGE_GAP = 64         # allocator headers and padding between neighbours of one type
MAX_RUNS = 20_000


def unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def memory_json(profile, times_s: list[float]) -> dict:
    """The memory view at each of ``times_s``, condensed (see the module's docstring)."""
    if not profile.has_addresses:
        return unavailable("recorded without addresses: run the program with HEAPTYPE_ADDRESSES=1 to see "
                           "where each type lives")
    memory_view = getattr(profile, "memory_view", None)
    if memory_view is None:
        return unavailable("this heaptype cannot read block addresses yet")
    types: dict[str, int] = {}
    snapshots = [condense(memory_view(t), types) for t in times_s]
    return {"available": True, "types": list(types), "snapshots": snapshots}


def _runs(blocks: list[dict], types: dict[str, int]) -> list[list[int]]:
    """[start, end, type index] of neighbouring blocks of one type, by address."""
    runs: list[list[int]] = []
    for block in sorted(blocks, key=lambda b: b["address"]):
        start, end = block["address"], block["address"] + block["size"]
        kind = types.setdefault(block["type"] if block["type"] is not None else "(untyped)", len(types))
        if runs and runs[-1][2] == kind and start - runs[-1][1] <= MERGE_GAP:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end, kind])
    return runs


def _regions(runs: list[list[int]]) -> list[list[int]]:
    """[start, end] of the stretches of address space the runs occupy."""
    regions: list[list[int]] = []
    for start, end, _ in runs:
        if regions and start - regions[-1][1] <= REGION_GAP:
            regions[-1][1] = max(regions[-1][1], end)
        else:
            regions.append([start, end])
    return regions


def _cells(runs: list[list[int]], regions: list[list[int]], cell_count: int) -> list[list[int]]:
    """The runs as equal cells (region index, offset, length, type): each cell takes
    the type holding the most bytes in it."""
    span = sum(end - start for start, end in regions)
    cell = max(1, -(-span // cell_count))
    out: list[list[int]] = []
    region = 0
    bytes_in: dict[tuple[int, int], dict[int, int]] = {}
    for start, end, kind in runs:
        while start >= regions[region][1]:
            region += 1
        base = regions[region][0]
        position = start
        while position < end:
            index = (position - base) // cell
            stop = min(end, base + (index + 1) * cell)
            counts = bytes_in.setdefault((region, index), {})
            counts[kind] = counts.get(kind, 0) + stop - position
            position = stop
    for (region, index), counts in sorted(bytes_in.items()):
        kind = max(counts, key=lambda k: (counts[k], -k))
        out.append([region, index * cell, cell, kind])
    return out


def condense(view: dict, types: dict[str, int]) -> dict:
    """One memory view as the page draws it (``types`` maps type names to numbers,
    shared by the snapshots of a page)."""
    blocks = view["blocks"]
    runs = _runs(blocks, types)
    regions = _regions(runs)
    if len(runs) > MAX_RUNS:
        drawn = _cells(runs, regions, MAX_RUNS)
    else:
        drawn, region = [], 0
        for start, end, kind in runs:
            while start >= regions[region][1]:
                region += 1
            drawn.append([region, start - regions[region][0], end - start, kind])
    mappings = view.get("mappings", [])

    def mapping_of(address: int) -> str:
        return next((m["path"] for m in mappings if m["start"] <= address < m["end"]), "")

    return {
        "time_s": view["time_s"],
        "blocks": len(blocks),
        "bytes": sum(b["size"] for b in blocks),
        "regions": [{"start": start, "end": end, "path": mapping_of(start)} for start, end in regions],
        "runs": drawn,
    }
