"""Call paths: where each typed allocation came from.

The runtime gives every allocation a calling context: a node of its thread's
calling-context tree (one node per function entered, from the
``-finstrument-functions`` hooks, or per return address of a walked stack) and
the return address of the allocation call itself.  This module turns those into
call paths of named frames, root first, and merges the threads' trees into one:

* a node the hooks recorded is the function it entered; a node of a walked
  stack is the function holding its return address;
* the allocation's call site adds the function that made the call when the hooks
  did not see it (code built without instrumentation: the standard library's
  out-of-line templates, ``libstdc++.so``), and, with ``inlined=True``, the
  functions inlined at the call site that DWARF names (``std::vector<T>::push_back``
  -> ``_M_realloc_insert`` -> ``std::__new_allocator<T>::allocate``);
* frames are merged by name: two threads, or two call sites in one function,
  that reach the same functions share a path.

Untyped allocations get a type inferred from the frames at their call site when
the code that allocated is a standard allocator or factory
(``std::__new_allocator<T>::allocate``, ``std::make_unique<T>``,
``std::basic_string<C>``'s members ...): such a type is marked inferred everywhere
(``T (inferred)``, ``"inferred": true``).

Figures per path and type are the core's per-context figures added up.  Peaks do
not add up: the peak of a path that merges several contexts is the sum of their
peaks, an upper bound of the real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from typing import Callable, Iterable, Sequence

from .functions import CodeLocation, SourceFrame, Symbolizer
from .symbols import _collapse_closing_brackets, _split_top_level

__all__ = [
    "CallPathRow",
    "CallPaths",
    "CallTree",
    "CallTreeNode",
    "Figures",
    "FunctionRow",
    "InferredType",
    "PathFrame",
    "Site",
    "TypeKey",
    "infer_type",
    "type_filter",
]

UNTYPED_LABEL = "(untyped)"
INFERRED_SUFFIX = " (inferred)"
NO_CALL_SITE = "(no call site)"


# --------------------------------------------------------------------------
# Figures and types

@dataclass
class Figures:
    """Allocation figures of a set of allocations.

    ``live_blocks`` is exact when the core reports it per context, else estimated
    from the live bytes and the average block size of the context.
    """

    allocations: int = 0
    objects: int = 0
    bytes: int = 0
    peak_bytes: int = 0
    live_bytes: int = 0
    live_blocks: int = 0

    def add(self, other: "Figures") -> None:
        self.allocations += other.allocations
        self.objects += other.objects
        self.bytes += other.bytes
        self.peak_bytes += other.peak_bytes
        self.live_bytes += other.live_bytes
        self.live_blocks += other.live_blocks

    def copy(self) -> "Figures":
        return Figures(**self.as_dict())

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


SORT_FIELDS = {
    "bytes": "bytes",
    "allocations": "allocations",
    "objects": "objects",
    "peak": "peak_bytes",
    "live": "live_bytes",
}


def sort_value(figures: Figures, sort: str) -> int:
    try:
        return getattr(figures, SORT_FIELDS[sort])
    except KeyError:
        raise ValueError(f"unknown sort key {sort!r}: use one of {', '.join(SORT_FIELDS)}") from None


@dataclass(frozen=True, order=True)
class TypeKey:
    """A type as the reports show it: None is untyped; ``inferred`` marks a type
    read from the allocator frames at the call site instead of recorded."""

    name: str | None
    inferred: bool = False

    @property
    def label(self) -> str:
        if self.name is None:
            return UNTYPED_LABEL
        return self.name + INFERRED_SUFFIX if self.inferred else self.name


def type_filter(patterns: str | Sequence[str] | None) -> Callable[[TypeKey], bool]:
    """A predicate for ``--type``: any pattern matches the type's name (or its label,
    e.g. ``(untyped)`` or ``Foo (inferred)``), exactly or as an fnmatch glob."""
    if not patterns:
        return lambda key: True
    if isinstance(patterns, str):
        patterns = [patterns]
    patterns = list(patterns)

    def matches(key: TypeKey) -> bool:
        candidates = {key.label} | ({key.name} if key.name is not None else set())
        return any(p == c or fnmatchcase(c, p) for p in patterns for c in candidates)

    return matches


# --------------------------------------------------------------------------
# Type inference from the frames at a call site

_ALLOCATORS = {"std::__new_allocator", "__gnu_cxx::new_allocator", "std::allocator",
               "__gnu_cxx::__pool_alloc", "__gnu_cxx::malloc_allocator"}
_FACTORIES = {"std::make_unique", "std::make_unique_for_overwrite", "std::make_shared",
              "std::allocate_shared", "std::make_shared_for_overwrite"}
_STRINGS = {"std::__cxx11::basic_string", "std::basic_string"}


def _strip_parameters(name: str) -> str:
    """``R ns::f<A>(P) const`` -> ``ns::f<A>``: the qualified name alone."""
    text = name.strip()
    if text.endswith("]") and " [clone " in text:
        text = text[: text.rindex(" [clone ")]
    for qualifier in (" const", " volatile", " &&", " &", " noexcept"):
        while text.endswith(qualifier):
            text = text[: -len(qualifier)]
    if text.endswith(")"):
        depth = 0
        for i in range(len(text) - 1, -1, -1):
            char = text[i]
            if char == ")":
                depth += 1
            elif char == "(":
                depth -= 1
                if depth == 0:
                    text = text[:i]
                    break
    # Drop a return type: the last top-level space separates it from the name.
    depth = 0
    cut = 0
    for i, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == " " and depth == 0:
            cut = i + 1
    return text[cut:]


def _components(qualified: str) -> list[tuple[str, str | None]]:
    """``std::a<B>::c`` -> [("std", None), ("a", "B"), ("c", None)]."""
    parts, depth, begin = [], 0, 0
    i = 0
    while i < len(qualified):
        char = qualified[i]
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == ":" and depth == 0 and qualified.startswith("::", i):
            parts.append(qualified[begin:i])
            begin = i + 2
            i += 1
        i += 1
    parts.append(qualified[begin:])
    out = []
    for part in parts:
        if part.endswith(">") and "<" in part:
            at = part.index("<")
            out.append((part[:at], part[at + 1:-1]))
        else:
            out.append((part, None))
    return out


def _first_argument(args: str | None) -> str | None:
    if not args:
        return None
    split = _split_top_level(args)
    if not split or not split[0]:
        return None
    first = split[0].strip()
    for array in (" []", "[]"):
        if first.endswith(array):
            first = first[: -len(array)].strip()
    return _collapse_closing_brackets(first)


_CHARACTER_SIZES = {"char": 1, "signed char": 1, "unsigned char": 1, "char8_t": 1, "char16_t": 2,
                    "char32_t": 4, "wchar_t": 4}


def _type_from_function(name: str) -> tuple[str, bool] | None:
    """(T, whether the frame's first template argument is T) for a standard
    allocator or factory function's name; None for any other function."""
    comps = _components(_strip_parameters(name))
    if len(comps) < 2:
        return None
    names = [c[0] for c in comps]
    # std::__new_allocator<T>::allocate and the like
    if comps[-1][0] == "allocate" and len(comps) >= 3:
        scope = "::".join(names[:-1])
        if scope in _ALLOCATORS:
            found = _first_argument(comps[-2][1])
            return (found, True) if found else None
        if scope == "std::allocator_traits":
            allocator = _first_argument(comps[-2][1])  # std::allocator<T>
            if allocator:
                inner = _components(allocator)
                if "::".join(c[0] for c in inner) in _ALLOCATORS:
                    found = _first_argument(inner[-1][1])
                    return (found, False) if found else None
    # std::make_unique<T>, std::make_shared<T>
    if "::".join(names) in _FACTORIES:
        found = _first_argument(comps[-1][1])
        return (found, True) if found else None
    # any member of std::basic_string<C, ...>: its buffer is C[]
    for i in range(1, len(comps) - 1):
        if "::".join(names[: i + 1]) in _STRINGS:
            found = _first_argument(comps[i][1])
            return (found, False) if found else None
    return None


@dataclass(frozen=True)
class InferredType:
    """A type read from the frames at a call site; ``size`` is sizeof(T) when known."""

    name: str
    size: int | None = None

    def objects(self, allocations: int, nbytes: int) -> int:
        """How many T the allocations hold: bytes / sizeof(T) when that divides."""
        if self.size and nbytes % self.size == 0 and nbytes >= self.size * allocations:
            return nbytes // self.size
        return allocations


def infer_type(location: CodeLocation | None) -> InferredType | None:
    """The type an untyped allocation at this call site allocates, when the
    innermost standard allocator or factory frame there names it; else None."""
    if location is None:
        return None
    frames = list(location.frames)
    if not frames and location.function:
        frames = [SourceFrame(location.function)]
    for frame in frames:
        found = _type_from_function(frame.function)
        if found:
            name, own_argument = found
            size = frame.type_argument_size if own_argument else None
            return InferredType(name, size or _CHARACTER_SIZES.get(name))
    return None


# --------------------------------------------------------------------------
# Sites: one calling context each, as named frames

@dataclass(frozen=True)
class PathFrame:
    """One frame of a call path.

    ``pc`` is an address inside the frame's code that stands for it: inside the
    call instruction to the next frame when known (``call``), else the function's
    entry.  ``inlined``: DWARF says this frame was inlined into the one before it.
    """

    name: str
    pc: int = 0
    call: bool = False
    inlined: bool = False
    file: str | None = None
    line: int = 0
    module: str | None = None
    hooked: bool = False  # recorded by the instrumentation hooks


@dataclass
class Site:
    """One calling context: a thread's node and the allocation's call site."""

    thread: int
    node: int
    call_site: int
    frames: tuple[PathFrame, ...]  # root first; the last made the allocation call
    location: CodeLocation | None   # of the call site
    inferred_type: InferredType | None = None

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(frame.name for frame in self.frames)


@dataclass
class Sample:
    site: Site
    type: TypeKey
    figures: Figures


@dataclass(frozen=True)
class CallPathRow:
    """One call path and one type, with their figures."""

    path: tuple[str, ...]
    type: str | None
    inferred: bool
    allocations: int
    objects: int
    bytes: int
    peak_bytes: int
    live_bytes: int

    @property
    def type_label(self) -> str:
        return TypeKey(self.type, self.inferred).label

    def as_dict(self) -> dict:
        return {"path": list(self.path), "type": self.type, "inferred": self.inferred,
                "allocations": self.allocations, "objects": self.objects, "bytes": self.bytes,
                "peak_bytes": self.peak_bytes, "live_bytes": self.live_bytes}


@dataclass
class FunctionRow:
    """A function's figures: ``self`` are the allocations it called the allocator
    for itself, ``total`` all allocations made while it was on the stack (counted
    once however often it recurses)."""

    function: str
    self: Figures
    total: Figures
    self_types: dict[TypeKey, Figures] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"function": self.function, "self": self.self.as_dict(), "total": self.total.as_dict(),
                "types": [{"type": k.name, "inferred": k.inferred, **f.as_dict()}
                          for k, f in sorted(self.self_types.items(), key=lambda kv: -kv[1].bytes)]}


@dataclass
class CallTreeNode:
    """A node of a merged call tree. ``total`` covers the node's subtree; ``self``
    the paths that end here (top-down: allocations made by this frame; bottom-up:
    paths that start here)."""

    name: str
    inlined: bool = False
    total: Figures = field(default_factory=Figures)
    self: Figures = field(default_factory=Figures)
    types: dict[TypeKey, Figures] = field(default_factory=dict)       # of total
    self_types: dict[TypeKey, Figures] = field(default_factory=dict)  # of self
    children: dict[str, "CallTreeNode"] = field(default_factory=dict)

    def child(self, name: str) -> "CallTreeNode | None":
        return self.children.get(name)

    def find(self, *names: str) -> "CallTreeNode | None":
        node = self
        for name in names:
            node = node.children.get(name)
            if node is None:
                return None
        return node

    def sorted_children(self, sort: str = "bytes") -> list["CallTreeNode"]:
        return sorted(self.children.values(), key=lambda n: (-sort_value(n.total, sort), n.name))

    def as_dict(self, sort: str = "bytes") -> dict:
        return {
            "function": self.name,
            "inlined": self.inlined,
            "total": self.total.as_dict(),
            "self": self.self.as_dict(),
            "types": [{"type": k.name, "inferred": k.inferred, **f.as_dict()}
                      for k, f in sorted(self.types.items(), key=lambda kv: (-sort_value(kv[1], sort), kv[0].label))],
            "children": [c.as_dict(sort) for c in self.sorted_children(sort)],
        }


@dataclass
class CallTree:
    root: CallTreeNode
    bottom_up: bool


def _add_typed(table: dict[TypeKey, Figures], key: TypeKey, figures: Figures) -> None:
    entry = table.get(key)
    if entry is None:
        table[key] = figures.copy()
    else:
        entry.add(figures)


# --------------------------------------------------------------------------
# Building the sites

def _same_function_key(name: str) -> str:
    """A name without return type and parameters: DWARF names a function inlined
    from a static template by its source name (``f<T>``) where the symbol table has
    ``void f<T>()``; both must be one frame."""
    try:
        return _strip_parameters(name)
    except (IndexError, ValueError):
        return name


def _overlap(names: Sequence[str], chain: Sequence[str]) -> int:
    """The longest k with names[-k:] == chain[:k] (compared without parameters)."""
    names = [_same_function_key(n) for n in names[-len(chain):]] if chain else []
    chain = [_same_function_key(n) for n in chain]
    for k in range(min(len(names), len(chain)), 0, -1):
        if names[-k:] == chain[:k]:
            return k
    return 0


def _chain_frames(location: CodeLocation, pc: int) -> list[PathFrame]:
    """The frames at a call site, outermost first (the function, then what was
    inlined into it), each at the call instruction."""
    if not location.frames:
        return [PathFrame(location.name, pc, True, False, None, 0, location.module)]
    frames = []
    for frame in reversed(location.frames):
        name = frame.function if frame.inlined else (location.function or frame.function)
        frames.append(PathFrame(name, pc, True, frame.inlined, frame.file, frame.line, location.module))
    return frames


def _merge_chain(frames: list[PathFrame], chain: list[PathFrame], inlined: bool) -> list[PathFrame]:
    """Append a call site's frames to a path, without repeating the frames the hooks
    already recorded (a function inlined into its caller still runs the hooks).
    Only hooked frames can be repeated: each return address of a walked stack is a
    frame of its own, as in a recursion."""
    hooked = 0
    while hooked < len(frames) and frames[len(frames) - 1 - hooked].hooked:
        hooked += 1
    k = _overlap([f.name for f in frames[len(frames) - hooked:]], [f.name for f in chain])
    merged = list(frames[: len(frames) - k])
    # The overlapping frames are the hooks' frames, placed at the call site.
    for old, new in zip(frames[len(frames) - k:], chain[:k]):
        merged.append(PathFrame(old.name, new.pc, True, new.inlined, new.file, new.line, new.module, old.hooked))
    for new in chain[k:]:
        if new.inlined and not inlined:
            continue
        merged.append(new)
    return merged


class CallPaths:
    """The calling contexts of a profile, symbolised, with their per-type figures.

    ``aggregate`` is the core's aggregate (``ProfileFile.aggregate_by_type``);
    ``row_types`` names its rows (index -> type name, None for untyped).
    """

    def __init__(self, aggregate: dict, row_types: dict[int, str | None], symbolizer: Symbolizer, *,
                 inlined: bool = False, infer: bool = True):
        self.inlined = inlined
        self.infer = infer
        self._symbolizer = symbolizer
        contexts = aggregate.get("contexts", [])
        trees = aggregate.get("nodes", {})
        context_rows = aggregate.get("context_rows", [])

        function_addresses, call_addresses = set(), set()
        for tree in trees.values():
            for _, function, call_site in tree[1:]:
                if function:
                    function_addresses.add(function)
                if call_site:
                    call_addresses.add(call_site)
        call_addresses.update(c[2] for c in contexts if c[2])
        self._functions = symbolizer.functions(function_addresses)
        self._calls = symbolizer.call_sites(call_addresses)

        self._node_frames: dict[tuple[int, int], tuple[PathFrame, ...]] = {}
        self.sites: list[Site] = []
        for thread, node, call_site in contexts:
            self.sites.append(self._site(trees.get(thread, []), thread, node, call_site))

        self.samples: list[Sample] = []
        for entry in context_rows:
            context, row, allocations, objects, nbytes, live, peak = entry[:7]
            live_blocks = entry[7] if len(entry) > 7 else _estimate_live_blocks(allocations, nbytes, live)
            site = self.sites[context]
            name = row_types.get(row)
            key = TypeKey(name)
            if name is None and infer and site.inferred_type:
                key = TypeKey(site.inferred_type.name, True)
                objects = site.inferred_type.objects(allocations, nbytes)
            self.samples.append(Sample(site, key, Figures(allocations, objects, nbytes, peak, live, live_blocks)))

    # --- frames -------------------------------------------------------------------

    def _site(self, tree, thread: int, node: int, call_site: int) -> Site:
        frames = list(self._frames_of(tree, thread, node)) if 0 < node < len(tree) else []
        location = self._calls.get(call_site) if call_site else None
        if location is not None:
            frames = _merge_chain(frames, _chain_frames(location, call_site - 1), self.inlined)
        walked = 0 < node < len(tree) and not tree[node][1]
        if walked:  # a walked stack starts in the C library: show it from main on
            names = [f.name for f in frames]
            if "main" in names:
                frames = frames[names.index("main"):]
        if not frames:
            frames = [PathFrame(NO_CALL_SITE)]
        inferred = infer_type(location) if self.infer else None
        return Site(thread, node, call_site, tuple(frames), location, inferred)

    def _frames_of(self, tree, thread: int, node: int) -> tuple[PathFrame, ...]:
        key = (thread, node)
        cached = self._node_frames.get(key)
        if cached is not None:
            return cached
        # Iteratively: deep recursion makes deep trees.
        chain = []
        current = node
        while current and (thread, current) not in self._node_frames:
            chain.append(current)
            parent = tree[current][0]
            current = parent if parent < len(tree) and len(chain) <= len(tree) else 0
        frames = list(self._node_frames.get((thread, current), ())) if current else []
        for index in reversed(chain):
            _, function, call_site = tree[index]
            call = self._calls.get(call_site) if call_site else None
            if function:
                if frames and call is not None and frames[-1].hooked and call.function_address is not None \
                        and frames[-1].pc == call.function_address:
                    # The call into this node lies in the parent: place the parent there.
                    parent_frame = frames[-1]
                    site_frames = _chain_frames(call, call_site - 1)
                    frames[-1] = PathFrame(parent_frame.name, call_site - 1, True, parent_frame.inlined,
                                           site_frames[0].file, site_frames[0].line, call.module, True)
                    if self.inlined and len(site_frames) > 1:
                        frames = _merge_chain(frames, site_frames, True)
                fn = self._functions.get(function)
                name = fn.name if fn is not None else f"{function:#x}"
                first = fn.frames[-1] if fn is not None and fn.frames else None
                frames.append(PathFrame(name, function, False, False, first.file if first else None,
                                        first.line if first else 0, fn.module if fn else None, True))
            elif call is not None:
                frames = _merge_chain(frames, _chain_frames(call, call_site - 1), self.inlined)
            self._node_frames[(thread, index)] = tuple(frames)
        return self._node_frames.get((thread, node), tuple(frames))

    # --- views --------------------------------------------------------------------

    def selected(self, types: str | Sequence[str] | None = None) -> list[Sample]:
        keep = type_filter(types)
        return [s for s in self.samples if keep(s.type)]

    def rows(self, types: str | Sequence[str] | None = None, sort: str = "bytes") -> list[CallPathRow]:
        merged: dict[tuple[tuple[str, ...], TypeKey], Figures] = {}
        for sample in self.selected(types):
            key = (sample.site.path, sample.type)
            if key in merged:
                merged[key].add(sample.figures)
            else:
                merged[key] = sample.figures.copy()
        rows = [CallPathRow(path, key.name, key.inferred, f.allocations, f.objects, f.bytes, f.peak_bytes,
                            f.live_bytes)
                for (path, key), f in merged.items()]
        field_name = SORT_FIELDS[sort] if sort in SORT_FIELDS else "bytes"
        return sorted(rows, key=lambda r: (-getattr(r, field_name), r.path, r.type_label))

    def tree(self, types: str | Sequence[str] | None = None, bottom_up: bool = False) -> CallTree:
        root = CallTreeNode("(root)")
        for sample in self.selected(types):
            frames = sample.site.frames[::-1] if bottom_up else sample.site.frames
            node = root
            _add_node(node, sample)
            for frame in frames:
                child = node.children.get(frame.name)
                if child is None:
                    child = node.children[frame.name] = CallTreeNode(frame.name, frame.inlined and not frame.hooked)
                node = child
                _add_node(node, sample)
            node.self.add(sample.figures)
            _add_typed(node.self_types, sample.type, sample.figures)
        return CallTree(root, bottom_up)

    def functions(self, types: str | Sequence[str] | None = None, sort: str = "bytes") -> list[FunctionRow]:
        rows: dict[str, FunctionRow] = {}

        def row(name: str) -> FunctionRow:
            entry = rows.get(name)
            if entry is None:
                entry = rows[name] = FunctionRow(name, Figures(), Figures())
            return entry

        for sample in self.selected(types):
            names = sample.site.path
            for name in set(names):
                row(name).total.add(sample.figures)
            leaf = row(names[-1])
            leaf.self.add(sample.figures)
            _add_typed(leaf.self_types, sample.type, sample.figures)
        return sorted(rows.values(), key=lambda r: (-sort_value(r.self, sort), -sort_value(r.total, sort),
                                                    r.function))

    def types(self, types: str | Sequence[str] | None = None) -> dict[TypeKey, Figures]:
        out: dict[TypeKey, Figures] = {}
        for sample in self.selected(types):
            _add_typed(out, sample.type, sample.figures)
        return out


def _add_node(node: CallTreeNode, sample: Sample) -> None:
    node.total.add(sample.figures)
    _add_typed(node.types, sample.type, sample.figures)


def _estimate_live_blocks(allocations: int, nbytes: int, live: int) -> int:
    if not live or not allocations:
        return 0
    if not nbytes:
        return 0
    return max(1, min(allocations, round(live * allocations / nbytes)))


def inferred_types(aggregate: dict, row_types: dict[int, str | None], symbolizer: Symbolizer
                   ) -> dict[int, InferredType]:
    """{context index: inferred type} for the contexts with untyped allocations whose
    call site names a standard allocator or factory (only those call sites are
    symbolised)."""
    contexts = aggregate.get("contexts", [])
    untyped = {entry[0] for entry in aggregate.get("context_rows", []) if row_types.get(entry[1]) is None}
    sites = {contexts[i][2] for i in untyped if contexts[i][2]}
    locations = symbolizer.call_sites(sites)
    out = {}
    for i in untyped:
        found = infer_type(locations.get(contexts[i][2]))
        if found:
            out[i] = found
    return out


def iter_type_rows(aggregate: dict, row_types: dict[int, str | None], inferred: dict[int, InferredType]
                   ) -> Iterable[tuple[TypeKey, Figures, int]]:
    """Per-context figures of the untyped rows whose context has an inferred type,
    with the objects the untyped row counted for them."""
    for entry in aggregate.get("context_rows", []):
        context, row, allocations, objects, nbytes, live, peak = entry[:7]
        if row_types.get(row) is not None or context not in inferred:
            continue
        live_blocks = entry[7] if len(entry) > 7 else _estimate_live_blocks(allocations, nbytes, live)
        found = inferred[context]
        yield TypeKey(found.name, True), Figures(allocations, found.objects(allocations, nbytes), nbytes, peak,
                                                 live, live_blocks), objects
