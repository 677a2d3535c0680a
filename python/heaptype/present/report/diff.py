"""The difference of two profiles, group by group, matched by name: it holds across
rebuilds and moved addresses. A group's delta is B minus A for every figure."""

from __future__ import annotations

from dataclasses import dataclass

from ...analyze.labels import INFERRED_SUFFIX
from ...analyze.profile import Profile
from ..tables import render_table
from ..units import format_bytes, format_count

FIELDS = ("allocations", "objects", "bytes", "peak_bytes", "live_bytes", "live_blocks", "temporary_allocations")
ZERO = dict.fromkeys(FIELDS, 0)


@dataclass
class DiffRow:
    name: str
    a: dict
    b: dict
    # An aggregated profile's peak of a row that is not typed: what it had live at the
    # heap's peak, not its own most (docs/aggregate.md). Its peak change is no growth.
    peak_approximate: bool = False

    @property
    def delta(self) -> dict:
        return {f: self.b[f] - self.a[f] for f in FIELDS}

    def growth(self, field: str = "peak_bytes") -> float | None:
        """B over A, in percent (None when A is 0 and B is not: a new group)."""
        before, after = self.a[field], self.b[field]
        if before == 0:
            return None if after else 0.0
        return 100.0 * (after - before) / before


def _figures(f) -> dict:
    return {name: getattr(f, name) for name in FIELDS}


def _groups(profile: Profile, by: str, infer: bool) -> dict[str, tuple[dict, bool]]:
    """Each group's figures, and whether its peak is approximate (DiffRow.peak_approximate)."""
    if by == "type":
        aggregated = getattr(profile, "aggregated", False)
        return {g.label: (_figures(g), aggregated and getattr(g, "peak_at_heap_peak", False))
                for g in profile.by_type(infer=infer)}
    if by == "function":
        return {g.function: (_figures(g.total), False) for g in profile.by_function(infer=infer)}
    if by == "thread":
        return {str(g.thread): (_figures(g), False) for g in profile.by_thread()}
    return {" > ".join(r.path) + f" [{r.type_label}]": (_figures(r.figures), False)
            for r in profile.call_paths(infer=infer)}


def _row(name: str, a: tuple[dict, bool], b: tuple[dict, bool]) -> DiffRow:
    return DiffRow(name, a[0], b[0], a[1] or b[1])


def diff_rows(a: Profile, b: Profile, by: str = "type", *, infer: bool = True) -> list[DiffRow]:
    # The two passes run at once: the core reads each file without holding the GIL. (Imported
    # here: every report imports this module, and the pool's imports cost ~4 ms.)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        before, after = pool.map(lambda profile: _groups(profile, by, infer), (a, b))
    rows = [_row(name, before[name], after[name]) for name in set(before) & set(after)]
    rows += _inferred_on_one_side(before, after) if by == "type" else []
    rows += [_row(name, before.get(name, (ZERO, False)), after.get(name, (ZERO, False)))
             for name in set(before) ^ set(after)]
    return sorted(rows, key=lambda r: (-abs(r.delta["peak_bytes"]), -abs(r.delta["bytes"]), r.name))


def _inferred_on_one_side(before: dict[str, tuple], after: dict[str, tuple]) -> list[DiffRow]:
    """A type exact in one profile and inferred in the other (a linked build against the
    same program preloaded, ``heaptype run``): one row, named for where it was inferred.
    Its entries leave ``before`` and ``after``; rows both profiles name alike stay apart."""
    rows = []
    for inferred, exact, side in ((before, after, "A"), (after, before, "B")):
        for name in [n for n in inferred if n.endswith(INFERRED_SUFFIX) and n not in exact]:
            base = name[:-len(INFERRED_SUFFIX)]
            if base in exact and base + INFERRED_SUFFIX not in exact and base not in inferred:
                a, b = (inferred.pop(name), exact.pop(base)) if side == "A" else (exact.pop(base), inferred.pop(name))
                rows.append(_row(f"{base} (inferred in {side})", a, b))
    return rows


def over_threshold(rows: list[DiffRow], threshold: float | None) -> list[DiffRow]:
    """Rows whose peak grew by more than `threshold` percent (new groups count); not a
    row whose peak is approximate on either side."""
    if threshold is None:
        return []
    return [r for r in rows if not r.peak_approximate and r.delta["peak_bytes"] > 0 and
            (r.growth() is None or r.growth() > threshold)]


def diff_json(a: Profile, b: Profile, by: str = "type", *, threshold: float | None = None, infer: bool = True,
              top: int | None = None) -> dict:
    rows = diff_rows(a, b, by, infer=infer)
    key = "type" if by == "type" else "name"
    grown = over_threshold(rows, threshold)
    return {"a": a.path, "b": b.path, "by": by, "threshold_percent": threshold,
            "rows": [{key: r.name, "a": r.a, "b": r.b, "delta": r.delta, "growth_percent": r.growth(),
                      "peak_approximate": r.peak_approximate}
                     for r in (rows[:top] if top else rows)],
            "over_threshold": [r.name for r in grown]}


def _signed_bytes(n: int) -> str:
    return ("+" if n > 0 else "-" if n < 0 else "") + format_bytes(abs(n))


def render_diff_text(a: Profile, b: Profile, by: str = "type", *, threshold: float | None = None,
                     infer: bool = True, top: int | None = None) -> str:
    rows = diff_rows(a, b, by, infer=infer)
    shown = rows[:top] if top else rows
    lines = [f"HeapType diff by {by}", f"  A  {a.path}", f"  B  {b.path}", ""]
    body = []
    for r in shown:
        growth = r.growth()
        mark = "*" if r.peak_approximate else ""
        body.append((format_bytes(r.a["peak_bytes"]) + mark, format_bytes(r.b["peak_bytes"]) + mark,
                     _signed_bytes(r.delta["peak_bytes"]), "new" if growth is None else f"{growth:+.1f}%",
                     format_count(r.a["allocations"]), format_count(r.b["allocations"]), r.name))
    lines += render_table(("peak A", "peak B", "delta", "change", "allocs A", "allocs B", by), body,
                          numeric=range(0, 6))
    if len(rows) > len(shown):
        lines.append(f"... {len(rows) - len(shown)} more (--top to show more)")
    if any(r.peak_approximate for r in shown):
        lines.append("* an aggregated profile keeps no own peak for this row: what it had live at the heap's peak "
                     "(docs/aggregate.md); --threshold leaves it out")
    grown = over_threshold(rows, threshold)
    if threshold is not None:
        lines.append("")
        lines.append(f"{len(grown)} {'group' if len(grown) == 1 else 'groups'} grew by more than {threshold:g}% "
                     f"in peak" + (": " + ", ".join(r.name for r in grown[:5]) if grown else ""))
    return "\n".join(lines)
