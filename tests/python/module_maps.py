"""Made-up module maps: the mappings of a process that loaded a binary at a given
base address, read from its program headers (no need to run it)."""

from __future__ import annotations

import struct
from pathlib import Path

from heaptype.analyze.symbols import Mapping


def load_segments(binary: Path) -> list[tuple[int, int, int, int]]:
    """(p_flags, p_offset, p_vaddr, p_memsz) of each PT_LOAD of a 64-bit little-endian ELF file."""
    data = binary.read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    entry_size, count = struct.unpack_from("<HH", data, 0x36)
    out = []
    for i in range(count):
        kind, flags, offset, vaddr, _, _, memsz, _ = struct.unpack_from("<IIQQQQQQ", data, phoff + i * entry_size)
        if kind == 1:  # PT_LOAD
            out.append((flags, offset, vaddr, memsz))
    return out


def module_map(binary: Path, base: int, path: str | None = None) -> list[Mapping]:
    """The mappings of `binary` (named `path`) loaded at `base`, page-rounded like the kernel's."""
    out = []
    for flags, offset, vaddr, memsz in load_segments(binary):
        perms = "r" + ("w" if flags & 2 else "-") + ("x" if flags & 1 else "-") + "p"
        out.append(Mapping(base + (vaddr & ~0xFFF), base + ((vaddr + memsz + 0xFFF) & ~0xFFF), offset & ~0xFFF,
                           perms, path or str(binary)))
    return out
