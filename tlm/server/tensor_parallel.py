"""A tensor-parallel step on a server, in one piece: the chips' GEMMs and the all-reduce of their
partial sums, in values and in one timed simulation.

The layer is row-parallel: ``Y = X W`` with ``X`` (``m x k``) cut by columns and ``W`` (``k x
n``) by rows over the ``tp`` chips of the system (every chip: ``tp = system.chips``). Chip ``i``
runs ``X_i W_i`` with the chip model's GEMM (:func:`tlm.kernels.build_gemm`, ``m x n x k/tp``),
then the partial sums are all-reduced by a collective schedule (:mod:`tlm.collectives`).

**Values** (``values=True``): each chip's partial on the chip model with its numerics, then
the values engine's all-reduce; every rank's result equals
:func:`tlm.collectives.values.reference` bit for bit, and ``X @ W`` within :func:`error_bound`.
**Time**: one SimPy environment and one :class:`~tlm.chip.bandwidth_sharing.FluidNetwork` of
every chip's HBM stacks and DMA engines and every link: each chip's GEMM
(:func:`tlm.chip.timing.start`), and the all-reduce of each of ``blocks`` groups of output
blocks started when they are stored (one collective stream), its HBM traffic sharing the
stacks with the GEMMs. docs/server.md gives the whole model and its figures.

Examples
--------
>>> from tlm.system import load_system
>>> step = tensor_parallel_step(load_system("trn2-server"), 512, 512, 16 * 512)
>>> step.algorithms, len(step.groups)            # one wave of 4 blocks: one all-reduce
(['mesh'], 1)
>>> [round(t * 1e6, 2) for t in (step.gemm_alone_s, step.all_reduce_alone_s, step.step_s)]
[7.71, 9.07, 16.78]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import simpy

from ..chip import Chip
from ..chip.bandwidth_sharing import FluidNetwork
from ..chip.timing import capacities, finish, simulate, start
from ..collectives import ALGOS, Analytic, build, choose, unfit
from ..collectives.flow import Launch, step_flows
from ..collectives.hbm import flow_split
from ..collectives.numerics import error_bound as collective_error_bound
from ..collectives.schedule import tree_depth
from ..collectives.values import reference as collective_reference
from ..collectives.values import run as collective_run
from ..core.view import DTYPE_NAMES
from ..formats import get_format
from ..kernels import assemble, build_gemm, gemm_blocks
from ..kernels.softmax import engine_scores

__all__ = [
    "TensorParallelStep",
    "Group",
    "tensor_parallel_step",
    "error_bound",
    "reduction_depth",
    "output_blocks",
    "VALUES_MAX_MACS",
]

#: Most multiply-adds (m x n x k) the value path takes: the chips' GEMMs compute every value.
VALUES_MAX_MACS = 1 << 33


@dataclass
class Group:
    """One all-reduce of the step: a group of the GEMM's output blocks.

    Attributes
    ----------
    blocks : list of int
        Indices of the kernel's output blocks (:func:`tlm.kernels.gemm_blocks`).
    count : int
        Elements per rank.
    size_bytes : int
    algorithm : str
    ready_s, start_s, end_s : float
        When its blocks were stored on every chip, when its all-reduce started and ended.
    """

    blocks: list
    count: int
    size_bytes: int
    algorithm: str
    ready_s: float = 0.0
    start_s: float = 0.0
    end_s: float = 0.0


@dataclass
class TensorParallelStep:
    """What :func:`tensor_parallel_step` measured (times in seconds, bytes per chip).

    Attributes
    ----------
    step_s : float
        The step in the one simulation: the last GEMM instruction or all-reduce to end.
    gemm_alone_s : float
        One chip's GEMM share with nothing else running (the chip model alone).
    gemm_in_step_s : float
        The slowest chip's GEMM inside the step (slower than alone when the collective's HBM
        flows take bandwidth from it).
    all_reduce_alone_s : float
        One all-reduce of the whole output (``m x n``) with nothing else running, its HBM flows
        included: what the no-overlap step adds to the GEMM.
    hbm_bytes : float
        Bytes each chip moved through its HBM stacks (GEMM and collective), mean over chips.
    schedules : dict
        The all-reduce schedule of each algorithm used, by name.
    runs : list of tlm.chip.timing.Run
        Per chip, its GEMM's run inside the step.
    flows : list
        When recorded, every collective flow: ``(group, step, transfer, start_s, end_s,
        nbytes, resources)``.
    y : ndarray or None
        Values: every rank's result ``(tp, m, n)``.
    bit_exact : bool or None
        Values: every rank equals the reference (chip GEMM values, then the algorithm's
        declared reduction order) bit for bit, and each chip's partial the engine's sums.
    error_of_bound : float or None
        Values: the largest ``|Y - X @ W| / bound`` (float64), <= 1 when within the bound.
    """

    system: object
    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    groups: list
    step_s: float
    gemm_alone_s: float
    gemm_in_step_s: float
    all_reduce_alone_s: float
    hbm_bytes: float
    hbm_peak_Bps: float
    events: int
    wall_s: float
    schedules: dict = field(repr=False, default_factory=dict)
    runs: list = field(repr=False, default_factory=list)
    flows: list = field(repr=False, default_factory=list)
    y: np.ndarray | None = field(repr=False, default=None)
    bit_exact: bool | None = None
    error_of_bound: float | None = None

    @property
    def tp(self) -> int:
        return self.system.chips

    @property
    def algorithms(self) -> list[str]:
        """The algorithms the all-reduces used, each once."""
        return list(dict.fromkeys(g.algorithm for g in self.groups))

    @property
    def exposed_communication_s(self) -> float:
        """The step's time beyond the GEMM alone: communication not hidden behind compute
        (and the GEMM's own slowdown from sharing HBM)."""
        return self.step_s - self.gemm_alone_s

    @property
    def hbm_bandwidth_Bps(self) -> float:
        """HBM bytes per chip over the step."""
        return self.hbm_bytes / self.step_s if self.step_s > 0 else 0.0


def output_blocks(m: int, n: int, spec) -> tuple[int, int]:
    """The GEMM's output blocks on a chip of ``spec`` (:func:`tlm.kernels.gemm_blocks`) and
    the waves they make over the cores it uses: ``(blocks, waves)``."""
    blocks = gemm_blocks(m, n, spec.chip.cores)
    cores = len({core for _, core in blocks})
    return len(blocks), math.ceil(len(blocks) / cores)


def _check(name, value, low=1):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, not {value!r}")


def _groups(nblocks: int, count: int) -> list[list[int]]:
    """``nblocks`` kernel blocks cut into ``count`` groups in order, as equal as can be."""
    return [a.tolist() for a in np.array_split(np.arange(nblocks), count)]


def _hbm_split(schedule, stacks: int):
    """Per transfer: its HBM accesses (:func:`tlm.collectives.hbm.flow_split`) as flows
    through the source and destination chips' stacks, spread equally over them."""
    chips = schedule.chips
    return flow_split(
        schedule, lambda rank: tuple(f"chip{chips[rank]}.hbm{s}" for s in range(stacks))
    )


def reduction_depth(schedule) -> int:
    """Additions on the longest path of any reduction tree ``schedule`` declares."""
    return max(
        tree_depth(schedule.order(rank, c))
        for rank in range(schedule.ranks)
        for c in range(schedule.chunks)
    )


class _Collective:
    """An all-reduce by one algorithm on the system, with the server's HBM flows."""

    def __init__(self, system, algorithm, stacks):
        schedule = build(algorithm, "all_reduce", system)
        self.analytic = system.cached(
            ("analytic", algorithm, "all_reduce"), lambda: Analytic(schedule, system)
        )
        self.schedule = schedule
        self.flows = system.cached(
            ("server flows", algorithm, stacks),
            lambda: step_flows(schedule, self.analytic.paths, _hbm_split(schedule, stacks)),
        )
        self.fixed_s = self.analytic.fixed_s.tolist()

    def launch(self, env, net, size_bytes, itemsize, record=None):
        chunk = float(self.analytic.chunk_bytes(size_bytes, itemsize))
        return Launch(env, net, self.flows, self.analytic.after, self.fixed_s, chunk, record=record)


def _network(env, system, kernels, memo=None):
    caps = {}
    for c, kernel in enumerate(kernels):
        caps.update(capacities(kernel, f"chip{c}."))
    for i, bandwidth in enumerate(system.bandwidth_Bps.tolist()):
        caps[i] = bandwidth
    return FluidNetwork(env, caps, record=False, memo=memo)


def error_bound(x, w, partials, depth, out_fmt, k_share) -> np.ndarray:
    """The largest error the step's numerics allow each element of ``Y`` against the exact
    ``X @ W``, per element (``m x n``).

    Each chip's partial ``P_i`` is ``k_share`` products summed in FP32 (each product exact for
    16-bit inputs, one rounding for FP32 ones, so at most ``k_share + 1`` roundings of
    ``u = 2^-24``) and rounded once to the output format (unit roundoff ``v``, half a subnormal
    step ``eta``): ``|P_i - S_i| <= (g + v (1 + g)) A_i + eta`` with ``g = (1 + u)^(k_share+1)
    - 1`` and ``A_i`` the sum of the magnitudes of chip ``i``'s products. The all-reduce adds
    :func:`tlm.collectives.numerics.error_bound` of its deepest reduction tree over the
    partials' magnitudes (``depth``: additions on the longest path of the trees the elements
    are reduced by, :func:`reduction_depth`). The bound is the sum of the two.
    """
    fmt = get_format(out_fmt)
    g = (1.0 + 2.0**-24) ** (k_share + 1) - 1.0
    v = 2.0 ** -(fmt.man_bits + 1)
    eta = 2.0 ** (2 - 2 ** (fmt.exp_bits - 1) - fmt.man_bits) / 2
    magnitude = np.abs(np.asarray(x, np.float64)) @ np.abs(np.asarray(w, np.float64))
    tp = partials.shape[0]
    gemm = (g + v * (1 + g)) * magnitude + tp * eta
    sums = np.abs(partials.astype(np.float64)).sum(axis=0)
    return gemm + collective_error_bound(out_fmt, depth, sums)


def tensor_parallel_step(
    system,
    m: int,
    n: int,
    k: int,
    dtype: str = "bf16",
    *,
    preset=None,
    choose_alternatives: dict | None = None,
    algo: str = "auto",
    blocks: int | None = None,
    values: bool = False,
    seed: int = 0,
    record: bool = False,
) -> TensorParallelStep:
    """Simulate a row-parallel linear layer ``Y = X W`` over every chip of ``system``.

    Parameters
    ----------
    system : tlm.system.System
    m, n, k : int
        ``X`` is ``m x k``, ``W`` ``k x n``; ``k`` a multiple of the chips (each takes
        ``k / tp`` columns of ``X``).
    dtype : str
        Format of ``X`` and ``W`` (:data:`tlm.core.view.DTYPE_NAMES`); the partial sums and the
        all-reduce are in the GEMM's output format (BF16; FP32 for FP32 inputs).
    preset : str or ChipSpec, optional
        The chip (default: the system's ``chip``).
    choose_alternatives : dict, optional
        Preset alternatives, as :func:`tlm.presets.load_preset` takes them.
    algo : str
        ``auto`` (by each all-reduce's size, :func:`tlm.collectives.choose`) or an algorithm.
    blocks : int, optional
        All-reduces the output is cut into, 1 .. the kernel's output blocks (default: one per
        wave of blocks over the cores); 1 is no overlap.
    values : bool
        Compute and check the values (``X``, ``W`` standard normal from ``seed``); at most
        :data:`VALUES_MAX_MACS` multiply-adds.
    record : bool
        Keep every collective flow (for the trace).

    Raises
    ------
    ValueError
        Naming the argument, its value and what is allowed.
    """
    wall = time.perf_counter()
    for name, value in (("m", m), ("n", n), ("k", k)):
        _check(name, value)
    tp = system.chips
    if tp < 2:
        raise ValueError(f"system must have 2 or more chips, not {system.name!r}")
    if k % tp:
        raise ValueError(
            f"k must be a multiple of {tp} (the chips of {system.name}, each takes k / {tp}), "
            f"not {k!r}"
        )
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, not {dtype!r}")
    if values and m * n * k > VALUES_MAX_MACS:
        raise ValueError(
            f"values must be False for m x n x k above {VALUES_MAX_MACS} multiply-adds, "
            f"not True (m x n x k = {m * n * k})"
        )
    chip = Chip(preset if preset is not None else system.chip, choose_alternatives)
    spec = chip.spec
    share = k // tp
    out_dtype = "fp32" if dtype == "fp32" else "bf16"
    itemsize = get_format(out_dtype).dtype.itemsize
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {', '.join(ALGOS)}, not {algo!r}")
    kblocks = gemm_blocks(m, n, spec.chip.cores)  # the kernel's blocks, the same on every chip
    count = output_blocks(m, n, spec)[1] if blocks is None else blocks
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= len(kblocks):
        raise ValueError(
            f"blocks must be an integer in 1..{len(kblocks)} (the GEMM's output blocks), "
            f"not {blocks!r}"
        )
    groups = []
    for members in _groups(len(kblocks), count):
        elements = sum(
            (kblocks[b][0][1] - kblocks[b][0][0]) * (kblocks[b][0][3] - kblocks[b][0][2])
            for b in members
        )
        size = elements * itemsize
        name = choose("all_reduce", system, size) if algo == "auto" else algo
        groups.append(Group(members, elements, size, name))
    for name in {g.algorithm for g in groups} | ({algo} if algo != "auto" else set()):
        why = unfit(name, "all_reduce", system)
        if why is not None:
            raise ValueError(
                f"algo must be an algorithm that fits {system.name}, not {name!r} (it {why})"
            )
    # the chips' kernels: each its own instructions (their timing state is per run)
    kernels, stores, partials = [], [], []
    rng = np.random.default_rng(seed)
    x = w = None
    if values:
        x = rng.standard_normal((m, k)).astype(DTYPE_NAMES[dtype])
        w = rng.standard_normal((k, n)).astype(DTYPE_NAMES[dtype])
    for c in range(tp):
        got: dict = {}
        cols = slice(c * share, (c + 1) * share)
        kernel, _, out = build_gemm(
            m,
            n,
            share,
            dtype,
            preset=spec,
            values=values,
            a=None if x is None else x[:, cols],
            b=None if w is None else w[cols, :],
            stores=got,
        )
        kernels.append(kernel)
        stores.append(got)
        if values:
            partials.append(assemble(kblocks, out, spec))
    stacks = len(chip.stacks)
    collectives = {g.algorithm: _Collective(system, g.algorithm, stacks) for g in groups}

    # the GEMM alone: one chip, nothing else (its instructions are timed again below)
    gemm_alone = simulate(kernels[0]).time_s

    # the all-reduce alone: the whole output, one all-reduce, its HBM flows, nothing else.
    # Rates are memoised by the flows in flight: the all-reduces of the step repeat the same
    # sets of flows (the same floats either way, FluidNetwork's memo)
    memo: dict = {}
    env = simpy.Environment()
    net = _network(env, system, kernels, memo)
    whole = m * n * itemsize
    name = choose("all_reduce", system, whole) if algo == "auto" else algo
    alone = _Collective(system, name, stacks).launch(env, net, whole, itemsize)
    env.run()
    all_reduce_alone = max(alone.ends, default=0.0)

    # the step: every chip's GEMM and the all-reduces, one environment, one network
    env = simpy.Environment()
    net = _network(env, system, kernels, memo)
    started = [start(kernel, env, net, f"chip{c}.") for c, kernel in enumerate(kernels)]
    flows: list | None = [] if record else None

    def stream():
        for index, group in enumerate(groups):
            done = [i._done for c in range(tp) for b in group.blocks for i in stores[c][b]]
            yield simpy.AllOf(env, done)
            group.ready_s = max(
                i.done_s for c in range(tp) for b in group.blocks for i in stores[c][b]
            )
            group.start_s = env.now
            log = None if flows is None else []
            launch = collectives[group.algorithm].launch(env, net, group.size_bytes, itemsize, log)
            yield launch.done
            group.end_s = env.now
            if log is not None:
                flows.extend((index, *entry) for entry in log)

    env.process(stream())
    env.run()
    runs = [finish(s) for s in started]
    gemm_in_step = max(r.time_s for r in runs)
    step = max(gemm_in_step, max(g.end_s for g in groups))
    hbm = float(np.mean([sum(r.hbm_bytes.values()) for r in runs]))
    result = TensorParallelStep(
        system=system,
        m=m,
        n=n,
        k=k,
        dtype=dtype,
        out_dtype=out_dtype,
        groups=groups,
        step_s=step,
        gemm_alone_s=gemm_alone,
        gemm_in_step_s=gemm_in_step,
        all_reduce_alone_s=all_reduce_alone,
        hbm_bytes=hbm,
        hbm_peak_Bps=spec.chip.hbm_bandwidth_Bps,
        events=net.events + sum(r.events - net.events for r in runs),
        wall_s=0.0,
        schedules={name: c.schedule for name, c in collectives.items()},
        runs=runs,
        flows=flows or [],
    )
    if values:
        _values(result, x, w, np.stack(partials), kblocks, collectives, share)
    result.wall_s = time.perf_counter() - wall
    return result


def _values(result, x, w, partials, kblocks, collectives, share):
    """All-reduce the chips' partials group by group; check them bit for bit and in float64."""
    tp, m, n = partials.shape
    exact = True
    if not result.dtype.startswith("fp8"):
        # each chip's partial against the engine's own FP32 sums (K steps of 128 rows)
        for c in range(tp):
            cols = slice(c * share, (c + 1) * share)
            want = engine_scores(x[:, cols], w[cols, :]).astype(partials.dtype)
            exact &= bool(np.array_equal(partials[c].view(np.uint8), want.view(np.uint8)))
    y = np.empty_like(partials)
    bound = np.zeros((m, n))
    for group in result.groups:
        schedule = collectives[group.algorithm].schedule
        depth = reduction_depth(schedule)
        boxes = [kblocks[b][0] for b in group.blocks]
        buffer = np.concatenate(
            [partials[:, m0:m1, n0:n1].reshape(tp, -1) for m0, m1, n0, n1 in boxes], axis=1
        )
        got = collective_run(schedule, buffer)
        want = collective_reference(schedule, buffer)
        exact &= bool(np.array_equal(got.view(np.uint8), want.view(np.uint8)))
        at = 0
        for m0, m1, n0, n1 in boxes:
            size = (m1 - m0) * (n1 - n0)
            y[:, m0:m1, n0:n1] = got[:, at : at + size].reshape(tp, m1 - m0, n1 - n0)
            rows, cols = slice(m0, m1), slice(n0, n1)
            bound[rows, cols] = error_bound(
                x[rows], w[:, cols], partials[:, rows, cols], depth, result.out_dtype, share
            )
            at += size
    truth = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    error = np.abs(y.astype(np.float64) - truth)
    result.y = y
    result.bit_exact = exact
    result.error_of_bound = float((error / np.maximum(bound, 1e-300)).max())
