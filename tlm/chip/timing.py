"""The timing simulation of a recorded kernel, on SimPy.

Every queue (each core's four engines and 16 DMA queues) is a SimPy process that takes its
instructions in order: it waits for the completion of the instructions each depends on (the
semaphores the hardware would use; for a write after a read, until the reader has read), and
for any explicit ``sem_wait``; then it is busy for the instruction's occupancy. Compute
instructions complete after their latency (a Tensor engine result no earlier than the same
queue's earlier PSUM results it follows); DMA transfers pay a fixed cost and then move their
bytes through the :class:`FluidNetwork` of DMA engines and HBM stacks, sharing bandwidth with
every other transfer in flight.

:func:`simulate` runs one kernel in an environment of its own. :func:`start` puts a kernel's
queues into an environment and :class:`FluidNetwork` someone else owns - the server model runs
one per chip in one environment, each chip's resources under its own prefix (``chip3.hbm0``),
beside the system's links - and :func:`finish` reads its :class:`Run` back once the
environment has run. ``simulate`` is exactly ``start``, ``env.run()``, ``finish``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import simpy

from ..core.errors import DeadlockError
from .bandwidth_sharing import FluidNetwork

__all__ = ["simulate", "start", "finish", "capacities", "Started", "Run"]


@dataclass
class Run:
    """The result of simulating a kernel.

    Attributes
    ----------
    time_s : float
        Simulated time from the start to the completion of the last instruction.
    program : list of Instruction
        With ``start_s``, ``end_s`` (queue free again) and ``done_s`` (result visible) set.
    busy_s : dict
        ``{(core, queue): seconds busy}``.
    hbm_bytes : dict
        ``{stack name: bytes moved}``.
    flops : float
        Floating-point operations of the tensor engine instructions.
    events : int
        Discrete events the simulation processed.
    bandwidth_history : list
        ``(time_s, {resource: bytes/s})`` at every change of the DMA and HBM rates.
    wall_s : float
        Wall-clock seconds the simulation took.
    """

    time_s: float
    program: list
    busy_s: dict
    hbm_bytes: dict
    flops: float
    events: int
    wall_s: float
    spec: object = field(repr=False, default=None)
    bandwidth_history: list = field(repr=False, default_factory=list)

    @property
    def instructions(self) -> int:
        return len(self.program)

    def utilisation(self, engine: str) -> float:
        """Busy fraction of ``engine`` (``tensor`` ... or ``dma``), averaged over the cores
        that ran anything."""
        cores = {core for core, _ in self.busy_s}
        if not cores or self.time_s <= 0:
            return 0.0
        if engine == "dma":
            n = self.spec.core.dma_engines
            total = sum(v for (c, q), v in self.busy_s.items() if q.startswith("dma"))
            return total / (len(cores) * n * self.time_s)
        total = sum(v for (c, q), v in self.busy_s.items() if q == engine)
        return total / (len(cores) * self.time_s)

    @property
    def hbm_bandwidth_Bps(self) -> float:
        return sum(self.hbm_bytes.values()) / self.time_s if self.time_s > 0 else 0.0

    @property
    def tflops(self) -> float:
        return self.flops / self.time_s / 1e12 if self.time_s > 0 else 0.0


def _queue_process(env, insts, net, counter, busy, key, prefix):
    for inst in insts:
        for dep in inst.deps:
            if not dep._done.triggered:
                counter[0] += 1
                yield dep._done
        for dep in inst.after_reads:
            if not dep._read.triggered:
                counter[0] += 1
                yield dep._read
        if inst.sem_wait is not None:
            sem, value = inst.sem_wait
            if sem.value < value:
                event = env.event()
                sem.waiters.append((value, event))
                inst._blocked_on = inst.sem_wait
                counter[0] += 1
                yield event
                inst._blocked_on = None
        inst.start_s = env.now
        if inst.dma is not None:
            nbytes, resources, cap, fixed = inst.dma
            counter[0] += 2
            yield env.timeout(fixed)
            if prefix:
                resources = [prefix + name for name in resources]
            yield net.transfer(nbytes, resources, cap)
            inst.end_s = inst.done_s = env.now
            inst._done.succeed()
        else:
            if inst.occupancy_s > 0:
                counter[0] += 1
                yield env.timeout(inst.occupancy_s)
            inst.end_s = env.now
            if inst._read is not inst._done:
                inst._read.succeed()
            inst.done_s = inst.start_s + inst.latency_s
            if inst.after is not None and inst.after.done_s > inst.done_s:
                inst.done_s = inst.after.done_s
            tail = inst.done_s - env.now
            if tail > 0:
                counter[0] += 1
                timer = env.timeout(tail)
                timer.callbacks.append(lambda _e, d=inst._done: d.succeed())
            else:
                inst._done.succeed()
        if inst.sem_signal is not None:
            sem = inst.sem_signal
            sem.value += 1
            for waiter in [w for w in sem.waiters if w[0] <= sem.value]:
                sem.waiters.remove(waiter)
                waiter[1].succeed()
        busy[key] = busy.get(key, 0.0) + (inst.end_s - inst.start_s)


def capacities(kernel, prefix: str = "") -> dict:
    """The bandwidth resources of ``kernel``'s chip, ``{name: bytes/s}``: every HBM stack
    (``hbm0``..) and every core's DMA engines together (``core0.dma``..), each name after
    ``prefix``."""
    spec = kernel.spec
    caps = {prefix + s.name: s.bandwidth_Bps for s in kernel.chip.stacks}
    for core in range(spec.chip.cores):
        caps[f"{prefix}core{core}.dma"] = spec.core.dma_engines * spec.core.dma_engine_bandwidth_Bps
    return caps


@dataclass
class Started:
    """A kernel whose queues run in an environment (:func:`start`); :func:`finish` reads it."""

    kernel: object
    net: FluidNetwork
    queues: dict
    counter: list
    busy: dict
    prefix: str
    wall: float


def start(kernel, env: simpy.Environment, net: FluidNetwork, prefix: str = "") -> Started:
    """Start ``kernel``'s queues as processes of ``env``, their DMA transfers flows of ``net``.

    Parameters
    ----------
    kernel : Kernel
        A recorded kernel (its instructions take their timing state from this run).
    env : simpy.Environment
    net : FluidNetwork
        Must hold the resources of :func:`capacities` with the same ``prefix``; it may hold
        others (other chips, links) whose flows then share them.
    prefix : str
        Put before every resource name the kernel's transfers use (``"chip3."``).
    """
    wall = time.perf_counter()
    queues: dict = {}
    program = kernel.program.instructions
    for inst in program:
        for sem in (inst.sem_signal, inst.sem_wait and inst.sem_wait[0]):
            if sem:
                sem.value, sem.waiters = 0, []
        inst._done = env.event()
        # operands read (the queue free again): before the result only where they differ
        inst._read = env.event() if inst.latency_s > inst.occupancy_s else inst._done
        inst._blocked_on = None
        inst.start_s = inst.end_s = inst.done_s = None
        queues.setdefault((inst.core, inst.queue), []).append(inst)
    counter = [0]
    busy: dict = {}
    for key, insts in queues.items():
        env.process(_queue_process(env, insts, net, counter, busy, key, prefix))
    return Started(kernel, net, queues, counter, busy, prefix, time.perf_counter() - wall)


def finish(started: Started, wall_s: float | None = None) -> Run:
    """The :class:`Run` of a started kernel once its environment has run.

    Parameters
    ----------
    started : Started
    wall_s : float, optional
        Wall-clock seconds to report (default: those of :func:`start` alone).

    Raises
    ------
    DeadlockError
        When queues still hold instructions that can never start.
    """
    kernel, net, prefix = started.kernel, started.net, started.prefix
    program = kernel.program.instructions
    stuck = [i for i in program if i.start_s is None]
    if stuck:
        raise _deadlock(started.queues)
    end = max((i.done_s for i in program), default=0.0)
    hbm = {s.name: net.bytes_by_resource[prefix + s.name] for s in kernel.chip.stacks}
    flops = sum(i.flops for i in program)
    return Run(
        time_s=end,
        program=program,
        busy_s=started.busy,
        hbm_bytes=hbm,
        flops=flops,
        events=started.counter[0] + net.events + len(program),
        wall_s=started.wall if wall_s is None else wall_s,
        spec=kernel.spec,
        bandwidth_history=net.history,
    )


def simulate(kernel) -> Run:
    """Run a kernel's recorded program through the timing model."""
    wall = time.perf_counter()
    env = simpy.Environment()
    net = FluidNetwork(env, capacities(kernel))
    started = start(kernel, env, net)
    env.run()
    return finish(started, wall_s=time.perf_counter() - wall)


def _deadlock(queues) -> DeadlockError:
    blocked = []
    for insts in queues.values():
        head = next((i for i in insts if i.start_s is None), None)
        if head is None:
            continue
        if head._blocked_on is not None:
            sem, value = head._blocked_on
            why = f"waits for semaphore {sem.name!r} to reach {value}; it stays at {sem.value}"
        else:
            dep = next((d for d in head.deps if d.done_s is None), None)
            if dep is None:
                dep = next(d for d in head.after_reads if d.end_s is None)
            why = f"waits for {dep.label}, which never completes"
        blocked.append((head, why))
    blocked.sort(key=lambda b: (b[0]._blocked_on is None, b[0].index))
    head, why = blocked[0]
    others = "; ".join(f"{h.label} {w}" for h, w in blocked[1:])
    rule = f"semaphore deadlock: {why}" + (f" (also blocked: {others})" if others else "")
    return DeadlockError(head.label, rule)
