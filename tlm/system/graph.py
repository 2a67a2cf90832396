"""A system as data: chips and directed links, and the route of a transfer over them.

A :class:`System` is a graph whose vertices are chips (numbered ``0..chips-1`` first) and
switches, and whose edges are directed :class:`Link` s, each with ``bandwidth_Bps`` and
``latency_s``. It is built from a system preset (:func:`load_system`): one node (a server or an
UltraServer) whose chips sit on a torus or hang off a switch, or ``N`` such nodes joined by EFA.

Chip numbering: chip ``c`` is local chip ``c % chips_per_node`` of node ``c // chips_per_node``;
on a torus the local number is :class:`tlm.link.topology.Torus`'s node number (x fastest).

Routes: inside a torus node, dimension-order routing (:func:`tlm.link.routing.route`, the
function the RTL router computes); inside a switched node, chip -> switch -> chip; between nodes,
chip -> its node's EFA leaf -> spine -> the other leaf -> chip (a NIC per chip; the leaf's
uplink carries the node's NIC bandwidth divided by the fabric's oversubscription).

Examples
--------
>>> s = load_system("trn2-server")
>>> s.chips, s.nodes, len(s.links)               # 16 chips x 4 directed torus links
(16, 1, 64)
>>> [s.links[i].name for i in s.path(0, 5)]      # (0,0) -> (1,1): x first, then y
['chip 0 x+', 'chip 1 y+']
>>> two = load_system("2xtrn2-server")
>>> two.chips, [two.links[i].name for i in two.path(0, 16)]
(32, ['chip 0 efa up', 'leaf 0 up', 'leaf 1 down', 'chip 16 efa down'])
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

import numpy as np

from ..datafile import parse_data_file, read_text
from ..link.routing import route
from ..link.topology import Torus
from .schema import SystemFile, flit_intervals

__all__ = [
    "SYSTEMS",
    "KINDS",
    "FlitLinks",
    "Link",
    "System",
    "SystemSpecError",
    "load_system",
    "system_names",
]

#: System presets shipped with the package (``tlm/system/NAME.toml``).
SYSTEMS = (
    "trn1-server",
    "trn2-server",
    "trn2-ultraserver",
    "trn3-ultraserver",
    "trn3-ultraserver-gen2",
)
#: Short names resolved with the chip preset: ``server`` on ``trn2`` is ``trn2-server``.
KINDS = ("server", "ultraserver", "ultraserver-gen2")
#: Most nodes an ``NxSYSTEM`` may join.
MAX_NODES = 1024


class SystemSpecError(ValueError):
    """A system name or file that does not validate."""


@dataclass(frozen=True)
class Link:
    """One directed link: from vertex ``src`` to vertex ``dst``."""

    src: int
    dst: int
    bandwidth_Bps: float
    latency_s: float
    name: str


@dataclass(frozen=True)
class FlitLinks:
    """How a torus node's links move flits (the preset's ``[flit]``), for the flit engine.

    Attributes
    ----------
    bytes_per_flit : int
        Data bytes of one flit.
    clock_hz : float
        Link clock: a full-rate link carries one flit per cycle.
    max_packet_flits : int
        Longest packet, head included.
    interval : tuple of int
        Cycles per flit on the links of each torus dimension (1: full rate; the UltraServer's z
        links: 2), so that ``bytes_per_flit x clock_hz / interval[d]`` is dimension ``d``'s
        ``bandwidth_Bps``.
    """

    bytes_per_flit: int
    clock_hz: float
    max_packet_flits: int
    interval: tuple[int, ...]


@dataclass(frozen=True)
class System:
    """Chips and directed links, with the figures they came from.

    Attributes
    ----------
    name : str
        ``trn2-server``, or ``4xtrn2-server`` for four of them joined by EFA.
    chip : str
        The chip preset of every chip (``trn2``).
    nodes, chips_per_node : int
        Servers (or UltraServers) and chips in each.
    torus : Torus or None
        One node's torus, or None for a switched node.
    links : tuple of Link
    vertices : tuple of str
        Vertex names: chips first (``chip 3``), then switches.
    step_fixed_s : float
        Fixed cost of each step of a collective schedule (``[collective]`` of the preset).
    file : SystemFile
        The validated preset, every figure with its source.
    failed : tuple of (int, int)
        Chip pairs whose links have failed (:meth:`without`): routes that would cross them
        take the shortest detour over the links left.
    flit : FlitLinks or None
        The torus links in flits (``[flit]``), or None where the preset has no such table.
    members : tuple of int or None
        For a sub-system (:meth:`subset`): the chip of ``parent`` that each of its chips is.
    parent : System or None
        The system a sub-system was taken from (its links and routes are the parent's).

    Equal and hashable by content (what it is loaded from does not matter).
    """

    name: str
    chip: str
    description: str
    nodes: int
    chips_per_node: int
    torus: Torus | None
    links: tuple[Link, ...]
    vertices: tuple[str, ...]
    step_fixed_s: float
    file: SystemFile
    flit: FlitLinks | None
    _ports: dict = field(repr=False, compare=False)
    failed: tuple[tuple[int, int], ...] = ()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    members: tuple[int, ...] | None = None
    parent: System | None = field(default=None, repr=False, compare=False)

    @property
    def chips(self) -> int:
        return self.nodes * self.chips_per_node

    @cached_property
    def bandwidth_Bps(self) -> np.ndarray:
        """Bandwidth of every link, by link index."""
        return np.array([link.bandwidth_Bps for link in self.links])

    @cached_property
    def latency_s(self) -> np.ndarray:
        """Latency of every link, by link index."""
        return np.array([link.latency_s for link in self.links])

    def node_of(self, chip: int) -> int:
        """The node (server or UltraServer) a chip is in."""
        return chip // self.chips_per_node

    def _check_chip(self, chip):
        if isinstance(chip, bool) or not isinstance(chip, (int, np.integer)):
            raise SystemSpecError(f"chip must be an integer in 0..{self.chips - 1}, not {chip!r}")
        if not 0 <= chip < self.chips:
            raise SystemSpecError(f"chip must be an integer in 0..{self.chips - 1}, not {chip!r}")

    def path(self, src: int, dst: int) -> tuple[int, ...]:
        """The links a transfer from chip ``src`` to chip ``dst`` crosses, in order (empty from
        a chip to itself)."""
        self._check_chip(src)
        self._check_chip(dst)
        return self._path(int(src), int(dst))

    def _path(self, src: int, dst: int) -> tuple[int, ...]:
        key = (src, dst)
        cache = self._cache.setdefault("paths", {})
        if key in cache:
            return cache[key]
        if self.parent is not None:  # the parent's route, over the same links
            out = cache[key] = self.parent._path(self.members[src], self.members[dst])
            return out
        ports, per = self._ports, self.chips_per_node
        na, nb = divmod(src, per), divmod(dst, per)
        if src == dst:
            out = ()
        elif na[0] != nb[0]:
            out = (
                ports[("nic up", src)],
                ports[("leaf up", na[0])],
                ports[("leaf down", nb[0])],
                ports[("nic down", dst)],
            )
        elif self.torus is None:
            sw = self.file.switch
            group = int(sw.leaf_chips.value) if sw.two_level else per
            ga, gb = na[1] // group, nb[1] // group
            if ga == gb:
                out = (ports[("switch up", src)], ports[("switch down", dst)])
            else:  # through one spine, chosen by the destination
                k = nb[1] % int(sw.spines.value)
                out = (
                    ports[("switch up", src)],
                    ports[("tier up", na[0], ga, k)],
                    ports[("tier down", na[0], gb, k)],
                    ports[("switch down", dst)],
                )
        else:
            base = na[0] * per
            t = self.torus
            here, goal = t.coord(na[1]), t.coord(nb[1])
            hops = []
            for port in self._torus_moves(here, goal):
                link = ports.get(("torus", base + t.node(here), port))
                if link is None:  # a failed link: the shortest way round it
                    hops = self._detour(src, dst)
                    self._cache.setdefault("detours", set()).add(key)
                    break
                hops.append(link)
                here = t.neighbour(here, port)
            out = tuple(hops)
        cache[key] = out
        return out

    def _torus_moves(self, here: tuple, goal: tuple) -> list:
        """The hops :func:`tlm.link.routing.route` takes from coordinate ``here`` to
        ``goal`` of the node's torus, as the link ports it leaves by: its port at each
        router depends on the coordinates only through their differences around each ring,
        so the hops are worked out once per displacement (kept) and every pair of chips that
        far apart takes them."""
        t = self.torus
        shift = tuple((g - h) % k for g, h, k in zip(goal, here, t.shape, strict=True))
        moves = self._cache.setdefault("torus moves", {})
        hit = moves.get(shift)
        if hit is None:
            hit, at, origin = [], tuple(0 for _ in t.shape), tuple(0 for _ in t.shape)
            while True:
                port, _vc = route(t.shape, at, origin, shift)
                if port == 0:
                    break
                hit.append(port)
                at = t.neighbour(at, port)
            moves[shift] = hit
        return hit

    def _detour(self, src: int, dst: int) -> list[int]:
        """The fewest links from chip ``src`` to ``dst`` over the links left (breadth first,
        links in their index order: the same route every time)."""
        out_links = self._cache.get("out_links")
        if out_links is None:
            out_links = [[] for _ in self.vertices]
            for i, link in enumerate(self.links):
                out_links[link.src].append(i)
            self._cache["out_links"] = out_links
        came = {src: None}
        queue = deque([src])
        while queue and dst not in came:
            v = queue.popleft()
            for i in out_links[v]:
                w = self.links[i].dst
                if w not in came:
                    came[w] = i
                    queue.append(w)
        if dst not in came:
            raise SystemSpecError(
                f"fail_link must be links whose loss leaves a route between every two chips, not "
                f"links that cut chip {dst} off from chip {src}"
            )
        hops = []
        while came[dst] is not None:
            hops.append(came[dst])
            dst = self.links[came[dst]].src
        return hops[::-1]

    def detoured(self, src: int, dst: int) -> bool:
        """Whether the route from chip ``src`` to ``dst`` goes round a failed link."""
        self.path(src, dst)
        if self.parent is not None:
            return self.parent.detoured(self.members[int(src)], self.members[int(dst)])
        return (int(src), int(dst)) in self._cache.get("detours", ())

    def without(self, pairs) -> System:
        """This system with the links between each pair of chips removed, both directions.

        Parameters
        ----------
        pairs : iterable of (int, int)
            Chips joined by a link (torus neighbours).

        Examples
        --------
        >>> s = load_system("trn2-server").without([(0, 1)])
        >>> s.name, len(s.links), [s.links[i].name for i in s.path(0, 1)]  # the long way round
        ('trn2-server without 0-1', 62, ['chip 0 x-', 'chip 3 x-', 'chip 2 x-'])
        >>> s.detoured(0, 1), s.detoured(0, 4)
        (True, False)

        Raises
        ------
        SystemSpecError
            For a pair that is not two chips joined by a link.
        """
        if self.parent is not None:  # fail the parent's links, then take the same chips
            for pair in pairs:
                for c in pair:
                    self._check_chip(c)
            moved = [(self.members[a], self.members[b]) for a, b in pairs]
            return self.parent.without(moved).subset(self.members)
        wanted = []
        for pair in pairs:
            a, b = pair
            self._check_chip(a)
            self._check_chip(b)
            wanted.append((min(a, b), max(a, b)))
        wanted = sorted(set(wanted))
        gone = set()
        for a, b in wanted:
            found = [i for i, ln in enumerate(self.links) if {ln.src, ln.dst} == {a, b}]
            if not found and self.torus is None:
                raise SystemSpecError(
                    f"fail_link must be two torus neighbours, and {self.name}'s chips meet at a "
                    f"switch (no link joins two chips), not {a}-{b}"
                )
            if not found:
                raise SystemSpecError(
                    f"fail_link must be two chips joined by a link (torus neighbours, e.g. "
                    f"0-1), not {a}-{b}"
                )
            gone.update(found)
        keep = [i for i in range(len(self.links)) if i not in gone]
        index = {old: new for new, old in enumerate(keep)}
        failed = tuple(sorted(set(self.failed) | set(wanted)))
        return dataclasses.replace(
            self,
            name=f"{self.name.split(' without ')[0]} without {_pairs_text(failed)}",
            links=tuple(self.links[i] for i in keep),
            _ports={k: index[v] for k, v in self._ports.items() if v in index},
            failed=failed,
            _cache={},
        )

    def shift(self, chip: int, frm: int, to: int) -> int:
        """Where ``chip`` goes under the symmetry of the system that takes chip ``frm`` to chip
        ``to``: torus coordinates (and node numbers) moved by the difference, or switch ports
        rotated. (Failed links are not symmetric: routes are still computed on the system.)

        Examples
        --------
        >>> s = load_system("trn2-server")                 # chip = x + 4 y
        >>> [s.shift(c, 0, 5) for c in (0, 1, 3, 15)]      # one step in x and in y
        [5, 6, 4, 0]
        """
        for c in (chip, frm, to):
            self._check_chip(c)
        per = self.chips_per_node
        (n, c), (nf, cf), (nt, ct) = divmod(chip, per), divmod(frm, per), divmod(to, per)
        node = (n + nt - nf) % self.nodes
        if self.torus is None:
            return node * per + (c + ct - cf) % per
        t = self.torus
        moved = tuple(
            (a + z - y) % k
            for a, y, z, k in zip(t.coord(c), t.coord(cf), t.coord(ct), t.shape, strict=True)
        )
        return node * per + t.node(moved)

    def subset(self, chips) -> System:
        """The sub-system of a group of this system's chips: the group's own chips, numbered
        as a system of their own, whose transfers take this system's routes over all of its
        links - through chips outside the group where the route goes that way.

        What the algorithms see (:mod:`tlm.collectives`): ``nodes`` is the number of nodes the
        group occupies and ``chips_per_node`` its chips in each (the same in every one);
        where, on a torus, each node's chips form a grid - the same coordinates in every node,
        every combination of them present (a row, a plane, every other chip of a ring) - the
        sub-system's ``torus`` is that grid as a torus of its own (the dimensions with more
        than one coordinate, in order, x first; a ring of 2 coordinates is a ring of 2), so
        rings snake over it and recursive halving/doubling and KangaRing lay their ranks on
        it; otherwise ``torus`` is None and the chips are in their own order. A logical
        neighbour may be several links away (every other chip of a ring: two hops, through
        the chip between). Chip ``i`` of the sub-system is chip ``members[i]`` of this one:
        node by node, and in a node by grid position (x fastest), whatever order ``chips``
        came in. The links, their order and their names are this system's (names count
        this system's chips); the vertices are the group's chips, then every other vertex
        of this system (``parent chip 5``, ``parent leaf 0``). A failed link of this system
        stays failed (routes detour as here); ``failed`` lists those between two members.

        Parameters
        ----------
        chips : iterable of int
            Distinct chips of this system, at least one; the same number in every node
            they occupy.

        Examples
        --------
        >>> us = load_system("trn2-ultraserver")               # 4x4x4, chip = x + 4 y + 16 z
        >>> row = us.subset(range(4))                          # one x ring
        >>> row.chips, row.torus.shape, [row.links[i].name for i in row.path(3, 0)]
        (4, (4,), ['chip 3 x+'])
        >>> z = us.subset([0, 16, 32, 48])                     # a z ring, between servers
        >>> z.torus.shape, z.members, [z.links[i].name for i in z.path(0, 1)]
        ((4,), (0, 16, 32, 48), ['chip 0 z+'])
        >>> half = us.subset([0, 2])                           # every other chip of x
        >>> [half.links[i].name for i in half.path(0, 1)]      # through chip 1
        ['chip 0 x+', 'chip 1 x+']
        >>> us.subset(range(16)).torus.shape, us.subset(range(0, 64, 4)).torus.shape
        ((4, 4), (4, 4))

        Raises
        ------
        SystemSpecError
            For chips that are not distinct chips of this system, or not the same number in
            every node they occupy.
        """
        try:
            given = list(chips)
        except TypeError:
            raise SystemSpecError(
                f"chips must be an iterable of distinct chips of {self.name}, not {chips!r}"
            ) from None
        for c in given:
            self._check_chip(c)
        given = [int(c) for c in given]
        if not given or len(set(given)) != len(given):
            raise SystemSpecError(
                f"chips must be one or more distinct chips of {self.name}, not {given!r}"
            )
        if self.parent is not None:  # a subset of a subset: of the parent's chips
            return self.parent.subset(self.members[c] for c in given)
        per = self.chips_per_node
        by_node: dict[int, list[int]] = {}
        for c in sorted(given):
            by_node.setdefault(c // per, []).append(c % per)
        counts = {n: len(v) for n, v in by_node.items()}
        if len(set(counts.values())) != 1:
            raise SystemSpecError(
                f"chips must be the same number in every node they occupy, not {counts} "
                f"(chips per node of {self.name})"
            )
        m = len(given) // len(by_node)
        torus, order = None, {n: locals_ for n, locals_ in by_node.items()}
        if self.torus is not None:
            grids = [self._grid(locals_) for locals_ in by_node.values()]
            if all(g is not None for g in grids) and len({g[0] for g in grids}) == 1:
                shape = grids[0][0]
                torus = Torus(shape) if shape else None
                order = {n: g[1] for n, g in zip(by_node, grids, strict=True)}
        members = tuple(n * per + local for n in sorted(by_node) for local in order[n])
        index = {c: i for i, c in enumerate(members)}
        others = [v for v in range(len(self.vertices)) if v not in index]
        renumber = {**index, **{v: len(members) + j for j, v in enumerate(others)}}
        links = tuple(
            Link(renumber[ln.src], renumber[ln.dst], ln.bandwidth_Bps, ln.latency_s, ln.name)
            for ln in self.links
        )
        vertices = tuple(f"chip {i}" for i in range(len(members))) + tuple(
            f"parent {self.vertices[v]}" for v in others
        )
        failed = tuple(
            sorted(
                (min(index[a], index[b]), max(index[a], index[b]))
                for a, b in self.failed
                if a in index and b in index
            )
        )
        return dataclasses.replace(
            self,
            name=f"{self.name} chips {_chips_text(members)}",
            nodes=len(by_node),
            chips_per_node=m,
            torus=torus,
            links=links,
            vertices=vertices,
            flit=None,  # the flit engine runs whole tori
            _ports={},
            failed=failed,
            _cache={},
            members=members,
            parent=self,
        )

    def _grid(self, locals_):
        """The grid a node's chips form on the torus: (shape, chips in grid order, x fastest),
        or None when they are not every combination of their coordinates."""
        t = self.torus
        coords = [t.coord(c) for c in locals_]
        values = [sorted({c[d] for c in coords}) for d in range(t.dims)]
        if len(coords) != int(np.prod([len(v) for v in values])):
            return None
        dims = [d for d in range(t.dims) if len(values[d]) > 1]
        shape = tuple(len(values[d]) for d in dims)
        key = [[values[d].index(c[d]) for d in dims] for c in coords]
        grid = Torus(shape) if shape else None
        rank = [grid.node(tuple(k)) if grid else 0 for k in key]
        return shape, [c for _, c in sorted(zip(rank, locals_, strict=True))]

    def __hash__(self) -> int:
        known = self.__dict__.get("_hash")
        if known is None:  # worked out once: the compared fields never change
            known = hash(
                tuple(
                    getattr(self, f.name)
                    for f in dataclasses.fields(self)
                    if f.compare and f.name != "file"
                )
                + (self.file.model_dump_json(),)
            )
            object.__setattr__(self, "_hash", known)
        return known

    def __getstate__(self) -> dict:  # the hash of str fields differs between processes
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def hops(self, src: int, dst: int) -> int:
        return len(self.path(src, dst))

    def cached(self, key, make):
        """``make()``, computed once per system (schedules and their routes are kept here)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def _one_node(data: SystemFile, nodes: int, name: str) -> System:
    links: list[Link] = []
    ports: dict = {}

    def add(key, src, dst, bw, lat, label):
        ports[key] = len(links)
        links.append(Link(src, dst, float(bw), float(lat), label))

    if data.torus is not None:
        torus = Torus(tuple(data.torus.shape.value))
        per = torus.nodes
    else:
        torus = None
        per = int(data.switch.chips.value)
    chips = nodes * per
    vertices = [f"chip {c}" for c in range(chips)]
    for n in range(nodes):
        base = n * per
        if torus is not None:
            for local, port, nxt, _facing in torus.links():
                dim = data.torus.dimension[(port - 1) // 2]
                label = f"chip {base + local} " + "xyzw"[(port - 1) // 2] + "+-"[(port - 1) % 2]
                add(
                    ("torus", base + local, port),
                    base + local,
                    base + nxt,
                    dim.bandwidth_Bps.value,
                    dim.latency_s.value,
                    label,
                )
        else:
            sw = data.switch
            group = int(sw.leaf_chips.value) if sw.two_level else per
            first = len(vertices)
            for g in range(per // group):
                vertices.append(f"switch {n}.{g}" if sw.two_level else f"switch {n}")
            bw, lat = sw.port_bandwidth_Bps.value, sw.latency_s.value
            for c in range(base, base + per):
                switch = first + (c - base) // group
                add(("switch up", c), c, switch, bw, lat, f"chip {c} up")
                add(("switch down", c), switch, c, bw, lat, f"chip {c} down")
            if sw.two_level:
                spines = len(vertices)
                count = int(sw.spines.value)
                vertices += [f"spine switch {n}.{k}" for k in range(count)]
                up, up_lat = sw.uplink_bandwidth_Bps.value, sw.uplink_latency_s.value
                for g in range(per // group):
                    leaf = first + g
                    for k in range(count):
                        label = f"switch {n}.{g} to spine {k}"
                        add(("tier up", n, g, k), leaf, spines + k, up, up_lat, label + " up")
                        add(("tier down", n, g, k), spines + k, leaf, up, up_lat, label + " down")
    if nodes > 1:
        efa = data.efa
        spine = len(vertices) + nodes
        leaves = list(range(len(vertices), spine))
        vertices += [f"leaf {n}" for n in range(nodes)] + ["spine"]
        nic, nic_lat = efa.nic_bandwidth_Bps.value, efa.nic_latency_s.value
        uplink = per * nic / efa.oversubscription.value
        for c in range(chips):
            leaf = leaves[c // per]
            add(("nic up", c), c, leaf, nic, nic_lat, f"chip {c} efa up")
            add(("nic down", c), leaf, c, nic, nic_lat, f"chip {c} efa down")
        for n, leaf in enumerate(leaves):
            lat = efa.spine_latency_s.value
            add(("leaf up", n), leaf, spine, uplink, lat, f"leaf {n} up")
            add(("leaf down", n), spine, leaf, uplink, lat, f"leaf {n} down")
    return System(
        name=name,
        chip=data.chip,
        description=data.description,
        nodes=nodes,
        chips_per_node=per,
        torus=torus,
        links=tuple(links),
        vertices=tuple(vertices),
        step_fixed_s=float(data.collective.step_fixed_s.value),
        file=data,
        flit=None
        if data.flit is None
        else FlitLinks(
            bytes_per_flit=int(data.flit.bytes_per_flit.value),
            clock_hz=float(data.flit.clock_hz.value),
            max_packet_flits=int(data.flit.max_packet_flits.value),
            interval=flit_intervals(data.torus, data.flit),
        ),
        _ports=ports,
    )


def _chips_text(chips) -> str:
    """``0..48 step 16`` for an arithmetic run of chips, else the chips listed."""
    if len(chips) > 2:
        step = chips[1] - chips[0]
        if all(b - a == step for a, b in zip(chips, chips[1:], strict=False)):
            return f"{chips[0]}..{chips[-1]}" + (f" step {step}" if step != 1 else "")
    return ",".join(map(str, chips))


def _pairs_text(pairs) -> str:
    return ", ".join(f"{a}-{b}" for a, b in pairs)


def system_names() -> str:
    """What :func:`load_system` accepts, in words."""
    return (
        f"one of {', '.join(KINDS)} (of the chip preset), {', '.join(SYSTEMS)}, a system file "
        f"ending in .toml, or NxSYSTEM joining N of one by EFA (N in 2..{MAX_NODES})"
    )


def _read(spec: str) -> SystemFile:
    if spec.endswith(".toml"):
        path = Path(spec)
        text = read_text(path, SystemSpecError, spec)
    else:
        path = f"tlm/system/{spec}.toml"
        text = resources.files(__package__).joinpath(f"{spec}.toml").read_text()
    return parse_data_file(text, path, SystemFile, SystemSpecError)


def load_system(spec: str, chip: str | None = None) -> System:
    """Build a system from a preset name or file, optionally N of them joined by EFA.

    Parameters
    ----------
    spec : str
        ``server`` or ``ultraserver`` (resolved with ``chip``), a preset of :data:`SYSTEMS`, a
        system file path ending in ``.toml``, or ``NxSPEC`` (``4xserver``) for ``N`` nodes.
    chip : str, optional
        The chip preset that ``server``/``ultraserver`` refer to (default ``trn2``); a named
        preset or file built of other chips is refused when given.

    Raises
    ------
    SystemSpecError
        Naming the spec and what is allowed.
    """
    if not isinstance(spec, str) or not spec:
        raise SystemSpecError(f"system must be {system_names()}, not {spec!r}")
    nodes, base = 1, spec
    joined = re.fullmatch(r"(\d+)x(.+)", spec)
    if joined and not Path(spec).is_file():
        nodes, base = int(joined[1]), joined[2]
        if not 2 <= nodes <= MAX_NODES:
            raise SystemSpecError(f"system must be {system_names()}, not {spec!r}")
    name = base
    if base in KINDS:
        name = f"{chip or 'trn2'}-{base}"
        if name not in SYSTEMS:
            kinds = [k for k in KINDS if f"{chip}-{k}" in SYSTEMS]
            raise SystemSpecError(
                f"system must be one of {', '.join(kinds)} for chip {chip} (the systems built "
                f"of {chip} chips), not {spec!r}"
            )
    elif base not in SYSTEMS and not base.endswith(".toml"):
        raise SystemSpecError(f"system must be {system_names()}, not {spec!r}")
    data = _read(name)
    if chip is not None and data.chip != chip:
        raise SystemSpecError(
            f"system must be a system of {chip} chips (the chip preset), not {spec!r} "
            f"(of {data.chip} chips)"
        )
    full = data.name if nodes == 1 else f"{nodes}x{data.name}"
    return _one_node(data, nodes, full)
