"""What budgets limit: the fields, sizes and counts as written in budget files
and as shown in verdicts, and the errors of bad budget input."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from ..present.units import format_bytes

# The four figures of every row (tables, baselines, regression thresholds) ...
FIELDS = ("peak", "bytes", "allocations", "leaked")
# ... and the findings, counted against the row of the block's type: limits only.
FINDING_FIELDS = ("mismatched_deletes", "mismatched_frees")
LIMIT_FIELDS = FIELDS + FINDING_FIELDS
SIZE_FIELDS = frozenset({"peak", "bytes", "leaked"})
FIELD_MEANING = {
    "peak": "most live bytes at any moment",
    "bytes": "bytes allocated in all",
    "allocations": "number of allocations",
    "leaked": "bytes still live at exit",
    "mismatched_deletes": "deletes as a type whose size disagrees with the block's (type-aware capture mode)",
    "mismatched_frees": "free(), delete or delete[] of a block another family allocated",
}

# How tables and verdicts name the figures: "peak" alone reads as "allocated at peak"
# to some and "most live" to others (pytest-memray #115), so say which.
FIELD_LABEL = {"peak": "peak live", "bytes": "allocated", "allocations": "allocations", "leaked": "leaked",
               "mismatched_deletes": "mismatched deletes", "mismatched_frees": "mismatched frees"}

SIZE_HELP = ("a size is a whole number of bytes, or a string with a unit: B, KiB, MiB, GiB "
             "(KB, MB, GB are read as the same 1024-based units), e.g. \"64 KiB\" or \"1.5 MiB\"")


class BudgetError(ValueError):
    """Bad budget input. The message is complete and names the file, line and column,
    so that every caller can print it as it is, without a traceback."""


class HeapBudgetWarning(UserWarning):
    """A budget that is valid but probably not what was meant (a type that never
    appears). A warning, not an error: types come and go with compiler versions."""


# --- sizes and counts --------------------------------------------------------------------

_UNITS = {"b": 1, "kb": 1 << 10, "kib": 1 << 10, "mb": 1 << 20, "mib": 1 << 20,
          "gb": 1 << 30, "gib": 1 << 30, "tb": 1 << 40, "tib": 1 << 40}
_SIZE_RE = re.compile(r"^\s*([+-]?[0-9][0-9_,]*(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_size(value: Any) -> int:
    """Bytes from ``65536``, ``"64 KiB"``, ``"1.5MB"``: 1024-based whatever the spelling,
    as pytest-memray reads them, because "KB" in a memory budget always meant KiB to
    its authors. Fractions are rounded down to whole bytes. Raises ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{value!r} is not a size: {SIZE_HELP}")
    if isinstance(value, int):
        number, unit = Decimal(value), 1
    else:
        match = _SIZE_RE.match(value)
        unit = _UNITS.get(match.group(2).lower()) if match and match.group(2) else 1
        if not match or unit is None:
            raise ValueError(f"{value!r} is not a size: {SIZE_HELP}")
        try:
            number = Decimal(match.group(1).replace("_", "").replace(",", ""))
        except InvalidOperation:
            raise ValueError(f"{value!r} is not a size: {SIZE_HELP}") from None
    if number < 0:
        raise ValueError(f"{value!r}: a size cannot be negative")
    return int(number * unit)


def parse_count(value: Any) -> int:
    """A non-negative whole number (allocations), from an int or a string of digits."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9][0-9_,]*\s*", value):
        value = int(value.replace("_", "").replace(",", ""))
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not a count: use a whole number, e.g. 20000")
    if value < 0:
        raise ValueError(f"{value}: a count cannot be negative")
    return value


def parse_limit(field_name: str, value: Any) -> int:
    return parse_size(value) if field_name in SIZE_FIELDS else parse_count(value)


def format_size(n: int) -> str:
    """Human sizes, 1024-based: 512 B, 64 KiB, 78.1 KiB (the report's style)."""
    return format_bytes(n) if n >= 0 else "-" + format_bytes(-n)


def format_value(field_name: str, n: int) -> str:
    return format_size(n) if field_name in SIZE_FIELDS else f"{n:,}"


def format_exact(field_name: str, n: int) -> str:
    """A value as a human number, with the exact bytes beside it when they differ."""
    human = format_value(field_name, n)
    return human if field_name not in SIZE_FIELDS or n < 1024 else f"{human} ({n:,} B)"
