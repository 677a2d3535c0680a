"""Reports of a profile, as readable tables or as JSON for machines: per type
(``--by type``), per function with self and total figures (``--by function``), and
the merged call tree, top-down or bottom-up (``--by callpath``)."""

from __future__ import annotations

import json

from .profile import Profile, TypeRow

UNTYPED_LABEL = "(untyped)"


def format_bytes(n: int) -> str:
    """Human sizes, 1024-based: 512 B, 12.7 KiB, 3.05 MiB."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{value:.3g} {unit}" if value < 100 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")


def format_count(n: int) -> str:
    return f"{n:,}"


def type_label(row: TypeRow) -> str:
    """``(untyped)``, ``T (inferred)`` for a type read from allocator frames, else ``T``."""
    return row.label


def rows_for(profile: Profile, sort: str, top: int | None, types=None, infer: bool = False) -> list[TypeRow]:
    rows = profile.by_type(sort, infer=infer, types=types)
    return rows[:top] if top else rows


def as_json(profile: Profile, sort: str = "peak", top: int | None = None, *, types=None,
            infer: bool = False) -> dict:
    t = profile.totals
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "complete": profile.complete,
        "totals": {
            "allocations": t.allocations,
            "frees": t.frees,
            "bytes": t.bytes,
            "peak_bytes": t.peak_bytes,
            "live_bytes": t.live_bytes,
        },
        "rows": [
            {
                "type": r.type,
                "inferred": r.inferred,
                "allocations": r.allocations,
                "objects": r.objects,
                "bytes": r.bytes,
                "peak_bytes": r.peak_bytes,
                "live_bytes": r.live_bytes,
            }
            for r in rows_for(profile, sort, top, types, infer)
        ],
        "warnings": profile.warnings,
    }


def render_json(profile: Profile, sort: str = "peak", top: int | None = None, *, types=None,
                infer: bool = False) -> str:
    return json.dumps(as_json(profile, sort, top, types=types, infer=infer), indent=2)


def _header(profile: Profile) -> list[str]:
    t = profile.totals
    lines = [
        f"HeapType profile {profile.path}",
        f"  program    {' '.join(profile.argv) or profile.executable} (pid {profile.pid})",
        f"  allocated  {format_count(t.allocations)} blocks, {format_bytes(t.bytes)} in all",
        f"  peak       {format_bytes(t.peak_bytes)} live at {t.peak_time_us / 1e6:.3f} s",
        f"  at exit    {format_bytes(t.live_bytes)} still live in {format_count(t.live_blocks)} blocks",
    ]
    per_block = profile.registry_bytes_per_live_block()
    if per_block is not None:
        end = profile.runtime_summary
        lines.append(f"  overhead   {format_bytes(profile.bookkeeping_bytes())} of HeapType bookkeeping: "
                     f"{format_bytes(end['buffer_bytes'])} of buffers, and a registry of {per_block:.0f} B "
                     f"per block live at peak ({format_count(t.peak_live_blocks)} blocks)")
    return lines


def render_text(profile: Profile, sort: str = "peak", top: int | None = None, *, types=None,
                infer: bool = False) -> str:
    lines = _header(profile)
    if types:
        lines.append(f"  types      {_describe_patterns(types)}")
    lines.append("")
    rows = rows_for(profile, sort, top, types, infer)
    header = ("type", "allocations", "objects", "bytes", "peak", "live at exit")
    table = [header] + [
        (type_label(r), format_count(r.allocations), format_count(r.objects), format_bytes(r.bytes),
         format_bytes(r.peak_bytes), format_bytes(r.live_bytes))
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    widths[0] = min(widths[0], 70)
    for i, row in enumerate(table):
        name = row[0] if len(row[0]) <= widths[0] else row[0][: widths[0] - 3] + "..."
        cells = [name.ljust(widths[0])] + [cell.rjust(w) for cell, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    hidden = len(profile.by_type(sort, infer=infer, types=types)) - len(rows)
    if hidden > 0:
        lines.append(f"... {hidden} more types (--top to show more)")
    if any(r.inferred for r in rows):
        lines.append("")
        lines.append(INFERRED_NOTE)
    return "\n".join(lines)


INFERRED_NOTE = ("(inferred): untyped allocations whose type was read from the allocator frames at "
                 "their call site (std::allocator<T>, std::make_unique<T> ...)")
PEAK_NOTE = ("peak: the sum of the peaks of the call sites merged in a row, an upper bound when a row "
             "merges several")


def _describe_patterns(types) -> str:
    if isinstance(types, str):
        types = [types]
    return "matching " + " or ".join(repr(t) for t in types)


def _table(header: tuple, body: list[tuple], left: set[int], wide: int | None = None) -> list[str]:
    """Columns aligned; `left` columns flush left (the last one unpadded)."""
    table = [header] + body
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    if wide is not None:
        widths[wide] = min(widths[wide], 100)
    lines = []
    for i, row in enumerate(table):
        cells = []
        for j, cell in enumerate(row):
            if j == len(row) - 1:
                cells.append(cell)
            elif j in left:
                cells.append(cell.ljust(widths[j]))
            else:
                cells.append(cell.rjust(widths[j]))
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths[:-1]) + "  " + "-" * min(max(widths[-1], 8), 60))
    return lines


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


# --- by function ------------------------------------------------------------------------

def functions_json(profile: Profile, sort: str = "bytes", top: int | None = None, *, types=None,
                   inlined: bool = True, infer: bool = True) -> dict:
    rows = profile.by_function(types=types, sort=sort, inlined=inlined, infer=infer)
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "by": "function",
        "types": types,
        "functions": [r.as_dict() for r in (rows[:top] if top else rows)],
        "warnings": profile.warnings,
    }


def render_functions_text(profile: Profile, sort: str = "bytes", top: int | None = None, *, types=None,
                          inlined: bool = True, infer: bool = True) -> str:
    from .callpaths import sort_value

    view = profile.call_paths_view(inlined=inlined, infer=infer)
    rows = view.functions(types, sort)
    everything = sum((s.figures.bytes for s in view.selected(types)), 0)
    lines = _header(profile)
    if types:
        lines.append(f"  types      {_describe_patterns(types)}")
    lines.append("")
    lines.append(f"Functions, by {sort} allocated in the function itself (self) and under it (total):")
    shown = rows[:top] if top else rows
    body = []
    for r in shown:
        main_types = sorted(r.self_types.items(), key=lambda kv: -sort_value(kv[1], sort))
        type_note = ", ".join(k.label for k, _ in main_types[:2]) + (f" +{len(main_types) - 2}"
                                                                    if len(main_types) > 2 else "")
        body.append((format_count(r.self.allocations), format_bytes(r.self.bytes),
                      _percent(r.self.bytes, everything), format_count(r.total.allocations),
                      format_bytes(r.total.bytes), _percent(r.total.bytes, everything),
                      _shorten(type_note, 40), r.function))
    header = ("self allocs", "self bytes", "self%", "total allocs", "total bytes", "total%", "self types",
              "function")
    lines += _table(header, body, left={6, 7})
    if top and len(rows) > len(shown):
        lines.append(f"... {len(rows) - len(shown)} more functions (--top to show more)")
    if any(k.inferred for r in shown for k in r.self_types):
        lines += ["", INFERRED_NOTE]
    if not rows:
        lines.append(_no_paths_note(profile, types))
    lines += _context_note(profile)
    return "\n".join(lines)


NO_CONTEXT_NOTE = ("no calling contexts in this profile (code built without -finstrument-functions, or run "
                   "with HEAPTYPE_CALLSTACK=none): paths start at the function that called the allocator")


def _context_note(profile: Profile) -> list[str]:
    return [] if profile.has_call_paths else ["", NO_CONTEXT_NOTE]


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _no_paths_note(profile: Profile, types) -> str:
    if types:
        return f"(no allocation of a type {_describe_patterns(types)})"
    return "(no allocations)"


# --- by call path -----------------------------------------------------------------------

def callpaths_json(profile: Profile, sort: str = "bytes", top: int | None = None, *, types=None,
                   bottom_up: bool = False, inlined: bool = False, infer: bool = True) -> dict:
    tree = profile.call_tree(types=types, bottom_up=bottom_up, inlined=inlined, infer=infer)
    paths = profile.call_paths(types=types, sort=sort, inlined=inlined, infer=infer)
    return {
        "profile": profile.path,
        "executable": profile.executable,
        "by": "callpath",
        "direction": "bottom-up" if bottom_up else "top-down",
        "types": types,
        "paths": [p.as_dict() for p in (paths[:top] if top else paths)],
        "tree": tree.root.as_dict(sort),
        "warnings": profile.warnings,
    }


def render_callpaths_text(profile: Profile, sort: str = "bytes", top: int | None = None, *, types=None,
                          bottom_up: bool = False, inlined: bool = False, infer: bool = True) -> str:
    """The merged call tree, one line per frame, indented by depth; ``[T]`` lines
    say which types a frame allocated itself (top-down) or which types reach a
    frame's callers (bottom-up, under each allocating function). ``top`` keeps the
    largest N children of each frame."""
    tree = profile.call_tree(types=types, bottom_up=bottom_up, inlined=inlined, infer=infer)
    root = tree.root
    lines = _header(profile)
    if types:
        lines.append(f"  types      {_describe_patterns(types)}")
    lines.append("")
    direction = ("bottom-up: the functions that allocate, then their callers" if bottom_up
                 else "top-down: from the threads' first functions to the allocation calls")
    lines.append(f"Call paths, {direction}")
    body: list[tuple] = []
    whole = root.total.bytes
    _walk(root, 0, body, sort, top, whole, bottom_up)
    header = ("allocations", "bytes", "%", "peak", "call path")
    lines += _table(header, body, left={4})
    if not root.children:
        lines.append(_no_paths_note(profile, types))
    if any(k.inferred for k in root.types):
        lines += ["", INFERRED_NOTE]
    lines += ["", PEAK_NOTE]
    lines += _context_note(profile)
    return "\n".join(lines)


_INDENT = "  "
_MAX_INDENT = 40


def _walk(node, depth: int, body: list, sort: str, top: int | None, whole: int, bottom_up: bool) -> None:
    from .callpaths import sort_value

    children = node.sorted_children(sort)
    shown = children[:top] if top else children
    for child in shown:
        # A directly recursive function: one line for the run of frames.
        run, current = 1, child
        while (len(current.children) == 1 and not current.self.allocations
               and next(iter(current.children)) == current.name):
            current = current.children[current.name]
            run += 1
        name = child.name + (" [inlined]" if child.inlined else "")
        if run > 1:
            name += f" (x{run}, recursive)"
        indent = _INDENT * min(depth, _MAX_INDENT) + (f"[{depth}] " if depth > _MAX_INDENT else "")
        f = child.total
        body.append((format_count(f.allocations), format_bytes(f.bytes), _percent(f.bytes, whole),
                     format_bytes(f.peak_bytes), indent + name))
        types = current.types if (bottom_up and depth == 0) else current.self_types
        if not bottom_up or depth == 0:
            for key, figures in sorted(types.items(), key=lambda kv: (-sort_value(kv[1], sort), kv[0].label)):
                body.append((format_count(figures.allocations), format_bytes(figures.bytes),
                             _percent(figures.bytes, whole), format_bytes(figures.peak_bytes),
                             _INDENT * min(depth + 1, _MAX_INDENT) + f"[{key.label}]"))
        _walk(current, depth + 1, body, sort, top, whole, bottom_up)
    hidden = children[len(shown):]
    if hidden:
        rest = sum((c.total.bytes for c in hidden), 0)
        count = sum((c.total.allocations for c in hidden), 0)
        body.append((format_count(count), format_bytes(rest), _percent(rest, whole), "",
                     _INDENT * min(depth, _MAX_INDENT) + f"... {len(hidden)} more (--top)"))
