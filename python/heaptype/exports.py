"""Exports of a profile's call paths in the formats other tools read.

* ``pprof-text``: the legacy heap profile of gperftools (``heap profile: ...``, one
  line per stack of return addresses, then ``MAPPED_LIBRARIES:`` and the module
  map), which ``pprof``/``google-pprof PROGRAM FILE`` symbolises itself.  It has no
  room for types: stacks of several types appear as separate lines.
* ``folded``: one ``frame;frame;...;type value`` line per path and type, root
  first, the type as the leaf frame, for ``flamegraph.pl`` and its kin.  Inlined
  frames carry flamegraph.pl's ``_[i]`` suffix.
* ``pprof``: pprof's ``profile.proto``, gzipped, with the sample types
  alloc_objects, alloc_space, inuse_objects and inuse_space, the type of each
  sample as the label ``type`` (and ``inferred`` = ``true`` when it was inferred),
  and functions, locations (inlined frames as extra lines) and mappings filled in.
  Encoded here by hand: no protobuf package is needed.

``inuse_objects`` is the number of blocks still live at exit: exact when the core
reports live blocks per context, else estimated from the live bytes.
"""

from __future__ import annotations

import gzip
import os
from typing import Sequence

from .callpaths import UNTYPED_LABEL, CallPaths, PathFrame, Sample
from .profile import Profile
from .symbols import parse_proc_maps

FORMATS = ("pprof-text", "folded", "pprof")
FOLDED_VALUES = ("bytes", "allocations", "objects", "peak", "live")
_FOLDED_FIELDS = {"bytes": "bytes", "allocations": "allocations", "objects": "objects", "peak": "peak_bytes",
                  "live": "live_bytes"}


def _view(profile: Profile, inlined: bool) -> CallPaths:
    return profile.call_paths_view(inlined=inlined)


def _samples(profile: Profile, types, inlined: bool) -> list[Sample]:
    return _view(profile, inlined).selected(types)


# --------------------------------------------------------------------------
# Legacy pprof heap profile

def pprof_text(profile: Profile, *, types: str | Sequence[str] | None = None, inlined: bool = False) -> str:
    """The gperftools heap profile text, readable by ``google-pprof PROGRAM FILE``."""
    lines = []
    stacks: dict[tuple[int, ...], list[int]] = {}
    for sample in _samples(profile, types, inlined):
        addresses = _return_addresses(sample.site.frames)
        if not addresses:
            continue
        f = sample.figures
        entry = stacks.setdefault(addresses, [0, 0, 0, 0])
        entry[0] += f.live_blocks
        entry[1] += f.live_bytes
        entry[2] += f.allocations
        entry[3] += f.bytes
    totals = [sum(v[i] for v in stacks.values()) for i in range(4)]
    lines.append(f"heap profile: {totals[0]:6d}: {totals[1]:8d} [{totals[2]:6d}: {totals[3]:8d}] @ heapprofile")
    for addresses, v in sorted(stacks.items(), key=lambda kv: (-kv[1][3], kv[0])):
        stack = " ".join(f"0x{a:016x}" for a in addresses)
        lines.append(f"{v[0]:6d}: {v[1]:8d} [{v[2]:6d}: {v[3]:8d}] @ {stack}")
    lines.append("")
    lines.append("MAPPED_LIBRARIES:")
    modules = profile._raw.modules
    lines.append(modules.rstrip("\n"))
    return "\n".join(lines) + "\n"


def _return_addresses(frames: Sequence[PathFrame]) -> tuple[int, ...]:
    """Leaf first. pprof subtracts one from every address but the first (return
    addresses point after the call), so the first is a pc inside the call and the
    others are pc + 1. Inlined frames share their function's pc: pprof names the
    out-of-line function from its symbol table, so one address stands for them."""
    out: list[int] = []
    last_pc = None
    for frame in reversed(frames):
        if not frame.pc or frame.pc == last_pc:
            continue
        last_pc = frame.pc
        out.append(frame.pc if not out else frame.pc + 1)
    return tuple(out)


# --------------------------------------------------------------------------
# Folded stacks

def folded(profile: Profile, *, value: str = "bytes", types: str | Sequence[str] | None = None,
           inlined: bool = False) -> str:
    """``frame;frame;...;type value`` lines, root first, the type as the leaf."""
    try:
        field = _FOLDED_FIELDS[value]
    except KeyError:
        raise ValueError(f"unknown value {value!r}: use one of {', '.join(FOLDED_VALUES)}") from None
    stacks: dict[str, int] = {}
    for sample in _samples(profile, types, inlined):
        amount = getattr(sample.figures, field)
        if not amount:
            continue
        names = [_folded_name(frame) for frame in sample.site.frames]
        names.append(_clean(sample.type.label))
        key = ";".join(names)
        stacks[key] = stacks.get(key, 0) + amount
    return "".join(f"{stack} {amount}\n" for stack, amount in sorted(stacks.items()))


def _clean(name: str) -> str:
    return name.replace(";", ":").replace("\n", " ")


def _folded_name(frame: PathFrame) -> str:
    name = _clean(frame.name)
    return name + "_[i]" if frame.inlined and not frame.hooked else name


# --------------------------------------------------------------------------
# pprof profile.proto

def pprof_proto(profile: Profile, *, types: str | Sequence[str] | None = None, inlined: bool = True,
                compress: bool = True) -> bytes:
    """pprof's Profile message, gzipped (as ``pprof`` reads and writes it)."""
    builder = _ProtoBuilder(profile)
    for sample in _samples(profile, types, inlined):
        builder.add(sample)
    data = builder.encode()
    return gzip.compress(data, mtime=0) if compress else data


class _ProtoBuilder:
    def __init__(self, profile: Profile):
        self.profile = profile
        self.strings: dict[str, int] = {"": 0}
        self.functions: dict[tuple[str, str], int] = {}
        self.function_rows: list[bytes] = []
        self.locations: dict[tuple, int] = {}
        self.location_rows: list[bytes] = []
        self.samples: list[bytes] = []
        self.any_lines = False
        self.mappings = self._mappings()

    def s(self, text: str | None) -> int:
        text = text or ""
        index = self.strings.get(text)
        if index is None:
            index = self.strings[text] = len(self.strings)
        return index

    def _mappings(self) -> list[dict]:
        by_path: dict[str, list] = {}
        for m in parse_proc_maps(self.profile._raw.modules):
            by_path.setdefault(m.path, []).append(m)
        executable = self.profile.executable
        out = []
        order = sorted(by_path, key=lambda p: (os.path.realpath(p) != os.path.realpath(executable or ""),
                                               min(m.start for m in by_path[p])))
        for path in order:
            for m in by_path[path]:
                if "x" in m.perms:
                    out.append({"id": len(out) + 1, "start": m.start, "limit": m.end, "offset": m.offset,
                                "path": path})
        build_ids = {}
        for entry in out:
            if entry["path"] not in build_ids:
                from .functions import build_id

                build_ids[entry["path"]] = build_id(entry["path"]) or ""
            entry["build_id"] = build_ids[entry["path"]]
        return out

    def _mapping_of(self, address: int) -> int:
        for entry in self.mappings:
            if entry["start"] <= address < entry["limit"]:
                return entry["id"]
        return 0

    def _function(self, name: str, file: str | None) -> int:
        key = (name, file or "")
        index = self.functions.get(key)
        if index is None:
            index = self.functions[key] = len(self.function_rows) + 1
            self.function_rows.append(
                _varint_field(1, index) + _varint_field(2, self.s(name)) + _varint_field(3, self.s(name))
                + _varint_field(4, self.s(file)))
        return index

    def _location(self, frames: list[PathFrame]) -> int:
        """One location for a pc: its frames innermost first (inlined ones, then
        the function they were inlined into), as pprof's Line entries."""
        pc = frames[0].pc
        key = (pc, tuple((f.name, f.file, f.line) for f in frames))
        index = self.locations.get(key)
        if index is not None:
            return index
        index = self.locations[key] = len(self.location_rows) + 1
        body = _varint_field(1, index) + _varint_field(2, self._mapping_of(pc)) + _varint_field(3, pc)
        for frame in frames:
            self.any_lines = self.any_lines or bool(frame.line)
            line = _varint_field(1, self._function(frame.name, frame.file)) + _varint_field(2, frame.line)
            body += _bytes_field(4, line)
        self.location_rows.append(body)
        return index

    def add(self, sample: Sample) -> None:
        # Leaf first; frames at one pc (a function and what is inlined into it) share a location.
        groups: list[list[PathFrame]] = []
        for frame in reversed(sample.site.frames):
            if groups and frame.pc and groups[-1][0].pc == frame.pc and frame.call:
                groups[-1].append(frame)
            else:
                groups.append([frame])
        location_ids = [self._location(group) for group in groups]
        f = sample.figures
        body = _packed_field(1, location_ids) + _packed_field(2, [f.allocations, f.bytes, f.live_blocks,
                                                                   f.live_bytes])
        key = sample.type
        name = key.name if key.name is not None else UNTYPED_LABEL
        body += _bytes_field(3, _varint_field(1, self.s("type")) + _varint_field(2, self.s(name)))
        if key.inferred:
            body += _bytes_field(3, _varint_field(1, self.s("inferred")) + _varint_field(2, self.s("true")))
        body += _bytes_field(3, _varint_field(1, self.s("thread")) + _varint_field(3, sample.site.thread))
        self.samples.append(body)

    def encode(self) -> bytes:
        sample_types = [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
                        ("inuse_space", "bytes")]
        out = bytearray()
        for kind, unit in sample_types:
            out += _bytes_field(1, _varint_field(1, self.s(kind)) + _varint_field(2, self.s(unit)))
        for body in self.samples:
            out += _bytes_field(2, body)
        has_lines = self.any_lines
        for m in self.mappings:
            body = (_varint_field(1, m["id"]) + _varint_field(2, m["start"]) + _varint_field(3, m["limit"])
                    + _varint_field(4, m["offset"]) + _varint_field(5, self.s(m["path"]))
                    + _varint_field(6, self.s(m["build_id"])) + _varint_field(7, 1)
                    + _varint_field(8, 1 if has_lines else 0) + _varint_field(9, 1 if has_lines else 0)
                    + _varint_field(10, 1))
            out += _bytes_field(3, body)
        for body in self.location_rows:
            out += _bytes_field(4, body)
        for body in self.function_rows:
            out += _bytes_field(5, body)
        raw = self.profile._raw
        duration_ns = self.profile.totals.duration_us * 1000
        comment = self.s(f"heaptype profile of {' '.join(self.profile.argv) or self.profile.executable}")
        period_type = _varint_field(1, self.s("space")) + _varint_field(2, self.s("bytes"))
        default_type = self.s("alloc_space")
        tail = (_varint_field(9, getattr(raw, "start_unix_ns", 0) or 0) + _varint_field(10, duration_ns)
                + _bytes_field(11, period_type) + _varint_field(12, 1) + _varint_field(13, comment)
                + _varint_field(14, default_type))
        # The string table last: every index above is known by now.
        for text in self.strings:  # dicts keep insertion order: index order
            out += _bytes_field(6, text.encode("utf-8"))
        out += tail
        return bytes(out)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 in two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    if not value:
        return b""  # proto3: zero is the default and is not written
    return _varint(number << 3) + _varint(value)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _packed_field(number: int, values: Sequence[int]) -> bytes:
    if not values:
        return b""
    return _bytes_field(number, b"".join(_varint(v) for v in values))


# --------------------------------------------------------------------------

def export(profile: Profile, fmt: str, *, types: str | Sequence[str] | None = None, value: str = "bytes",
           inlined: bool | None = None) -> bytes:
    """The export in format ``fmt`` (one of FORMATS), as bytes to write."""
    if fmt == "pprof-text":
        return pprof_text(profile, types=types, inlined=bool(inlined)).encode()
    if fmt == "folded":
        return folded(profile, value=value, types=types, inlined=bool(inlined)).encode()
    if fmt == "pprof":
        return pprof_proto(profile, types=types, inlined=True if inlined is None else inlined)
    raise ValueError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")


__all__ = ["FORMATS", "FOLDED_VALUES", "export", "folded", "pprof_proto", "pprof_text"]
