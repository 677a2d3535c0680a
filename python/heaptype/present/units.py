"""Numbers as people read them: sizes (1024-based), counts, percentages, times."""

from __future__ import annotations


def format_bytes(n: int) -> str:
    """512 B, 12.7 KiB, 3.05 MiB, 120 GiB."""
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


def format_percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def format_seconds(microseconds: int) -> str:
    return f"{microseconds / 1e6:.3f} s"
