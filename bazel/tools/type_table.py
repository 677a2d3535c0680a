"""The type table of a linked binary, for heaptype_aspect: tag address -> C++ type name.

    type_table.py BINARY OUTPUT.json [LABEL]

Reads the binary's ELF symbol table with heaptype.analyze.symbols.elf_type_tags (the compiled
core, heaptype._core), the code that names the types of every profile, and writes

    {"binary": LABEL, "path": BINARY, "count": N,
     "types": [{"tag": "0x4041", "type": "Token"}, ...]}      (sorted by type, then tag)

`tag` is the link-time address of heaptype::type_id<T>::tag. A binary built without
HeapType has an empty table; a binary that is not ELF is an error.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    binary, output = argv[0], argv[1]
    label = argv[2] if len(argv) == 3 else binary

    from heaptype.analyze.symbols import SymbolError, elf_type_tags

    try:
        tags = elf_type_tags(binary)
    except SymbolError as error:  # unreadable, or not ELF
        print(f"heaptype type table: {label}: cannot read {binary}: {error}", file=sys.stderr)
        return 1
    rows = [{"tag": f"{address:#x}", "type": name}
            for address, name in sorted(tags.items(), key=lambda item: (item[1], item[0]))]
    with open(output, "w", encoding="utf-8") as stream:
        json.dump({"binary": label, "path": binary, "count": len(rows), "types": rows}, stream, indent=1)
        stream.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
