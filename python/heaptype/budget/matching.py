"""Which budget rule covers which row: type patterns (HeapType's one glob
dialect, heaptype.analyze.patterns), their specificity, and "did you mean" hints."""

from __future__ import annotations

import difflib
import re
from typing import Iterable

from ..analyze.labels import TOTAL, UNTYPED
from ..analyze.patterns import is_glob, matches

# --- type name patterns ------------------------------------------------------------------

def name_matches(pattern: str, name: str) -> bool:
    """Whether a test name or type name matches a pattern (exact or glob)."""
    return matches(pattern, name)


def pattern_specificity(pattern: str | None) -> tuple[int, int]:
    """Which of several matching patterns sets a limit: an exact name beats a glob, a
    glob with more literal characters beats a shorter one, "*" beats [defaults]."""
    if pattern is None:            # [defaults] limits
        return (0, 0)
    if pattern == "*":
        return (1, 0)
    if is_glob(pattern):
        return (2, sum(c not in "*?" for c in pattern))
    return (3, len(pattern))


def type_matches(pattern: str | None, label: str) -> bool:
    """Whether a rule's type pattern covers a row. [defaults] (pattern None), "*" and
    globs cover typed rows only: every program has untyped memory of its own (stdout's
    buffer, libstdc++'s emergency pool), so "(untyped)" and "(total)" are budgeted only
    when named."""
    special = label in (UNTYPED, TOTAL)
    if pattern is None:
        return not special
    if pattern in (UNTYPED, TOTAL) or special:
        return pattern == label
    return name_matches(pattern, label)


def rows_holding(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The type names that hold ``name`` whole as a template argument, shortest first:
    the rows a budget for a type made by std::make_shared (its control block,
    std::_Sp_counted_ptr_inplace<T, ...>) or kept in a node-based container falls under."""
    pattern = re.compile(r"(?<![\w:])" + re.escape(name) + r"(?![\w:])")
    holding = [c for c in candidates if name in c and c != name and pattern.search(c)]
    return sorted(holding, key=lambda c: (len(c), c))[:n]


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    candidates = list(candidates)
    close = close_names(name, candidates, n=1)
    if close:
        return f"did you mean '{close[0]}'?"
    return "expected one of: " + ", ".join(candidates)
