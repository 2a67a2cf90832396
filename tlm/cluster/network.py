"""How long a parallel group's collective takes on a cluster: the scale-up domain's real
sub-topology, the scale-out fabric as a folded Clos, and sites joined by slower links.

The training model places the parallel dimensions on chips in Megatron's order (tp innermost,
then cp, ep, dp, pp outermost), so a dimension's group is ``group`` chips at chip-index
``stride`` apart, and every group of a dimension runs its collective at the same time.
:class:`Network` answers, vectorised over arrays of ``(group, stride, nbytes)``: inside a node
with the analytic collective engine on the group's sub-system, every group of the node run
together (a switched node in closed form); across nodes hierarchically - in-node
reduce-scatter, one lane per member over the NICs (ring, recursive halving/doubling or direct
sends on the Clos, sharing leaf uplinks and site links with the chips that cross them at once),
in-node all-gather; pipeline sends by :meth:`Network.p2p_s`. Each ``(op, group, stride)`` is
worked out once and kept. Figures come from the hardware file and, for Trainium, its system
preset and its chip preset's collective runtime (each chip's DMA queues at one rank's rate,
the per-step sync: :func:`_node_system`); the Clos from
:data:`tlm.cluster.cost.DEFAULT_FABRIC`. The model, its sharing rules and what is ASSUMED:
docs/cluster.md.

Examples
--------
>>> import numpy as np
>>> from tlm.hardware import load_hardware
>>> net = Network.for_hardware(load_hardware("trn2"))
>>> net.chips_per_node
64
>>> t = net.collective_s("all_reduce", group=[4, 16, 64, 4], stride=[1, 1, 1, 16],
...                      nbytes=64 << 20)
>>> np.round(t * 1e3, 3).tolist()    # ms: x ring, 4x4 plane, 4x4x4 torus, z ring of chips
[0.899, 1.124, 1.182, 0.402]
>>> net.algorithm("all_reduce", [4, 16, 64, 4], [1, 1, 1, 16], 64 << 20).tolist()
['mesh', 'mesh', 'mesh', 'rings']
>>> # inner groups: one rank's DMA queues (112 GB/s a chip) bind before the links, every
>>> # algorithm moves the same bytes through them and the fewest steps win; the z ring is an
>>> # outer dimension (its buffer split over the chip's 4 ranks' queues): its links decide
>>> net.tier([8, 128, 2], [1, 1, 64]).tolist()
['scale-up', 'hierarchical', 'scale-out']
>>> round(float(net.p2p_s(16 << 20, 64)) * 1e3, 3)      # a pipeline send over EFA
0.687
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from ..collectives import ALGORITHMS, Analytic, build, unfit
from ..collectives.analytic import is_chain, together_totals
from ..collectives.groups import run_together
from ..collectives.schedule import Schedule, Step, Transfer
from ..elementwise import ceil, maximum, minimum
from ..hardware import Hardware
from ..system import System, load_system
from .cost import DEFAULT_FABRIC, Fabric, clos_tiers

__all__ = ["OPS", "TIERS", "Breakdown", "Network", "run_together"]

#: The collectives a parallel group runs (``nbytes`` as :mod:`tlm.collectives` defines it:
#: the buffer per rank; a reduce-scatter's input and an all-gather's output, whole).
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
#: Where a group's collective runs: inside a node; hierarchical (several members in each of
#: several nodes); across nodes only (one member per node).
TIERS = ("scale-up", "hierarchical", "scale-out")


@dataclass(frozen=True)
class Breakdown:
    """A collective's time and how it was got, per row.

    Attributes
    ----------
    time_s : ndarray
        The collective's time, seconds.
    scale_up_s, scale_out_s : ndarray
        The parts inside the nodes and across them, seconds (for an all-to-all they overlap
        and ``time_s`` is the larger).
    tier : ndarray of str
        One of :data:`TIERS`.
    algorithm : ndarray of str
        The algorithm of each part, in order, joined by ``/``: ``rdh`` inside a node,
        ``mesh/ring/mesh`` hierarchical (reduce-scatter in the node, the cross-node ring,
        all-gather in the node), ``ring`` across nodes alone; ``-`` for a group of one.
    """

    time_s: np.ndarray
    scale_up_s: np.ndarray
    scale_out_s: np.ndarray
    tier: np.ndarray
    algorithm: np.ndarray


@dataclass(frozen=True)
class _Phase:
    """One part of a collective: per algorithm, time ``A + K x chunk`` with ``chunk`` the
    bytes of ``ceil(count x factor / C)`` elements."""

    names: tuple[str, ...]
    A: tuple[float, ...]
    K: tuple[float, ...]
    C: tuple[float, ...]
    factor: float
    out: bool  # across nodes (else inside a node)


@dataclass(frozen=True)
class _Plan:
    tier: int
    phases: tuple[_Phase, ...]
    overlap: bool  # the phases run at once (the slower decides) rather than one after another


#: The sort order of one row.
_ONE_ROW = np.zeros(1, dtype=np.intp)
#: Largest group or stride (rows are keyed by both packed in one 64-bit integer).
_MAX = (1 << 31) - 1


#: The scalars a row's group, stride or size may be (one row: no arrays built).
_SCALARS = (int, float, np.integer, np.floating)


def _is_scalar(x) -> bool:
    t = type(x)
    if t is int or t is float or t is np.float64 or t is np.int64:
        return True  # (isinstance of numpy's abstract types is slow: the usual ones first)
    return isinstance(x, _SCALARS) and not isinstance(x, (bool, np.bool_))


def _integers(name, value, low=1):
    """``value`` as int64 (an int for a scalar) in ``low..`` :data:`_MAX`, else a ValueError."""
    if _is_scalar(value) and low <= value <= _MAX and value == math.floor(value):
        return int(value)
    a = np.asarray(value)
    allowed = f"an integer in {low}..{_MAX} (or an array of them)"
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or a.dtype.kind == "f"):
        raise ValueError(f"{name} must be {allowed}, not {value!r}")
    bad = ~((a >= low) & (a <= _MAX))
    if a.dtype.kind == "f":
        bad |= a != np.floor(a)
    if np.any(bad):
        first = a[bad].ravel()[0].item() if a.ndim else a.item()
        raise ValueError(f"{name} must be {allowed}, not {first!r}")
    return a.astype(np.int64)


def _sizes(value):
    """Bytes (a float for a scalar, else float64) >= 0 and finite, else a ValueError."""
    if _is_scalar(value) and 0 <= value < math.inf:
        return float(value)
    b = np.asarray(value, dtype=float)
    if np.any(~(b >= 0) | ~np.isfinite(b)):
        bad = b[~(b >= 0) | ~np.isfinite(b)].ravel()[0].item()
        raise ValueError(f"nbytes must be a number >= 0 (or an array of them), not {bad!r}")
    return b


def _unique_pairs(a: np.ndarray, b: np.ndarray):
    """The distinct pairs ``(a, b)`` (non-negative integers below 2^31) and, per row, the
    index of its pair (one 1-D unique: much faster than ``np.unique(axis=...)``)."""
    keys, inverse = np.unique((a << 31) | b, return_inverse=True)
    return np.stack([keys >> 31, keys & ((1 << 31) - 1)], axis=1), inverse.ravel()


def _translates(subs: list) -> list:
    """The groups' sub-systems that are translates of the first (a group that does not tile
    the node is left out of the groups run together)."""
    first = subs[0]
    return [sub for sub in subs if sub.torus == first.torus and sub.nodes == first.nodes]


def _send_s(forms, nbytes):
    """A send's time over the slowest of its forms ``(A, K)``: ``A + K x nbytes``."""
    t = None
    for a, k in forms:
        t = a + k * nbytes if t is None else maximum(t, a + k * nbytes)
    return t


def _power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


class Network:
    """The communication model of a cluster of one kind of hardware (:meth:`for_hardware`).

    Attributes
    ----------
    name : str
    chips_per_node : int
        Chips of one scale-up domain (a node): the trn2 UltraServer's 64, a DGX's 8.
    node : System or None
        One node as a system (Trainium), or None for a switched node given by its figures.
    oversubscription : float
        At the Clos leaves.
    leaf_chips : int
        Chips under one leaf switch.
    sites, site_chips : int
        Sites and chips in each (``site_chips`` 0 with one site).
    """

    def __init__(
        self,
        *,
        name: str,
        chips_per_node: int,
        node: System | None,
        switch_Bps: float | None,
        switch_step_s: float | None,
        nic_Bps: float,
        out_step_s: float,
        out_tier_s: float,
        fabric: Fabric,
        oversubscription: float,
        sites: int,
        site_chips: int,
        site_bandwidth_Bps: float | None,
        site_latency_s: float,
        chips: int | None,
    ):
        self.name = name
        self.chips_per_node = int(chips_per_node)
        self.node = node
        self.switch_Bps, self.switch_step_s = switch_Bps, switch_step_s
        self.nic_Bps = float(nic_Bps)
        self.out_step_s, self.out_tier_s = float(out_step_s), float(out_tier_s)
        self.fabric = fabric
        self.oversubscription = float(oversubscription)
        self.lanes = self.nic_Bps / fabric.port_Bps  # leaf ports per chip
        self.leaf_chips = max(1, int(fabric.radix // 2 / self.lanes))
        self.sites, self.site_chips = int(sites), int(site_chips)
        self.site_bandwidth_Bps = site_bandwidth_Bps
        self.site_latency_s = float(site_latency_s)
        self.chips = chips
        self._plans: dict = {}
        self._up: dict = {}
        self._schedules: dict = {}
        self._node_spec = None  # (system, chip preset) the node loads again from

    def __getstate__(self) -> dict:
        """A network pickles (to a Dask worker) with the closed forms it has
        worked out and, when it was built from a system preset, without its node's system
        and schedules: the node is loaded again from the preset on first use."""
        state = dict(self.__dict__)
        state["_schedules"] = {}
        state.pop("_split_node", None)
        if state.get("_node_spec") is not None:
            state.pop("node", None)  # (not loaded again since it was last pickled)
        return state

    def __getattr__(self, name):
        # only for attributes not set: the node a pickled network left behind
        spec = self.__dict__.get("_node_spec")
        if name == "node" and spec is not None:
            self.node = _node_system(*spec)
            return self.node
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @classmethod
    def for_hardware(
        cls,
        hw: Hardware,
        *,
        oversubscription=None,
        sites: int = 1,
        site_bandwidth_Bps=None,
        site_latency_s: float = 0.0,
        chips=None,
        fabric: Fabric = DEFAULT_FABRIC,
    ) -> Network:
        """The network of a cluster of ``hw``.

        Parameters
        ----------
        hw : Hardware
            A Trainium file names its system preset (the node, the EFA NIC, the latencies);
            a GPU file gives a switched scale-up group of ``scale_up_chips`` at
            ``scale_up_bandwidth_Bps`` (both directions: half each way) and a NIC per chip.
        oversubscription : float, optional
            At the Clos leaves (>= 1); default the system preset's ``efa.oversubscription``
            (Trainium) or ``fabric.oversubscription`` (both 1, ASSUMED).
        sites : int
            Data centres the job spans (>= 1); more than one needs ``chips`` and
            ``site_bandwidth_Bps``.
        site_bandwidth_Bps : float, optional
            Between two neighbouring sites, each way (bytes/s).
        site_latency_s : float
            Added to every step that crosses a site boundary (0: the fibre's delay left out;
            state it when it matters).
        chips : int, optional
            The job's chips (a multiple of ``sites`` x ``chips_per_node``); groups are checked
            to fit in it.
        fabric : tlm.cluster.cost.Fabric
            The Clos's switches (radix, port bandwidth); its oversubscription is the default.

        Raises
        ------
        ValueError
            Naming the argument, its value and what is allowed.
        """
        if not isinstance(hw, Hardware):
            raise ValueError(f"hw must be a tlm.hardware.Hardware, not {hw!r}")
        if not isinstance(fabric, Fabric):
            raise ValueError(f"fabric must be a tlm.cluster.cost.Fabric, not {fabric!r}")
        if hw.system is not None:
            node = _node_system(hw.system, hw.chip_preset)
            efa = load_system(hw.system, chip=hw.chip_preset).file.efa
            per = node.chips_per_node
            default_over = efa.oversubscription.value
            figures = dict(
                node=node,
                switch_Bps=None,
                switch_step_s=None,
                nic_Bps=efa.nic_bandwidth_Bps.value,
                # a message: the step's fixed cost and chip -> leaf -> chip; each tier above
                # the leaf adds a switch up and one down (the preset's spine latency)
                out_step_s=node.step_fixed_s + 2 * efa.nic_latency_s.value,
                out_tier_s=2 * efa.spine_latency_s.value,
            )
        else:
            missing = [
                key
                for key in ("scale_up_latency_s", "scale_out_latency_s")
                if getattr(hw, key) is None
            ]
            if missing:
                raise ValueError(
                    f"hw must give {' and '.join(missing)} ([scale_up]/[scale_out] latency_s "
                    f"in its file), and {hw.name} does not"
                )
            per = hw.scale_up_chips
            default_over = fabric.oversubscription
            figures = dict(
                node=None,
                switch_Bps=hw.scale_up_bandwidth_Bps / 2,
                switch_step_s=hw.scale_up_latency_s,
                nic_Bps=hw.scale_out_bandwidth_Bps,
                out_step_s=hw.scale_out_latency_s,
                out_tier_s=0.0,  # the file's latency covers the fabric
            )
        over = default_over if oversubscription is None else oversubscription
        if isinstance(over, bool) or not isinstance(over, (int, float)) or not over >= 1:
            raise ValueError(f"oversubscription must be a number >= 1, not {oversubscription!r}")
        if isinstance(sites, bool) or not isinstance(sites, (int, np.integer)) or sites < 1:
            raise ValueError(f"sites must be an integer >= 1, not {sites!r}")
        if chips is not None and (
            isinstance(chips, bool)
            or not isinstance(chips, (int, np.integer))
            or chips < 1
            or chips % (per * sites)
        ):
            raise ValueError(
                f"chips must be a positive multiple of sites x chips_per_node ({sites} x {per}), "
                f"not {chips!r}"
            )
        site_chips = 0
        if sites > 1:
            if chips is None:
                raise ValueError(f"chips must be given with sites > 1 (sites={sites}), not None")
            ok = isinstance(site_bandwidth_Bps, (int, float)) and not isinstance(
                site_bandwidth_Bps, bool
            )
            if not ok or not site_bandwidth_Bps > 0:
                raise ValueError(
                    f"site_bandwidth_Bps must be a positive number with sites > 1, not "
                    f"{site_bandwidth_Bps!r}"
                )
            site_chips = int(chips) // sites
        if (
            isinstance(site_latency_s, bool)
            or not isinstance(site_latency_s, (int, float))
            or not site_latency_s >= 0
        ):
            raise ValueError(f"site_latency_s must be a number >= 0, not {site_latency_s!r}")
        network = cls(
            name=hw.name,
            chips_per_node=per,
            fabric=fabric,
            oversubscription=float(over),
            sites=int(sites),
            site_chips=site_chips,
            site_bandwidth_Bps=None if sites == 1 else float(site_bandwidth_Bps),
            site_latency_s=float(site_latency_s),
            chips=None if chips is None else int(chips),
            **figures,
        )
        if hw.system is not None:
            network._node_spec = (hw.system, hw.chip_preset)
        return network

    # ---- inside a node -----------------------------------------------------------------

    def groups_in_node(self, group: int, stride: int) -> list[list[int]]:
        """The chips of every group of ``(group, stride)`` inside node 0 (each in rank order):
        chips ``o + stride x i`` for the offsets ``o`` of the groups that lie wholly in it."""
        per, span = self.chips_per_node, group * stride
        out = []
        for block in range(0, per - span + 1, span):
            for o in range(stride):
                out.append([block + o + stride * i for i in range(group)])
        return out

    def schedule(self, op: str, group: int, stride: int, algorithm: str):
        """The schedule the model times for ``op`` by ``algorithm`` on a Trainium node: the
        group's schedule on its sub-system, run by every group of the node at once; and the
        node's system it runs on (for the flow engine, :class:`tlm.collectives.flow.Flow`).

        Raises
        ------
        ValueError
            On a switched node (no system), for a group that does not fit in a node, or an
            algorithm that does not fit the group (saying why).
        """
        if self.node is None:
            raise ValueError(f"schedule needs a node system; {self.name}'s node is a switch")
        op = self._op(op)
        if group * stride > self.chips_per_node or group < 2:
            raise ValueError(
                f"group x stride must be in 2..{self.chips_per_node} (one node), "
                f"not {group} x {stride}"
            )
        key = (op, group, stride, algorithm)
        if key not in self._schedules:
            subs = self._group_systems(group, stride)
            first = subs[0]
            why = unfit(algorithm, op, first)
            if why is not None:
                raise ValueError(f"algorithm {algorithm} does not fit {first.name}: it {why}")
            one = build(algorithm, op, first)
            together = run_together(one, _translates(subs))
            self._schedules[key] = (together, self._node_at(stride))
        return self._schedules[key]

    def _node_at(self, stride: int):
        """The node a collective of groups at ``stride`` runs on. The innermost dimension
        (stride 1) spans the logical cores of each chip, each rank holding the whole buffer:
        the node, a chip's traffic at one rank's DMA rate. An outer dimension's buffer is
        split over a chip's ranks, each moving its share through its own queues: the node
        with each chip's queues at all its ranks' rate (``with_runtime(..., split=True)``) on the
        same chips."""
        spec = self.__dict__.get("_node_spec")
        if stride == 1 or spec is None:
            return self.node
        if self.__dict__.get("_split_node") is None:  # the same chips: their routes kept once
            from ..collectives.runtime import with_runtime
            from ..presets import load_preset

            chips = getattr(self.node, "chips_system", self.node)
            self._split_node = with_runtime(chips, load_preset(spec[1]), split=True)
        return self._split_node

    def _group_systems(self, group: int, stride: int) -> list[System]:
        """The sub-system of every group of ``(group, stride)`` in node 0 (kept)."""
        key = ("groups", group, stride)
        if key not in self._schedules:
            groups = self.groups_in_node(group, stride)
            node = self._node_at(stride)
            self._schedules[key] = [node.subset(members) for members in groups]
        return self._schedules[key]

    def _up_phase(self, op: str, group: int, stride: int, factor: float = 1.0) -> _Phase:
        """Per algorithm that fits, the closed form of ``op`` among ``group`` chips at
        ``stride`` inside one node (every group of the node at once)."""
        key = (op, group, stride)
        if key not in self._up:
            if self.node is None:
                rows = self._switch(op, group)
            else:
                rows = []
                subs = self._group_systems(group, stride)
                first = subs[0]
                same = _translates(subs)
                for algorithm in ALGORITHMS:
                    if unfit(algorithm, op, first) is not None:
                        continue
                    one = build(algorithm, op, first)
                    if not is_chain(one):  # every shipped algorithm is a chain of steps
                        raise NotImplementedError(f"{algorithm} {op}: steps that overlap")
                    # the analytic engine's figures of the groups' schedule run together
                    # (:meth:`schedule`), worked out without building it
                    fixed, per_unit = together_totals(one, same, self._node_at(stride))
                    rows.append((algorithm, fixed, per_unit, one.chunks))
            names, A, K, C = zip(*rows, strict=True)
            self._up[key] = (names, A, K, C)
        names, A, K, C = self._up[key]
        return _Phase(names, A, K, tuple(float(c) for c in C), factor, False)

    def _switch(self, op: str, group: int) -> list:
        """Ring, mesh, mesh1 and recursive halving/doubling on a non-blocking switch: each
        chip's own port at ``switch_Bps`` each way, ``switch_step_s`` per step (the analytic
        engine's figures on a switched system, in closed form)."""
        g, b, a = group, self.switch_Bps, self.switch_step_s
        phases = 2 if op == "all_reduce" else 1
        rows = []
        if op != "all_to_all":
            rows.append(("ring", phases * (g - 1) * a, phases * (g - 1) / b, g))
        rows.append(("mesh", phases * a, phases * (g - 1) / b, g))
        if op == "all_reduce":  # mesh1: the whole buffer to every other chip, one step
            rows.append(("mesh1", a, (g - 1) / b, 1))
        if op != "all_to_all" and _power_of_two(g):
            rows.append(("rdh", phases * int(math.log2(g)) * a, phases * (g - 1) / b, g))
        return rows

    # ---- across nodes ------------------------------------------------------------------

    def _share_Bps(self, distance: int, crosses: bool, block: int, up_Bps: float) -> float:
        """Bandwidth of one flow leaving an aligned block of ``block`` chips (a leaf, a
        site) whose way out carries ``up_Bps``, when every chip sends ``distance`` chips on:
        the last ``min(block, distance)`` chips of the block leave it (none if it does not
        ``crosses``)."""
        if not crosses:
            return math.inf
        return up_Bps / min(block, distance)

    def _flow_Bps(self, distance: int, crosses_leaf: bool, crosses_site: bool) -> float:
        leaf_up = self.leaf_chips * self.nic_Bps / self.oversubscription
        bw = min(self.nic_Bps, self._share_Bps(distance, crosses_leaf, self.leaf_chips, leaf_up))
        if self.sites > 1:
            site = self._share_Bps(distance, crosses_site, self.site_chips, self.site_bandwidth_Bps)
            bw = min(bw, site)
        return bw

    def _step_s(self, span: int, crosses_site: bool) -> float:
        """Fixed cost of one step across nodes: a message through the tiers ``span`` chips
        need (each above the leaf adds its switches), and the sites' latency if it crosses."""
        tiers = int(clos_tiers(max(span * self.lanes, 1.0), self.fabric.radix))
        extra = self.site_latency_s if crosses_site else 0.0
        return self.out_step_s + (tiers - 1) * self.out_tier_s + extra

    def _crosses_site(self, span: int) -> bool:
        return self.sites > 1 and span > self.site_chips

    def _out_phase(self, op: str, n: int, hop: int, members: int, group: int, stride: int):
        """The cross-node part among ``n`` nodes whose members (one per lane) are ``hop``
        chips apart; ``members`` lanes at once, each on ``1/members`` of the buffer."""
        span = n * hop
        leaf, site = span > self.leaf_chips, self._crosses_site(span)
        if op == "all_to_all":  # direct sends; the in-node blocks go on NeuronLink/NVLink
            q_leaf = min(group, max(1, self.leaf_chips // stride))
            k = (group - members) / self.nic_Bps
            if span > self.leaf_chips:
                k = max(k, (group - q_leaf) * self.oversubscription / self.nic_Bps)
            if site:
                q_site = min(group, max(1, self.site_chips // stride))
                k = max(k, self.site_chips * (group - q_site) / self.site_bandwidth_Bps)
            return _Phase(("mesh",), (self._step_s(span, site),), (k,), (group,), 1.0, True)
        phases = 2 if op == "all_reduce" else 1
        ring_bw = self._flow_Bps(hop, leaf, site)
        names = ["ring"]
        A = [phases * (n - 1) * self._step_s(span, site)]
        K = [phases * (n - 1) / ring_bw]
        if _power_of_two(n) and n > 1:  # halving: distances n/2, n/4, ... 1 nodes' hops
            a = k = 0.0
            for j in range(int(math.log2(n))):
                units = n >> (j + 1)
                d = units * hop
                cross_site = self.sites > 1 and 2 * d > self.site_chips
                a += self._step_s(2 * d, cross_site)
                k += units / self._flow_Bps(d, 2 * d > self.leaf_chips, cross_site)
            names.append("rdh")
            A.append(phases * a)
            K.append(phases * k)
        return _Phase(
            tuple(names), tuple(A), tuple(K), (float(n),) * len(names), 1.0 / members, True
        )

    # ---- plans -------------------------------------------------------------------------

    def _layout(self, group: int, stride: int) -> tuple[int, int]:
        """The group's tier (index of :data:`TIERS`, -1 for a group of one) and its members
        per node ``m``: ``chips_per_node / stride`` when the stride divides a node and the
        group fills its nodes evenly, else 1 (every member on its own NIC)."""
        per = self.chips_per_node
        if group == 1:
            return -1, 1
        if group * stride <= per:
            return 0, group
        m = per // stride if stride < per and per % stride == 0 else 1
        if group % m:
            m = 1
        return (1 if m > 1 else 2), m

    def _plan(self, op: str, group: int, stride: int) -> _Plan:
        key = (op, group, stride)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        tier, m = self._layout(group, stride)
        if tier < 0:
            plan = _Plan(-1, (), False)
        elif tier == 0:
            plan = _Plan(0, (self._up_phase(op, group, stride),), False)
        else:
            out = self._out_phase(op, group // m, stride * m, m, group, stride)
            if m == 1:
                plan = _Plan(2, (out,), False)
            elif op == "all_reduce":
                rs = self._up_phase("reduce_scatter", m, stride)
                ag = self._up_phase("all_gather", m, stride)
                plan = _Plan(1, (rs, out, ag), False)
            elif op == "reduce_scatter":
                plan = _Plan(1, (self._up_phase(op, m, stride), out), False)
            elif op == "all_gather":
                plan = _Plan(1, (out, self._up_phase(op, m, stride)), False)
            else:
                inner = self._up_phase(op, m, stride, factor=m / group)
                plan = _Plan(1, (inner, out), True)
        self._plans[key] = plan
        return plan

    # ---- evaluation --------------------------------------------------------------------

    def _op(self, op):
        if op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, not {op!r}")
        return op

    def _rows(self, group, stride, nbytes, dtype_bytes):
        """Checked rows: three arrays broadcast together, or three scalars (one row)."""
        g = _integers("group", group)
        s = _integers("stride", stride)
        b = _sizes(nbytes)
        if (
            isinstance(dtype_bytes, bool)
            or not isinstance(dtype_bytes, (int, np.integer))
            or dtype_bytes < 1
        ):
            raise ValueError(f"dtype_bytes must be an integer >= 1, not {dtype_bytes!r}")
        if not any(type(x) is np.ndarray for x in (g, s, b)):
            if self.chips is not None and g * s > self.chips:
                raise ValueError(
                    f"group x stride must be at most chips ({self.chips}), not {g} x {s}"
                )
            return g, s, b
        g, s, b = np.broadcast_arrays(g, s, b)
        if self.chips is not None and np.any(g * s > self.chips):
            i = np.flatnonzero((g * s > self.chips).ravel())[0]
            raise ValueError(
                f"group x stride must be at most chips ({self.chips}), not "
                f"{g.ravel()[i]} x {s.ravel()[i]}"
            )
        return g, s, b

    @staticmethod
    def _plan_s(plan: _Plan, count, dtype_bytes: int, explain: bool = False):
        """A plan's time for ``count`` elements (an array of rows, or one row's float): the
        total, each phase's time and, with ``explain``, each phase's fastest algorithm."""
        parts, picks = [], []
        for ph in plan.phases:
            units = ceil(count * ph.factor) if ph.factor != 1.0 else count
            best, pick = None, None
            for w, (a, k, chunks) in enumerate(zip(ph.A, ph.K, ph.C, strict=True)):
                t = a + k * (ceil(units / chunks) * dtype_bytes)
                if best is None:
                    best = t
                    pick = np.zeros(len(t), dtype=np.int64) if explain else None
                else:
                    if explain:
                        pick = np.where(t < best, w, pick)
                    best = minimum(best, t)
            parts.append(best)
            picks.append(pick)
        if not parts:
            return 0.0, parts, picks
        combine = maximum if plan.overlap else operator.add
        acc = parts[0]
        for part in parts[1:]:
            acc = combine(acc, part)
        return acc, parts, picks

    def _evaluate(self, op, group, stride, nbytes, dtype_bytes, explain=False):
        op = self._op(op)
        g, s, b = self._rows(group, stride, nbytes, dtype_bytes)
        g, s = np.asarray(g, dtype=np.int64), np.asarray(s, dtype=np.int64)
        b = np.asarray(b, dtype=float)
        shape = g.shape  # () for one row: a numpy float out
        g, s, b = g.ravel(), s.ravel(), b.ravel()
        # rows sorted by (group, stride): each pair's rows are one slice, its plan's few
        # numbers applied to the slice as scalars (no per-row gathers of tables)
        key = (g << 31) | s
        if len(key) == 1:  # one row: one slice (the sort's result, without its calls)
            order, sorted_key, starts = _ONE_ROW, key, (0, 1)
        else:
            order = np.argsort(key, kind="stable")
            sorted_key = key[order]
            starts = [0, *(np.flatnonzero(np.diff(sorted_key)) + 1).tolist(), len(key)]
        count = np.ceil(b[order] / dtype_bytes)
        total = np.zeros(len(b))
        if explain:
            up, out = np.zeros(len(b)), np.zeros(len(b))
            tiers = np.empty(len(b), dtype=object)
            labels = np.empty(len(b), dtype=object)
        for lo, hi in zip(starts[:-1], starts[1:], strict=True):
            kg, ks = int(sorted_key[lo] >> 31), int(sorted_key[lo] & ((1 << 31) - 1))
            plan = self._plan(op, kg, ks)
            total[lo:hi], parts, picks = self._plan_s(plan, count[lo:hi], dtype_bytes, explain)
            if explain:
                for ph, best in zip(plan.phases, parts, strict=True):
                    (out if ph.out else up)[lo:hi] += best
                tiers[lo:hi] = TIERS[plan.tier] if plan.tier >= 0 else "-"
                if not parts:
                    labels[lo:hi] = "-"
                    continue
                codes = np.stack(picks, axis=1)
                combos, where = np.unique(codes, axis=0, return_inverse=True)
                names = np.array(
                    [
                        "/".join(ph.names[w] for ph, w in zip(plan.phases, row, strict=True))
                        for row in combos
                    ],
                    dtype=object,
                )
                labels[lo:hi] = names[where.ravel()]
        result = np.empty(len(b))
        result[order] = total
        if not explain:
            return result.reshape(shape)[()]

        def back(x, kind=float):
            y = np.empty(len(b), dtype=kind)
            y[order] = x
            return y.reshape(shape)

        return Breakdown(
            time_s=result.reshape(shape),
            scale_up_s=back(up),
            scale_out_s=back(out),
            tier=back(tiers, object).astype(str),
            algorithm=back(labels, object).astype(str),
        )

    def collective_s(self, op: str, group, stride, nbytes, dtype_bytes: int = 2) -> np.ndarray:
        """Time of one collective of every group of a dimension, seconds (numpy arrays in,
        broadcast together, an array out; scalars in, a numpy float out).

        Parameters
        ----------
        op : str
            One of :data:`OPS`.
        group : int or array
            Chips in the group (1: no communication, 0 s).
        stride : int or array
            Chip-index distance between the group's members (1 for the innermost dimension).
        nbytes : float or array
            The buffer per rank, bytes: an all-reduce's buffer, a reduce-scatter's input, an
            all-gather's output, an all-to-all's buffer (``group`` blocks).
        dtype_bytes : int
            Bytes per element (2: bf16); the buffer is cut in whole elements.

        Raises
        ------
        ValueError
            Naming the argument, the value and what is allowed.
        """
        return self._evaluate(op, group, stride, nbytes, dtype_bytes)

    def breakdown(self, op: str, group, stride, nbytes, dtype_bytes: int = 2) -> Breakdown:
        """:meth:`collective_s` with the tier, the algorithms and the parts (slower)."""
        return self._evaluate(op, group, stride, nbytes, dtype_bytes, explain=True)

    def algorithm(self, op: str, group, stride, nbytes, dtype_bytes: int = 2) -> np.ndarray:
        """The algorithms each row used (:attr:`Breakdown.algorithm`)."""
        return self.breakdown(op, group, stride, nbytes, dtype_bytes).algorithm

    def tier(self, group, stride) -> np.ndarray:
        """Where each group's collective runs: one of :data:`TIERS` (``-`` for a group of
        one)."""
        g, s, _ = self._rows(group, stride, 0.0, 1)
        g, s = np.broadcast_arrays(g, s)
        keys, inverse = _unique_pairs(g.ravel(), s.ravel())
        names = np.array(["-", *TIERS])[[1 + self._layout(int(a), int(b))[0] for a, b in keys]]
        return names[inverse].reshape(g.shape)

    # ---- pipeline sends ----------------------------------------------------------------

    def _p2p_form(self, stride: int, group: int | None) -> tuple[float, float]:
        """``(A, K)``: a send of ``nbytes`` takes ``A + K x nbytes`` when every chip sends to
        the chip ``stride`` on at once (a pipeline's stages)."""
        key = ("p2p", stride, group)
        if key in self._plans:
            return self._plans[key]
        per = self.chips_per_node
        forms = []
        if stride < per:
            if self.node is None:
                forms.append((self.switch_step_s, 1.0 / self.switch_Bps))
            else:
                moves = tuple(Transfer(c, c + stride, 0, 1, False) for c in range(per - stride))
                schedule = Schedule("permute", "p2p", tuple(range(per)), 1, 1, (Step(moves, ()),))
                cost = Analytic(schedule, self._node_at(stride))
                forms.append((cost.total_fixed_s, cost.total_per_unit_s_per_byte))
        # the chips from the first sender to the last receiver
        reach = stride + 1 if group is None else max(stride + 1, (group - 1) * stride + 1)
        if reach > per:
            # the sends that leave the node: the last ``stride`` chips of each node (of
            # each leaf, of each site it crosses) send to the next one
            site = self._crosses_site(reach)
            forms.append(
                (
                    self._step_s(2 * stride, site),
                    1.0 / self._flow_Bps(stride, True, site),
                )
            )
        self._plans[key] = forms
        return forms

    def p2p_s(self, nbytes, stride, group=None) -> np.ndarray:
        """Time of a pipeline send of ``nbytes`` from every chip to the chip ``stride`` on
        (all at once, as a pipeline's stages send), seconds (an array; a numpy float for
        scalars).

        Parameters
        ----------
        nbytes : float or array
            Bytes each chip sends.
        stride : int or array
            Chip-index distance (the pipeline dimension's stride).
        group : int or array, optional
            The pipeline's stages: when ``group x stride`` exceeds a node, the stage
            boundaries that cross nodes go over the NICs and the slowest send decides.

        Raises
        ------
        ValueError
            Naming the argument, the value and what is allowed.
        """
        s = _integers("stride", stride)
        b = _sizes(nbytes)
        g = 0 if group is None else _integers("group", group)
        s, b, g = np.broadcast_arrays(
            np.asarray(s, dtype=np.int64), np.asarray(b, dtype=float), np.asarray(g, np.int64)
        )
        shape = s.shape  # () for one row: a numpy float out
        s, b, g = s.ravel(), b.ravel(), g.ravel()
        if self.chips is not None and np.any(s >= self.chips):
            bad = s[s >= self.chips][0]
            raise ValueError(f"stride must be less than chips ({self.chips}), not {bad}")
        keys, inverse = _unique_pairs(s, g)
        A = np.zeros((len(keys), 2))  # each pair's forms, a form of none as (0, 0)
        K = np.zeros((len(keys), 2))
        for u, (ks, kg) in enumerate(keys):
            forms = self._p2p_form(int(ks), int(kg) if kg else None)
            for j, (a, k) in enumerate(forms):
                A[u, j], K[u, j] = a, k
        t = _send_s([(A[inverse, j], K[inverse, j]) for j in range(2)], b)
        return t.reshape(shape)[()]


def _node_system(system: str, chip: str):
    """One node of a Trainium hardware file: its system preset with the Neuron runtime's
    collective mechanisms of its chip preset (:func:`tlm.collectives.runtime.with_runtime`:
    the chips' DMA queues, the runtime's step sync in place of the system file's assumed
    ``step_fixed_s``), each chip's queues at one rank's rate (:meth:`Network._node_at` makes
    the outer dimensions' node). A compiled graph's collectives do not pay the per-operation
    launch nccom-test's host pays (``reduce_fixed_s``, ``move_fixed_s``)."""
    from ..collectives.runtime import with_runtime
    from ..presets import load_preset

    return with_runtime(load_system(system, chip=chip), load_preset(chip))
