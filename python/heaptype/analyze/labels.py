"""The words reports and budgets share for things that are not C++ names."""

from __future__ import annotations

UNTYPED = "(untyped)"          # allocations with no type: code built without HeapType, C allocations
INFERRED_SUFFIX = " (inferred)"  # a type read from the allocator frames at the call site
TOTAL = "(total)"              # the whole process, in budgets
NO_CALL_SITE = "(no call site)"
ROOT = "(root)"

INFERRED_NOTE = ("(inferred): untyped allocations whose type was read from the allocator frames at "
                 "their call site (std::allocator<T>, std::make_unique<T> ...)")


def type_label(name: str | None, inferred: bool = False) -> str:
    """A type as every report shows it: ``(untyped)``, ``T (inferred)`` or ``T``."""
    if name is None:
        return UNTYPED
    return name + INFERRED_SUFFIX if inferred else name
