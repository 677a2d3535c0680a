"""The memory view (the paper's Fig. 4) as the page draws it: the address space at
the peak and at a few other moments, each live block coloured by its type.

The core gives the blocks live at a moment, already in regions of the address space
and runs of adjacent blocks of one type (``Profile.memory_view``, for a profile
recorded with ``HEAPTYPE_ADDRESSES=1``; ``at()`` picks the moment). A page cannot
carry millions of runs, so when a view has more than ``MAX_RUNS`` its regions are
cut into that many equal cells, each coloured by the type whose runs cover most of it.
"""

from __future__ import annotations

MAX_RUNS = 20_000


def unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def memory_json(profile, moments: list) -> dict:
    """The memory view at each of ``moments`` ("peak" or seconds), as the page draws it."""
    if profile.aggregated:
        return unavailable("an aggregated profile keeps counts per call site, not the blocks' addresses")
    if not profile.has_addresses:
        return unavailable("recorded without addresses: run the program with HEAPTYPE_ADDRESSES=1 to see "
                           "where each type lives")
    types: dict[str, int] = {}
    return {"available": True, "snapshots": [page_view(profile.at(when).memory_view(), types) for when in moments],
            "types": types_in_order(types)}


def types_in_order(types: dict[str, int]) -> list[str]:
    return sorted(types, key=types.get)


def _cells(view: dict, types: dict[str, int], count: int) -> list[list[int]]:
    """[region, offset, length, type] of equal cells; a cell takes the type whose runs
    cover most of it."""
    span = sum(r["end"] - r["start"] for r in view["regions"])
    cell = max(1, -(-span // count))
    covered: dict[tuple[int, int], dict[int, int]] = {}
    for index, region in enumerate(view["regions"]):
        for run in region["runs"]:
            kind = types.setdefault(run["type"], len(types))
            position = run["start"]
            while position < run["end"]:
                k = (position - region["start"]) // cell
                stop = min(run["end"], region["start"] + (k + 1) * cell)
                amounts = covered.setdefault((index, k), {})
                amounts[kind] = amounts.get(kind, 0) + stop - position
                position = stop
    return [[index, k * cell, cell, max(amounts, key=lambda t: (amounts[t], -t))]
            for (index, k), amounts in sorted(covered.items())]


def page_view(view: dict, types: dict[str, int]) -> dict:
    """One memory view, runs as [region, offset, length, type number] (``types`` maps
    type labels to numbers, shared by the views of a page)."""
    regions = view["regions"]
    if sum(len(r["runs"]) for r in regions) > MAX_RUNS:
        runs = _cells(view, types, MAX_RUNS)
    else:
        runs = [[index, run["start"] - region["start"], run["end"] - run["start"],
                 types.setdefault(run["type"], len(types))]
                for index, region in enumerate(regions) for run in region["runs"]]
    mappings = view.get("mappings", [])

    def mapping_of(address: int) -> str:
        return next((m["path"] for m in mappings if m["start"] <= address < m["end"]), "")

    return {
        "time_s": view["time_s"],
        "blocks": sum(r["blocks"] for r in regions),
        "bytes": sum(r["bytes"] for r in regions),
        "regions": [{"start": r["start"], "end": r["end"], "path": mapping_of(r["start"])} for r in regions],
        "runs": runs,
    }
