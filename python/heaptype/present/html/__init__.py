"""The HTML report: one self-contained page (scripts, styles and data inline, no
network when opened) of a profile, or of the difference of two.

* data.py: what a report page shows, from the report views (report/);
* diff.py: what a diff page shows;
* flame.py: the call tree cut to what a page can carry, as columns;
* ranges.py: figures per time bucket, so a brushed time range filters every view;
* memory.py: the memory view (blocks by address, coloured by type), condensed;
* render.py: the jinja2 template, the inline assets, the data's safe embedding.

The page draws with d3 (``assets/d3.v5.min.js``, BSD-3-Clause, from Debian's node-d3
5.16.0; its licence is ``assets/d3.LICENSE.txt``) and ``assets/report.js``.
"""

from __future__ import annotations

from pathlib import Path

# The modules are imported when a page is made: the command line imports this package
# to list `heaptype html`, and must not need jinja2 or the compiled core for that.


def report_html(profile, *, ranges: int | None = None) -> str:
    """The page of one profile (its filters apply), as text; ``ranges``: the time
    buckets a brushed range snaps to (None: 24, fewer for large files; 0: none)."""
    from .data import report_data
    from .render import render_page

    return render_page(report_data(profile, ranges=ranges), f"HeapType report: {Path(profile.path).name}")


def diff_html(a, b) -> str:
    """The page comparing profile B (after) with A (before), as text."""
    from .diff import diff_data
    from .render import render_page

    return render_page(diff_data(a, b), f"HeapType diff: {Path(a.path).name} \u2192 {Path(b.path).name}")


def write_html(text: str, path) -> Path:
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["diff_html", "report_html", "write_html"]
