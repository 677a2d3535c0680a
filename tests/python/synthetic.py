"""Synthetic profiles for the analysis core, and a brute-force reference.

A Scenario is a program's heap history as it really happened: threads with their
calling-context trees, allocation sites, and one global order of operations
(allocations, frees by any thread, blocks whose type is named late). ``write``
turns it into a profile file with heaptype._core.ProfileBuilder, the way the
runtime writes one: each thread's records in its own stream, chunks flushed at
random points so threads' chunks interleave in any order. ``Reference`` replays the
same history block by block in plain Python and computes every figure the core
reports, by definition: a group's peak is the most bytes of that group live at once.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from heaptype import _core

LOOKAHEAD = 256  # the core folds a move into its allocation within this many events


@dataclass
class Site:
    size: int
    count: int
    tag: int          # 0: untyped
    call_site: int
    node: int         # the thread's node (0: none)
    derived_from: tuple[int, int] | None = None  # (thread, site): size and context are that site's


@dataclass
class Op:
    kind: str          # alloc, free, move
    stream: int        # the thread whose records hold it
    block: int
    time: int
    site: int = -1     # alloc: the stream's site; move: the stream's new site
    last: bool = False  # free: written as FREE_LAST (a temporary only when nothing came between)


@dataclass
class Block:
    owner: int         # thread whose site the block is at
    site: int
    alive: bool = True


@dataclass
class Scenario:
    functions: dict[int, str] = field(default_factory=dict)      # entry -> name
    call_sites: dict[int, int] = field(default_factory=dict)     # return address -> function entry
    types: dict[int, str] = field(default_factory=dict)          # tag -> name
    nodes: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)  # thread -> [(parent, fn, call site)]
    sites: dict[int, list[Site]] = field(default_factory=dict)   # thread -> sites
    ops: list[Op] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    walked: bool = False  # nodes are return addresses of a walked stack (function 0)

    # --- names as the core sees them ------------------------------------------------

    def code_names(self) -> "_core.TableCodeNames":
        names = _core.TableCodeNames()
        for entry, name in self.functions.items():
            names.add_function(entry, name)
        for address, entry in self.call_sites.items():
            names.add_call_site(address, self.functions[entry], entry)
        for tag, name in self.types.items():
            names.add_type(tag, name)
        return names

    def base_site(self, thread: int, site: int) -> tuple[int, Site]:
        s = self.sites[thread][site]
        while s.derived_from is not None:
            thread, index = s.derived_from
            s = self.sites[thread][index]
        return thread, s

    def path(self, thread: int, site: int) -> tuple[str, ...]:
        """The frame names of a site's allocations, root first."""
        base_thread, s = self.base_site(thread, site)
        chain, node = [], s.node
        while node:
            parent, function, call_site = self.nodes[base_thread][node - 1]
            chain.append(self.functions[self.call_sites[call_site]] if self.walked else self.functions[function])
            node = parent
        names = list(reversed(chain))
        caller = self.functions[self.call_sites[s.call_site]]
        if self.walked or not names or names[-1] != caller:
            names.append(caller)
        return tuple(names)

    def type_label(self, thread: int, site: int) -> str:
        tag = self.sites[thread][site].tag
        return self.types[tag] if tag else "(untyped)"

    def size(self, thread: int, site: int) -> int:
        return self.base_site(thread, site)[1].size

    def objects(self, thread: int, site: int) -> int:
        return self.sites[thread][site].count or 1


# --- generating -------------------------------------------------------------------------

FUNCTION_NAMES = ["main", "parse(int)", "node()", "emit<Foo>()", "run()", "visit(Node*)"]
TYPE_NAMES = ["Foo", "Bar", "std::vector<int>", "Foo"]  # two tags share the name Foo


def generate(rng: random.Random, *, threads: int | None = None, operations: int | None = None,
             walked: bool = False, deep: int = 0, moves: bool = True) -> Scenario:
    sc = Scenario(walked=walked)
    entries = [0x1000 * (i + 1) for i in range(len(FUNCTION_NAMES))]
    sc.functions = dict(zip(entries, FUNCTION_NAMES))
    next_call_site = {entry: entry + 0x10 for entry in entries}

    def call_site_in(entry: int) -> int:
        address = next_call_site[entry]
        next_call_site[entry] += 4
        sc.call_sites[address] = entry
        return address

    sc.types = {0xA0 + i: name for i, name in enumerate(TYPE_NAMES)}
    thread_ids = list(range(1, (threads or rng.randint(1, 4)) + 1))
    for t in thread_ids:
        nodes: list[tuple[int, int, int]] = []
        # A random tree, plus (deep) one long recursive chain of two functions.
        for _ in range(rng.randint(0, 12)):
            parent = rng.randint(0, len(nodes))
            parent_fn = entries[0] if parent == 0 else nodes[parent - 1][1]
            fn = rng.choice(entries[1:])
            nodes.append((parent, fn, call_site_in(parent_fn)))
        if deep:
            parent, parent_fn = 0, entries[0]
            for level in range(deep):
                fn = entries[1 + level % 2]
                nodes.append((parent, fn, call_site_in(parent_fn)))
                parent, parent_fn = len(nodes), fn
        if walked:
            nodes = [(p, 0, cs) for p, _, cs in nodes]
        sc.nodes[t] = nodes
        sites = []
        for _ in range(rng.randint(1, 6)):
            node = rng.randint(0, len(nodes)) if nodes else 0
            if deep and rng.random() < 0.5:
                node = len(nodes)  # the bottom of the deep chain
            fn = entries[0] if node == 0 else (sc.call_sites[nodes[node - 1][2]] if walked else nodes[node - 1][1])
            tag = rng.choice([0, 0, 0xA0, 0xA1, 0xA2, 0xA3])
            size = rng.choice([8, 16, 24, 1024, 4096])
            count = (size // 8 if rng.random() < 0.3 else 1) if tag else 0
            sites.append(Site(size, count, tag, call_site_in(fn), node))
        sc.sites[t] = sites

    time = 0
    last_alloc: dict[int, int | None] = dict.fromkeys(thread_ids)
    live: list[int] = []
    for _ in range(operations or rng.randint(1, 300)):
        time += 1
        t = rng.choice(thread_ids)
        roll = rng.random()
        if roll < 0.5 or not live:
            site = rng.randrange(len(sc.sites[t]))
            sc.blocks.append(Block(t, site))
            block = len(sc.blocks) - 1
            live.append(block)
            sc.ops.append(Op("alloc", t, block, time, site))
            last_alloc[t] = block
            if moves and not sc.sites[t][site].tag and rng.random() < 0.3:
                # Its constructor allocated first: the type comes right after (the runtime's MOVE).
                time += 1
                _move(sc, rng, t, block, time)  # FREE_LAST follows it to its new site
        elif roll < 0.9:
            block = rng.choice(live)
            b = sc.blocks[block]
            if rng.random() < 0.6:
                t = b.owner  # most frees are by the allocating thread
            is_last = last_alloc.get(t) == block and b.owner == t
            live.remove(block)
            b.alive = False
            sc.ops.append(Op("free", t, block, time, last=is_last and rng.random() < 0.8))
            if is_last:
                last_alloc[t] = None
        elif moves:
            # Another thread names the type of a block it was handed (heaptype::tag<T>).
            untyped = [blk for blk in live if not sc.sites[sc.blocks[blk].owner][sc.blocks[blk].site].tag
                       and sc.blocks[blk].owner != t]
            if untyped:
                _move(sc, rng, t, rng.choice(untyped), time)
    return sc


def _move(sc: Scenario, rng: random.Random, t: int, block: int, time: int) -> None:
    """Thread t gives a block its type: a new site of t's (derived when the block's
    context belongs to another thread), and the block moves there."""
    b = sc.blocks[block]
    tag = rng.choice([0xA0, 0xA1, 0xA2])
    base_thread, base = sc.base_site(b.owner, b.site)
    if t == base_thread:
        new = Site(base.size, 1, tag, base.call_site, base.node)
    else:
        new = Site(0, 1, tag, 0, 0, derived_from=(b.owner, b.site))
    sc.sites[t].append(new)
    sc.ops.append(Op("move", t, block, time, len(sc.sites[t]) - 1))
    b.owner, b.site = t, len(sc.sites[t]) - 1


# --- writing ------------------------------------------------------------------------------

def write(sc: Scenario, rng: random.Random, *, tick: int = 1, flush_chance: float = 0.05) -> bytes:
    """The profile file of a scenario. Times are op times // tick: tick > 1 puts
    several threads' events in one clock tick, as a coarse clock does."""
    b = _core.ProfileBuilder(clock_tick_ns=1000)
    b.program("/synthetic/program", ["program", "--flag"])
    defined: dict[tuple[int, int], int] = {}   # (thread, scenario site) -> builder site number
    nodes_defined: dict[int, int] = defaultdict(int)  # thread -> nodes written
    owner_site: dict[int, tuple[int, int]] = {}  # block -> (thread, scenario site) it is at
    for t in sc.nodes:
        b.thread(t, 1000 + t, f"thread-{t}")

    def ensure_node(t: int, node: int) -> None:
        while nodes_defined[t] < node:
            parent, fn, call_site = sc.nodes[t][nodes_defined[t]]
            b.node(t, parent, fn, call_site)
            nodes_defined[t] += 1

    def builder_site(t: int, site: int) -> int:
        key = (t, site)
        if key not in defined:
            s = sc.sites[t][site]
            if s.derived_from is not None:
                base_t, base_site = s.derived_from
                defined[key] = b.derived_site(t, base_t, defined[(base_t, base_site)], s.tag, s.count)
            else:
                ensure_node(t, s.node)
                defined[key] = b.site(t, s.size, s.count, s.tag, s.call_site, s.node)
        return defined[key]

    for op in sc.ops:
        t, time = op.stream, op.time // tick
        if op.kind == "alloc":
            b.alloc(t, time, builder_site(t, op.site))
            owner_site[op.block] = (t, op.site)
        elif op.kind == "free":
            owner, site = owner_site[op.block]
            if op.last:
                b.free_last(t, time)
            elif owner == t:
                b.free(t, time, defined[(owner, site)])
            else:
                b.free_remote(t, time, owner, defined[(owner, site)])
        else:
            owner, site = owner_site[op.block]
            new = builder_site(t, op.site)
            b.move(t, time, owner, defined[(owner, site)], new)
            owner_site[op.block] = (t, op.site)
        if rng.random() < flush_chance:
            b.flush(t)
    allocations = sum(op.kind == "alloc" for op in sc.ops)
    frees = sum(op.kind == "free" for op in sc.ops)
    b.end(allocations, frees)
    return b.finish()


# --- the reference ----------------------------------------------------------------------------

class Group:
    """Brute-force figures of one group."""

    __slots__ = ("allocations", "objects", "bytes", "live_bytes", "live_blocks", "peak_bytes", "peak_time",
                 "temporary")

    def __init__(self):
        self.allocations = self.objects = self.bytes = 0
        self.live_bytes = self.live_blocks = self.peak_bytes = self.peak_time = self.temporary = 0

    def add(self, size: int, objects: int, time: int, count: bool = True) -> None:
        if count:
            self.allocations += 1
            self.objects += objects
            self.bytes += size
        self.live_bytes += size
        self.live_blocks += 1
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes, self.peak_time = self.live_bytes, time

    def remove(self, size: int, objects: int, *, temporary: bool = False, uncount: bool = False) -> None:
        if uncount:
            self.allocations -= 1
            self.objects -= objects
            self.bytes -= size
        self.live_bytes -= size
        self.live_blocks -= 1
        self.temporary += temporary

    def key(self) -> tuple:
        return (self.allocations, self.objects, self.bytes, self.peak_bytes, self.live_bytes, self.live_blocks,
                self.temporary)


def folded_ops(sc: Scenario) -> list[Op]:
    """The ops as the core counts them: a move of a thread's own block that follows
    its allocation closely, with no other event at that site between, is folded into
    the allocation (the block is counted at its typed site from the start)."""
    ops = [Op(o.kind, o.stream, o.block, o.time, o.site, o.last) for o in sc.ops]
    position = {}   # op index -> index within its stream
    counts: dict[int, int] = defaultdict(int)
    for i, op in enumerate(ops):
        position[i] = counts[op.stream]
        counts[op.stream] += 1
    site_of = {}      # block -> (thread, site) before each op
    events_at = defaultdict(list)  # (thread, site) -> op indexes naming it, in order
    for i, op in enumerate(ops):
        if op.kind == "alloc":
            site_of[op.block] = (op.stream, op.site)
            events_at[site_of[op.block]].append(i)
        else:
            events_at[site_of[op.block]].append(i)
            if op.kind == "move":
                site_of[op.block] = (op.stream, op.site)
                events_at[site_of[op.block]].append(i)
    drop = set()
    for i, op in enumerate(ops):
        if op.kind != "alloc":
            continue
        key = (op.stream, op.site)
        later = [j for j in events_at[key] if j > i and ops[j].stream == op.stream]
        if not later:
            continue
        j = later[0]
        move = ops[j]
        if (move.kind == "move" and move.stream == op.stream and move.block == op.block
                and position[j] - position[i] < LOOKAHEAD):
            op.site = move.site
            drop.add(j)
    return [op for i, op in enumerate(ops) if i not in drop]


class PathIds:
    """Call paths as numbers: (parent's number, frame name) -> number, so that paths
    100,000 frames deep compare without building their tuples."""

    def __init__(self):
        self.ids: dict[tuple[int, str], int] = {}

    def child(self, parent: int, name: str) -> int:
        return self.ids.setdefault((parent, name), len(self.ids) + 1)

    def of(self, path) -> int:
        node = 0
        for name in path:
            node = self.child(node, name)
        return node


def named_sites(ops: list[Op]) -> list[tuple[int, int]]:
    """The (thread, site) each op's record names, as written (a move: the site it leaves)."""
    where: dict[int, tuple[int, int]] = {}
    names: list[tuple[int, int]] = []
    for op in ops:
        if op.kind == "alloc":
            where[op.block] = (op.stream, op.site)
        names.append(where[op.block])
        if op.kind == "move":
            where[op.block] = (op.stream, op.site)
    return names


def merged_order(ops: list[Op], names: list[tuple[int, int]], tick: int) -> list[int]:
    """Indexes of ``ops`` (folded, in the order written) in the order the core's merge
    applies them (src/core/event_merge.cpp): the earliest clock tick first, on a tie the
    lower thread number; a free or move by another thread than the block's waits until a
    block is live at the site it names (sites, not blocks, are named), and when every
    stream waits the earliest goes on."""
    streams: dict[int, list[int]] = defaultdict(list)
    for i, op in enumerate(ops):
        streams[op.stream].append(i)
    heads = dict.fromkeys(streams, 0)
    live: dict[tuple[int, int], int] = defaultdict(int)
    order: list[int] = []

    def front(t: int) -> int | None:
        return streams[t][heads[t]] if heads[t] < len(streams[t]) else None

    def waits(i: int) -> bool:
        owner = names[i][0]
        return ops[i].kind != "alloc" and owner != ops[i].stream and live[names[i]] <= 0 and front(owner) is not None

    while len(order) < len(ops):
        ready = [t for t in streams if front(t) is not None]
        going = [t for t in ready if not waits(front(t))] or ready
        t = min(going, key=lambda t: (ops[front(t)].time // tick, t))
        i = front(t)
        heads[t] += 1
        order.append(i)
        if ops[i].kind != "alloc":
            live[names[i]] -= 1
        if ops[i].kind != "free":
            live[(ops[i].stream, ops[i].site)] += 1
    return order


def temporary_frees(ops: list[Op], tick: int) -> set[int]:
    """heaptrack's rule on the merged order (src/core/temporaries.hpp): a free is
    temporary when the event before it was an allocation at the site the free names. A
    move by the allocating thread of that site takes the allocation along."""
    names = named_sites(ops)
    last: tuple[int, int] | None = None
    temporary: set[int] = set()
    for i in merged_order(ops, names, tick):
        op = ops[i]
        if op.kind == "alloc":
            last = (op.stream, op.site)
        elif op.kind == "move":
            if last == names[i] and op.stream == last[0]:
                last = (op.stream, op.site)
        else:
            if last == names[i]:
                temporary.add(i)
            last = None
    return temporary


class Reference:
    """Every figure of a scenario, block by block. Tree nodes and leaves are keyed by
    path numbers of ``path_ids`` (the root is 0). ``tick``: the clock tick the profile
    was written with (``write``), which decides the merged order temporaries follow."""

    def __init__(self, sc: Scenario, path_ids: PathIds | None = None, tick: int = 1):
        self.sc = sc
        self.path_ids = path_ids or PathIds()
        self._site_groups: dict[tuple[int, int], tuple] = {}
        self.totals = Group()
        self.types: dict[str, Group] = defaultdict(Group)
        self.threads: dict[int, Group] = defaultdict(Group)
        self.function_total: dict[str, Group] = defaultdict(Group)
        self.function_self: dict[str, Group] = defaultdict(Group)
        self.nodes: dict[int, Group] = defaultdict(Group)       # path number -> total
        self.leaves: dict[tuple, Group] = defaultdict(Group)    # (path number, type label) -> figures
        self.frees = 0
        at: dict[int, tuple[int, int]] = {}
        ops = folded_ops(sc)
        temporary = temporary_frees(ops, tick)
        for i, op in enumerate(ops):
            if op.kind == "alloc":
                at[op.block] = (op.stream, op.site)
                self._apply(at[op.block], op.time, "alloc")
            elif op.kind == "free":
                self._apply(at[op.block], op.time, "free", temporary=i in temporary)
                self.frees += 1
            else:
                self._apply(at[op.block], op.time, "unalloc")
                at[op.block] = (op.stream, op.site)
                self._apply(at[op.block], op.time, "moved")

    def _groups(self, where: tuple[int, int]) -> list[Group]:
        cached = self._site_groups.get(where)
        if cached is None:
            thread, site = where
            path = self.sc.path(thread, site)
            label = self.sc.type_label(thread, site)
            base_thread = self.sc.base_site(thread, site)[0]
            prefixes, node = [], 0
            for name in path:
                node = self.path_ids.child(node, name)
                prefixes.append(node)
            groups = [self.types[label], self.threads[base_thread], self.function_self[path[-1]],
                      self.leaves[(node, label)]]
            groups += [self.function_total[name] for name in set(path)]
            groups += [self.nodes[n] for n in prefixes]
            cached = self._site_groups[where] = groups
        return cached

    def _apply(self, where: tuple[int, int], time: int, what: str, temporary: bool = False) -> None:
        size, objects = self.sc.size(*where), self.sc.objects(*where)
        groups = self._groups(where)
        if what in ("alloc", "free"):
            groups = groups + [self.totals]
        for g in groups:
            if what == "alloc":
                g.add(size, objects, time)
            elif what == "moved":
                g.add(size, objects, time)
            elif what == "free":
                g.remove(size, objects, temporary=temporary)
            else:
                g.remove(size, objects, uncount=True)
