"""A collective's real bytes as packets on a torus network: the traffic and scoreboard of the
RTL collective bench (``bench_collective.py``), without cocotb so that the TLM tests drive them
with :class:`tlm.link.network.RouterNetwork` alone.

For each step of the schedule: :func:`tlm.collectives.values.payloads` (what each transfer
carries, from the buffers as the step begins) -> bytes -> :func:`tlm.collectives.packets.plan_step`
and :func:`~tlm.collectives.packets.encode` -> each source node's injection queue, in plan order
(:class:`~verif.link.drivers.NodeTraffic`, under its inject and eject patterns) -> the network ->
ejected flits -> :class:`~verif.link.scoreboard.PacketBoard` (every packet once, intact flit for
flit, in order per (source, destination, lane)) -> :class:`~tlm.collectives.packets.Reassembly`
(filed by (source, seq) at the node the plan sends it to, its length as planned) ->
:func:`tlm.collectives.values.apply` into the bench's own buffers.

Steps run one after another: a step's packets are queued when every packet of the step before
has been delivered and applied (a barrier). The schedules the bench runs are chains (each step
waits for the one before), so the barrier holds nothing back that the schedule would allow; it
also keeps the steps' sequence numbers apart, which :func:`~tlm.collectives.packets.plan_step`
restarts at 0 every step.

At the end (:meth:`CollectiveTraffic.check`) every rank's buffer must equal
:func:`tlm.collectives.values.run` and :func:`tlm.collectives.values.reference` bit for bit.

Examples
--------
>>> from tlm.link.config import LinkConfig
>>> from tlm.link.network import RouterNetwork
>>> cfg = LinkConfig((4, 4))
>>> schedule = collective_schedule("ring")
>>> rng = np.random.default_rng(1)
>>> traffic = CollectiveTraffic(cfg, schedule, random_inputs("bf16", 16, 13, rng), rng=rng)
>>> net = RouterNetwork(cfg)
>>> while not traffic.done:
...     traffic.observe(net.step(*traffic.offers()), net)
>>> traffic.check()
>>> traffic.steps_done, traffic.board.delivered, traffic.cycle
(15, 480, 225)
"""

from __future__ import annotations

import os

import numpy as np

from tlm.collectives import COLLECTIVE_FORMATS, build, values
from tlm.collectives.packets import Reassembly, encode, plan_step
from tlm.collectives.schedule import Schedule
from tlm.formats import get_format
from tlm.link.config import LinkConfig
from tlm.link.network import NetStep
from tlm.system import load_system

from .drivers import NodeTraffic
from .scoreboard import PacketBoard, ScoreboardError, Watchdog, describe_buffers, moved
from .stimulus import Packet

__all__ = [
    "ALGORITHMS",
    "SYSTEM",
    "collective_schedule",
    "random_inputs",
    "settings_from_env",
    "check_count",
    "CollectiveTraffic",
]

#: The all-gather algorithms the bench runs on the server's 4x4 torus.
ALGORITHMS = ("ring", "kangaring", "rdh", "mesh")
#: The system whose 4x4 torus is the RTL's: chip ``c`` is torus node ``c``.
SYSTEM = "trn2-server"
#: Elements of the gathered buffer by default: 13 per rank (26 bf16 bytes: 21 + 5, so every
#: block is a full packet and a partial one; KangaRing's sub-chunks are 4, 3, 3 and 3 elements).
DEFAULT_COUNT = 16 * 13


def collective_schedule(algo: str, op: str = "all_gather") -> Schedule:
    """The schedule of ``op`` by ``algo`` on the trn2 server (:data:`SYSTEM`).

    Raises
    ------
    ValueError
        If ``algo`` is not one of :data:`ALGORITHMS`.
    """
    if algo not in ALGORITHMS:
        raise ValueError(f"algo must be one of {', '.join(ALGORITHMS)}, not {algo!r}")
    return build(algo, op, load_system(SYSTEM))


def random_inputs(fmt: str, ranks: int, per_rank: int, rng: np.random.Generator) -> np.ndarray:
    """``(ranks, per_rank)`` random values of format ``fmt``: every bit pattern but NaN.

    Random bits rather than random numbers, so that every byte value crosses the network; NaNs
    are replaced by 0 because the values engine marks chunks never delivered with NaN.

    Raises
    ------
    ValueError
        If ``per_rank`` is not an integer >= 1 (or ``fmt`` is not a format).
    """
    if isinstance(per_rank, bool) or not isinstance(per_rank, int) or per_rank < 1:
        raise ValueError(f"per_rank must be an integer >= 1 (elements), not {per_rank!r}")
    dtype = get_format(fmt).dtype
    bits = rng.integers(0, 256, (ranks, per_rank * dtype.itemsize), dtype=np.uint8)
    out = bits.view(dtype)
    out[np.isnan(out.astype(np.float32))] = 0
    return out


def settings_from_env(env=None) -> tuple[str, str, int]:
    """The bench's ``COLL_ALGO`` (default ring), ``COLL_FORMAT`` (default bf16) and
    ``COLL_COUNT`` (default :data:`DEFAULT_COUNT`) from ``env`` (default ``os.environ``).

    Raises
    ------
    ValueError
        If one is not allowed: naming the variable, its value and what is allowed.
    """
    env = os.environ if env is None else env
    algo = env.get("COLL_ALGO", "ring")
    if algo not in ALGORITHMS:
        raise ValueError(f"COLL_ALGO must be one of {', '.join(ALGORITHMS)}, not {algo!r}")
    fmt = env.get("COLL_FORMAT", "bf16")
    if fmt not in COLLECTIVE_FORMATS:
        raise ValueError(f"COLL_FORMAT must be one of {', '.join(COLLECTIVE_FORMATS)}, not {fmt!r}")
    text = env.get("COLL_COUNT", str(DEFAULT_COUNT))
    return algo, fmt, check_count(int(text) if text.isdigit() else text, "COLL_COUNT")


def check_count(count, name: str = "count") -> int:
    """``count`` if it is a positive multiple of the server's 16 ranks (an all-gather's count
    is its output's), else a ``ValueError`` naming ``name``."""
    if isinstance(count, bool) or not isinstance(count, int) or count < 16 or count % 16:
        raise ValueError(
            f"{name} must be a positive multiple of 16 (the ranks; an all-gather's count is "
            f"its output's), not {count!r}"
        )
    return count


class CollectiveTraffic:
    """Every node's sources and sinks for the steps of ``schedule``, and the scoreboard.

    Parameters
    ----------
    cfg : LinkConfig
        The torus the packets travel; its nodes are the schedule's chips.
    schedule : Schedule
        Every chip of it a node of ``cfg``'s torus.
    inputs : numpy.ndarray
        The operation's inputs (``values.run``'s).
    inject, eject : str
        Patterns of the sources' valid and the sinks' ready
        (:data:`verif.common.patterns.PATTERNS`).
    rng : numpy.random.Generator
        Draws the ``random`` patterns.
    idle_limit : int
        Cycles without a flit moving, while packets are outstanding, before the watchdog fails.

    Attributes
    ----------
    buffers : numpy.ndarray
        Every rank's buffer, ``(ranks, count)``, as the delivered steps left it.
    board : PacketBoard
    cycle : int
        Network cycles observed.
    steps_done : int
    """

    def __init__(
        self,
        cfg: LinkConfig,
        schedule: Schedule,
        inputs: np.ndarray,
        inject: str = "always",
        eject: str = "always",
        rng: np.random.Generator | None = None,
        idle_limit: int = 200,
    ):
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be a Schedule, not {schedule!r}")
        nodes = cfg.torus.nodes
        if any(not 0 <= c < nodes for c in schedule.chips):
            raise ValueError(
                f"schedule's chips must be nodes of the torus {cfg.shape} (0..{nodes - 1}), "
                f"not {schedule.chips}"
            )
        self.cfg = cfg
        self.schedule = schedule
        self.inputs = np.asarray(inputs)
        self.buffers = values.initial(schedule, self.inputs)
        self.bounds = schedule.bounds(self.buffers.shape[1])
        self.board = PacketBoard(cfg, deliver=self._take)
        rng = rng if rng is not None else np.random.default_rng(0)
        self.traffic = NodeTraffic([[] for _ in range(nodes)], self.board, inject, eject, rng)
        self.dog = Watchdog(idle_limit)
        self.cycle = 0
        self.steps_done = 0
        self.bytes = 0
        self._receive: Reassembly | None = None
        self._start_steps()

    @property
    def done(self) -> bool:
        """Every step delivered and applied."""
        return self.steps_done == len(self.schedule.steps)

    def offers(self) -> tuple[dict, dict]:
        """This cycle's ``({node: flit offered}, {node: eject ready})``."""
        return self.traffic.offers()

    def observe(self, step: NetStep, net):
        """What the network did in a cycle: ``step`` from ``net`` (the model, whose buffers
        the watchdog reports). Starts the next step when this one has been delivered."""
        for node in step.accepted:
            self.traffic.accepted(node)
        for node, flit in step.ejected.items():
            self.board.eject(node, flit, self.cycle)
        self.dog.tick(
            moved(step, net.routers),
            self.board.outstanding,
            self.cycle,
            lambda: f"step {self.steps_done}: " + describe_buffers(self.cfg, net.routers),
        )
        self.cycle += 1
        if self._receive is not None and not self._receive.outstanding:
            self._finish_step()
            self._start_steps()

    def check(self):
        """Raise :class:`~verif.link.scoreboard.ScoreboardError` unless every step was
        delivered and every rank's result equals the values engine's and the reference's, bit
        for bit."""
        if not self.done:
            raise ScoreboardError(
                f"{self.steps_done} of {len(self.schedule.steps)} steps delivered"
            )
        self.board.check_done()
        got = values.outputs(self.schedule, self.buffers)
        for name, want in (
            ("values.run", values.run(self.schedule, self.inputs)),
            ("values.reference", values.reference(self.schedule, self.inputs)),
        ):
            if got.shape != want.shape:
                raise ScoreboardError(f"result has shape {got.shape}, {name} {want.shape}")
            size = got.dtype.itemsize
            differ = np.flatnonzero(
                (got.view(np.uint8) != want.view(np.uint8)).reshape(-1, size).any(axis=1)
            )
            if differ.size:
                rank, element = divmod(int(differ[0]), got.shape[1])
                raise ScoreboardError(
                    f"{differ.size} elements differ from {name}; first: rank {rank} element "
                    f"{element} is {got[rank, element]!r}, {name} says {want[rank, element]!r}"
                )

    def _start_steps(self):
        """Queue the next step's packets; steps that carry no bytes are applied at once."""
        while not self.done:
            step = self.schedule.steps[self.steps_done]
            chips = self.schedule.chips
            data = values.payloads(step, self.buffers, self.bounds)
            raw = [np.ascontiguousarray(d).tobytes() for d in data]
            nbytes = [len(b) for b in raw]
            routes = [(chips[t.src], chips[t.dst]) for t in step.transfers]
            plan = plan_step(self.cfg.fmt, routes, nbytes)
            self._receive = Reassembly(self.cfg, plan, nbytes)
            self.bytes += sum(nbytes)
            queues = [[] for _ in range(self.cfg.torus.nodes)]
            for p in plan:
                lane = p.seq % self.cfg.lanes  # the packets of a source take the lanes in turn
                chunk = raw[p.transfer][p.offset : p.offset + p.nbytes]
                flits = encode(self.cfg, p, chunk, vc=lane)
                queues[p.src].append(Packet(p.src, p.dst, lane, p.seq, flits))
            self.traffic.add(queues)
            if plan:
                return
            self._finish_step()

    def _take(self, node: int, flits: list[int]):
        """A packet the board found intact: into the step's reassembly."""
        self._receive.take(node, flits)

    def _finish_step(self):
        """Every packet of the step arrived: apply what it carried to the buffers."""
        receive, step = self._receive, self.schedule.steps[self.steps_done]
        receive.check_done()
        dtype = self.buffers.dtype
        data = [np.frombuffer(receive.data(i), dtype) for i in range(len(step.transfers))]
        values.apply(step, self.buffers, self.bounds, data)
        self._receive = None
        self.steps_done += 1
