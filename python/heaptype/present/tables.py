"""The one table printer of HeapType's text output (reports, budget verdicts,
pytest summaries) and its Markdown twin (GitHub job summaries)."""

from __future__ import annotations

import re
from typing import Iterable, Mapping

# A marker at the end of a name that says what kind of row it is: kept when the name
# is cut, or a long inferred type reads as an exact one.
_KEPT_SUFFIX = re.compile(r" \(inferred[^()]*\)$")


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in "..." when cut (before a
    trailing "(inferred)" marker, which stays)."""
    if len(text) <= width:
        return text
    marker = _KEPT_SUFFIX.search(text)
    suffix = marker.group(0) if marker and len(marker.group(0)) + 3 < width else ""
    return text[: max(width - 3 - len(suffix), 0)] + "..." + suffix


def render_table(header: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: Iterable[int] = (),
                 widths: Mapping[int, int] | None = None, widest: int | None = None) -> list[str]:
    """Aligned columns under a header and a rule: columns in ``numeric`` flush right,
    the others flush left. ``widths`` caps given columns (longer cells are shortened
    with "..."), ``widest`` caps every column. The last column is not padded, so a
    long name at the end of a row never wraps the others."""
    caps = dict(widths or {})
    header = [str(c) for c in header]
    body = [[str(c) for c in row] for row in rows]

    def cap(i: int, cell: str) -> str:
        limit = caps.get(i, widest)
        return shorten(cell, limit) if limit else cell

    table = [[cap(i, c) for i, c in enumerate(row)] for row in [header] + body]
    numeric = set(numeric)
    sizes = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for n, row in enumerate(table):
        cells = []
        for i, cell in enumerate(row):
            if i == len(row) - 1 and i not in numeric:
                cells.append(cell)
            else:
                cells.append(cell.rjust(sizes[i]) if i in numeric else cell.ljust(sizes[i]))
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * s for s in sizes))
    return lines


def render_markdown(header: Iterable[str], rows: Iterable[Iterable[str]], *, numeric: Iterable[int] = ()) -> list[str]:
    """The same table as GitHub-flavoured Markdown (cells escaped)."""
    header = list(header)
    numeric = set(numeric)

    def escape(cell) -> str:
        return str(cell).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")

    lines = ["| " + " | ".join(escape(h) for h in header) + " |",
             "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return lines
