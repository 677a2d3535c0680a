"""The one glob dialect of HeapType, shared by report filters (``--type``,
``--function``) and budget files: ``*`` matches any run of characters, ``?`` exactly
one, and every other character stands for itself, brackets included, since type
names hold them (``Token[]``, ``int [MEM_TYPE_IMGBUF]``). It is implemented once, in
the C++ core, which applies the same filters while it reads a profile."""

from __future__ import annotations

from typing import Iterable, Sequence

from .. import _core


def is_glob(pattern: str) -> bool:
    return _core.is_glob(pattern)


def matches(pattern: str, name: str) -> bool:
    """Whether ``name`` matches ``pattern`` (spelled exactly, or as a glob)."""
    return _core.glob_match(pattern, name)


def matches_any(patterns: Iterable[str], *names: str | None) -> bool:
    """Whether any pattern matches any of the names (None names are skipped)."""
    return any(_core.glob_match(p, n) for p in patterns for n in names if n is not None)


def as_list(patterns: str | Sequence[str] | None) -> list[str]:
    """One pattern, several, or none, as a list."""
    if not patterns:
        return []
    return [patterns] if isinstance(patterns, str) else list(patterns)
