"""Goodput at scale: interruptions, checkpoints, restarts, hot spares and the strategies of
large operators, vectorised over chip counts and configurations.

Interruptions are a Poisson process of four named causes (:class:`FailureRates`, Llama 3
405B's rates by default, ASSUMED for Trainium); each restarts the job from its last checkpoint
(:func:`checkpoint_bytes`), taken at Daly's optimum interval, and the goodput is Daly's
expected run time under exponential failures:

    wall / work = M exp(R / M) (exp((tau + delta) / M) - 1) / tau

The strategies (:class:`Resilience`, all off by default): a fast swap to a warm spare,
in-memory peer checkpoints, elastic data parallelism and several jobs. Sources, defaults and
what is assumed: docs/cluster.md, "Goodput at scale".

Examples
--------
>>> from tlm.cluster.goodput import goodput, interruptions_per_day
>>> round(float(interruptions_per_day(16384, server_chips=8)), 2)    # Llama 3: 419 / 54
7.76
>>> r = goodput(chips=16384, server_chips=8, checkpoint_bytes=5.7e12)
>>> round(float(r.goodput_fraction), 3), round(float(r.checkpoint_interval_s))
(0.926, 250)
>>> import numpy as np            # a 10-minute restart is longer than the MTBF at 1M chips
>>> many = goodput(chips=np.array([1024, 16384, 131072, 1048576]), server_chips=8,
...                checkpoint_bytes=5.7e12)
>>> (many.interruptions_per_day).round(1).tolist(), many.goodput_fraction.round(3).tolist()
([0.5, 7.8, 62.1, 496.6], [0.991, 0.926, 0.608, 0.026])
>>> fast = goodput(chips=1048576, server_chips=8, checkpoint_bytes=5.7e12, swap_s=150,
...                memory_checkpoint_Bps=50e9, elastic_replica_chips=128, jobs=8)
>>> round(float(fast.goodput_fraction), 3)
0.867
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..errors import FieldError
from ..workloads.model import Model, element_bytes

__all__ = [
    "FailureRates",
    "LLAMA3",
    "DEFAULT_STORAGE_BPS",
    "DEFAULT_RESTART_S",
    "DEFAULT_REPAIR_S",
    "DEFAULT_SPARE_FRACTION",
    "FAST_SWAP_S",
    "DEFAULT_MEMORY_CHECKPOINT_BPS",
    "DEFAULT_PEER_GROUP_SERVERS",
    "DEFAULT_REFORM_S",
    "LLAMA3_REPLICA_CHIPS",
    "Resilience",
    "Goodput",
    "checkpoint_bytes",
    "interruptions_per_day",
    "young_interval_s",
    "daly_interval_s",
    "daly_wall_per_work",
    "goodput",
]

_DAY_S = 86400.0

#: Llama 3's 54-day snapshot (Table 5): chips, chips per server, days, and the 419 unexpected
#: interruptions by category. GPU: faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17,
#: silent data corruption 6, thermal interface and sensor 6. Host: unplanned host maintenance
#: 32, NIC 7, SSD 3, power supply 3, chassis 2, IO expansion board 2, CPU 2, system memory 2.
#: Network: switch or cable 35. Software: software bug 54, dependency 2, NCCL watchdog 7.
LLAMA3 = {
    "chips": 16384,
    "server_chips": 8,
    "days": 54,
    "chip": 148 + 72 + 19 + 17 + 6 + 6,
    "server": 32 + 7 + 3 + 3 + 2 + 2 + 2 + 2,
    "network": 35,
    "software": 54 + 2 + 7,
    "unexpected": 419,
    "planned": 47,
}


@dataclass(frozen=True)
class FailureRates:
    """Interruptions per hour of each cause: per chip, per server, and per chip's share of the
    network and of software faults. Defaults: Llama 3's counts over its chip- and server-hours
    (:data:`LLAMA3`)."""

    chip_per_hour: float = LLAMA3["chip"] / (LLAMA3["chips"] * LLAMA3["days"] * 24)
    server_per_hour: float = LLAMA3["server"] / (
        LLAMA3["chips"] / LLAMA3["server_chips"] * LLAMA3["days"] * 24
    )
    network_per_chip_hour: float = LLAMA3["network"] / (LLAMA3["chips"] * LLAMA3["days"] * 24)
    software_per_chip_hour: float = LLAMA3["software"] / (LLAMA3["chips"] * LLAMA3["days"] * 24)

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value >= 0):
                raise ValueError(f"{f.name} must be a number >= 0, not {value!r}")


#: Storage write and read bandwidth of the whole cluster: Tectonic's sustained 2 TB/s (Llama 3,
#: Section 3.3.1; 7 TB/s peak).
DEFAULT_STORAGE_BPS = 2e12
#: Time from an interruption to training again, without reading the checkpoint: ASSUMED 10 min
#: (detection, rescheduling, process start, collective initialisation; not published).
DEFAULT_RESTART_S = 600.0
#: Time to repair or replace a failed server when no hot spare takes its place: ASSUMED 48 h.
DEFAULT_REPAIR_S = 48 * 3600.0
#: Hot spare servers as a fraction of the job's servers: ASSUMED 2 %.
DEFAULT_SPARE_FRACTION = 0.02
#: Time from a hardware failure to training again on a warm spare (the spare's processes
#: started, the collectives re-formed; reading the checkpoint excluded): 150 s, FlashRecovery's
#: whole restoration (detection to training) on 4,800 devices, nearly constant with scale
#: (*FlashRecovery: Fast and Low-Cost Recovery from Failures for Large-Scale Training of
#: LLMs*, arXiv 2509.03047, 2025). Used where a swap is asked for; :func:`goodput`'s default
#: is the full ``restart_s`` (no fast swap, as before).
FAST_SWAP_S = 150.0
#: Bandwidth at which a server copies its share of an in-memory checkpoint to host memory and
#: to its peers, bytes/s per server: ASSUMED 50 GB/s (an eighth of trn2.48xlarge's 3.2 Tb/s
#: EFA, the rest left to training traffic; GEMINI interleaves the copies with it).
DEFAULT_MEMORY_CHECKPOINT_BPS = 50e9
#: Servers of a peer group holding each other's in-memory checkpoints (GEMINI's group
#: placement): ASSUMED 2, the smallest group that survives one server's failure.
DEFAULT_PEER_GROUP_SERVERS = 2
#: Pause of the whole job while elastic data parallelism drops a failed replica or re-admits a
#: repaired one (re-form the data-parallel collectives; no process restart, no checkpoint
#: read): ASSUMED 60 s.
DEFAULT_REFORM_S = 60.0
#: Chips of one data-parallel replica of Llama 3 405B: tensor 8 x pipeline 16 (Llama 3, Table 4).
LLAMA3_REPLICA_CHIPS = 128


def checkpoint_bytes(
    model: Model, *, weights="bf16", optimizer="fp32", master="fp32", parameters=None
):
    """Bytes of one checkpoint of ``model``: the weights, the master copy (none when it is the
    weights' own format) and Adam's two moments, as :func:`tlm.cluster.memory_per_chip`
    counts the optimizer state; gradients and activations are not saved.

    >>> from tlm.workloads import load_model
    >>> round(checkpoint_bytes(load_model("llama3-405b")) / 1e12, 2)     # 14 B per parameter
    5.68
    """
    n = model.parameters if parameters is None else parameters
    master_b = 0 if master == weights else element_bytes(master)
    return n * (element_bytes(weights) + master_b + 2 * element_bytes(optimizer))


def _positive(name, value, allow_zero=False):
    a = np.asarray(value, dtype=float)
    bad = (a < 0) if allow_zero else (a <= 0)
    if np.any(bad | np.isnan(a)):
        first = a[bad | np.isnan(a)].ravel()[0].item() if a.ndim else a.item()
        allowed = "a number >= 0" if allow_zero else "a positive number"
        raise FieldError(name, first, f"{allowed} (or an array of them)")
    return a


def interruptions_per_day(chips, *, server_chips, rates: FailureRates | None = None):
    """Expected unexpected interruptions per day of a job on ``chips`` chips in servers of
    ``server_chips`` (vectorised): the sum of every cause's rate.

    >>> round(float(interruptions_per_day(16384, server_chips=16)), 2)   # half the hosts
    7.27
    """
    return _rates(chips, server_chips, rates)[0] * 24


def _rates(chips, server_chips, rates):
    rates = rates or FailureRates()
    n = _positive("chips", chips)
    per = _positive("server_chips", server_chips)
    servers = np.ceil(n / per)
    chip = n * rates.chip_per_hour
    net = n * rates.network_per_chip_hour
    host = servers * rates.server_per_hour
    soft = n * rates.software_per_chip_hour
    return chip + net + host + soft, chip, net, host, soft, servers


def young_interval_s(write_s, mtbf_s):
    """Young's first-order optimum checkpoint interval ``sqrt(2 delta M)`` (seconds)."""
    return np.sqrt(2 * np.asarray(write_s, float) * np.asarray(mtbf_s, float))


def daly_interval_s(write_s, mtbf_s):
    """Daly's higher-order optimum interval of compute between checkpoints (seconds):
    ``sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9] - delta`` for
    ``delta < 2M``, else ``M``.

    >>> round(float(daly_interval_s(60, 86400)), 1)     # Young: 3220.0
    3180.1
    """
    d, m = np.asarray(write_s, float), np.asarray(mtbf_s, float)
    x = d / (2 * m)
    tau = np.sqrt(2 * d * m) * (1 + np.sqrt(x) / 3 + x / 9) - d
    return np.where(d < 2 * m, tau, m)


def daly_wall_per_work(interval_s, write_s, restart_s, mtbf_s):
    """Expected wall time per unit of useful work under exponential failures (Daly 2006, eq.
    for ``T_w``): ``M exp(R/M) (exp((tau + delta)/M) - 1) / tau``; 1 + delta/tau as M grows."""
    t, d, r, m = (np.asarray(x, float) for x in (interval_s, write_s, restart_s, mtbf_s))
    with np.errstate(over="ignore"):  # a restart many MTBFs long: no work done (inf)
        return m * np.exp(r / m) * np.expm1((t + d) / m) / t


@dataclass(frozen=True)
class Resilience:
    """The reliability strategies of a run (every default is off: today's model).

    Parameters
    ----------
    swap_s : float, optional
        Seconds from a hardware failure to training again on a warm spare, reading the
        checkpoint excluded (:data:`FAST_SWAP_S` is published); unset: ``restart_s``.
    memory_checkpoint_Bps : float, optional
        In-memory (peer) checkpoints, GEMINI's scheme: bytes/s at which each server copies its
        share to host memory and to its peers; unset: none (storage only).
    peer_group_servers : int
        Servers of a peer group, each holding the group's in-memory checkpoints.
    elastic_replica_chips : int, optional
        Elastic data parallelism: chips of one data-parallel replica, dropped on a hardware
        failure and re-admitted after the repair; unset: none (the job stops).
    reform_s : float
        Seconds the job pauses to drop or re-admit a replica.
    jobs : int
        Independent jobs the cluster is split into.

    >>> Resilience(jobs=4).options()["jobs"]
    4
    >>> Resilience(peer_group_servers=0)
    Traceback (most recent call last):
    tlm.errors.FieldError: peer_group_servers must be an integer >= 1, not 0
    """

    swap_s: float | None = None
    memory_checkpoint_Bps: float | None = None
    peer_group_servers: int = DEFAULT_PEER_GROUP_SERVERS
    elastic_replica_chips: int | None = None
    reform_s: float = DEFAULT_REFORM_S
    jobs: int = 1

    def __post_init__(self):
        checks = {
            "swap_s": (True, False, True, "a finite number >= 0, or None"),
            "memory_checkpoint_Bps": (True, False, False, "a finite number > 0, or None"),
            "peer_group_servers": (False, True, False, "an integer >= 1"),
            "elastic_replica_chips": (True, True, False, "an integer >= 1, or None"),
            "reform_s": (False, False, True, "a finite number >= 0"),
            "jobs": (False, True, False, "an integer >= 1"),
        }
        for name, (optional, integer, zero, allowed) in checks.items():
            value = getattr(self, name)
            if value is None and optional:
                continue
            kind = int if integer else (int, float)
            ok = isinstance(value, kind) and not isinstance(value, bool)
            ok = ok and np.isfinite(value) and (value >= 0 if zero else value > 0)
            if not ok:
                raise FieldError(name, value, allowed)

    def options(self) -> dict:
        """The keyword arguments of :func:`goodput` these strategies set."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class Goodput:
    """Goodput and where the rest of the time goes, per configuration (arrays of one shape).

    The fractions of wall time add up to 1: ``goodput`` (useful work), ``checkpoint`` (writing
    the checkpoints of the work kept, in memory and to storage), ``restart`` (from each stop to
    training again, waiting for repairs included), ``lost`` (work and partial checkpoints
    redone) and ``elastic`` (running without the replicas dropped, and re-forming).
    Rates and counts are the cluster's; ``mtbf_s``, the intervals and the write times are one
    job's.
    """

    chips: np.ndarray
    servers: np.ndarray
    spare_servers: np.ndarray
    jobs: np.ndarray
    interruptions_per_day: np.ndarray
    chip_per_day: np.ndarray
    network_per_day: np.ndarray
    server_per_day: np.ndarray
    software_per_day: np.ndarray
    elastic_drops_per_day: np.ndarray
    mtbf_s: np.ndarray
    checkpoint_bytes: np.ndarray
    checkpoint_write_s: np.ndarray
    checkpoint_interval_s: np.ndarray
    young_interval_s: np.ndarray
    memory_checkpoint_write_s: np.ndarray
    memory_checkpoint_interval_s: np.ndarray
    memory_restore_fraction: np.ndarray
    restart_s: np.ndarray
    no_spare_fraction: np.ndarray
    goodput_fraction: np.ndarray
    checkpoint_fraction: np.ndarray
    restart_fraction: np.ndarray
    lost_fraction: np.ndarray
    elastic_fraction: np.ndarray

    def row(self, i=0) -> dict:
        """Configuration ``i``'s figures as plain numbers."""
        return {f.name: np.ravel(getattr(self, f.name))[i].item() for f in fields(self)}


def _level(rate, write, restart, interval=None):
    """Daly's wall time per work of one checkpoint level, and its interval: Daly's optimum, or
    ``interval`` if given. Where nothing fails that the level recovers, a level at Daly's
    optimum writes no checkpoint (its interval is inf) and one at ``interval`` only writes."""
    on = rate > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        mtbf = 1 / np.where(on, rate, 1.0)
        if interval is None:
            tau = np.where(on, daly_interval_s(write, mtbf), np.inf)
            idle = 1.0
        else:
            tau = np.asarray(interval, float)
            idle = 1 + write / tau
        wall = np.where(on, daly_wall_per_work(np.where(on, tau, 1.0), write, restart, mtbf), idle)
    return wall, tau


def goodput(
    *,
    chips,
    server_chips,
    checkpoint_bytes,
    storage_Bps=DEFAULT_STORAGE_BPS,
    restart_s=DEFAULT_RESTART_S,
    repair_s=DEFAULT_REPAIR_S,
    spare_fraction=DEFAULT_SPARE_FRACTION,
    interval_s=None,
    rates: FailureRates | None = None,
    swap_s=None,
    memory_checkpoint_Bps=None,
    peer_group_servers=DEFAULT_PEER_GROUP_SERVERS,
    elastic_replica_chips=None,
    reform_s=DEFAULT_REFORM_S,
    jobs=1,
) -> Goodput:
    """Goodput of synchronous jobs (every argument a scalar or an array; they broadcast).

    Parameters
    ----------
    chips : int or array
        Chips of the cluster (of the job, with one job).
    server_chips : int or array
        Chips per server (the unit a host failure takes out and a spare replaces).
    checkpoint_bytes : float or array
        Bytes of one job's checkpoint (:func:`checkpoint_bytes`).
    storage_Bps : float or array
        Storage bandwidth of the cluster, bytes/s, for writing and reading checkpoints
        (shared evenly by the jobs).
    restart_s : float or array
        Seconds from a stop to training again, reading the checkpoint excluded.
    repair_s : float or array
        Seconds to repair a failed server when no hot spare takes its place.
    spare_fraction : float or array
        Hot spare servers per server of the cluster (rounded up to whole servers).
    interval_s : float or array, optional
        Compute between storage checkpoints; Daly's optimum (:func:`daly_interval_s`) by
        default.
    rates : FailureRates, optional
        Interruption rates (Llama 3's by default).
    swap_s, memory_checkpoint_Bps, peer_group_servers, elastic_replica_chips, reform_s, jobs
        The reliability strategies (:class:`Resilience`; off by default).

    Notes
    -----
    Spares: a failed chip, server or link takes its server out; with ``S`` spares and
    ``lambda_hw`` such failures per second, ``lambda_hw x repair_s`` servers are under repair
    on average (Little's law), so a fraction ``ns = max(0, 1 - S / (lambda_hw repair_s))`` of
    those failures finds no spare and waits ``repair_s`` (a fluid approximation: it ignores the
    bunching of failures). A hardware failure with a spare costs ``swap_s``, one without
    ``restart_s + repair_s``; a software fault restarts on the same servers (``restart_s``).

    Jobs: each of the ``jobs`` sees ``1/jobs`` of the failures and of the storage bandwidth.

    Elastic data parallelism: a hardware failure drops the replicas of its server (at least
    one replica) and the job goes on, pausing ``reform_s``, without them until the server is
    replaced (``swap_s``, or ``repair_s`` without a spare), then pauses ``reform_s`` to
    re-admit them; software faults still stop the job. With one replica it is the baseline.

    In-memory checkpoints (GEMINI): each server writes ``checkpoint_bytes / servers x
    peer_group_servers`` at ``memory_checkpoint_Bps`` (so the write shrinks as the job grows);
    a software fault or a hardware failure restores from memory unless every other server of
    the failed one's group fails too before the replacement holds the copy again (``p =
    (1 - exp(-lambda_server W))^(group - 1)``, ``W`` the swap or repair plus one write;
    independent failures ASSUMED). Those restore from storage, which is kept at Daly's
    interval for their rate alone. The two levels' slowdowns multiply (each level's Daly wall
    time over the other's timeline: a first-order approximation of a two-level scheme).
    """
    total_h, chip_h, net_h, host_h, soft_h, servers = _rates(chips, server_chips, rates)
    ckpt = _positive("checkpoint_bytes", checkpoint_bytes)
    bw = _positive("storage_Bps", storage_Bps)
    r0 = _positive("restart_s", restart_s, allow_zero=True)
    repair = _positive("repair_s", repair_s, allow_zero=True)
    spare_f = _positive("spare_fraction", spare_fraction, allow_zero=True)
    swap = r0 if swap_s is None else _positive("swap_s", swap_s, allow_zero=True)
    group = _integer("peer_group_servers", peer_group_servers)
    reform = _positive("reform_s", reform_s, allow_zero=True)
    n_jobs = _integer("jobs", jobs)
    n = np.asarray(chips, float)
    too_many = n_jobs > n
    if np.any(too_many):
        first = np.broadcast_to(n_jobs, too_many.shape)[too_many][0].item()
        raise FieldError("jobs", int(first), "an integer from 1 to the chips (or an array)")
    job_chips = n / n_jobs
    job_servers = servers / n_jobs
    # per job, per second
    hw_cluster = (chip_h + net_h + host_h) / 3600.0
    lam_hw = hw_cluster / n_jobs
    lam_sw = soft_h / 3600.0 / n_jobs
    spares = np.ceil(servers * spare_f)
    out_for_repair = hw_cluster * repair
    with np.errstate(divide="ignore", invalid="ignore"):
        no_spare = np.where(out_for_repair > 0, 1 - spares / out_for_repair, 0.0)
    no_spare = np.clip(no_spare, 0.0, 1.0)
    replaced_s = (1 - no_spare) * swap + no_spare * repair  # a failed server out of the job
    hw_path = (1 - no_spare) * swap + no_spare * (r0 + repair)  # ... stopping it meanwhile

    # elastic data parallelism: the replicas a hardware failure drops
    if elastic_replica_chips is None:
        dropped = job_chips
    else:
        replica = _integer("elastic_replica_chips", elastic_replica_chips)
        per = np.asarray(server_chips, float)
        dropped = np.ceil(per / replica) * replica
    elastic = dropped < job_chips
    lam_el = np.where(elastic, lam_hw, 0.0)
    lam_hw_stop = lam_hw - lam_el
    capacity = 1 - np.minimum(1.0, lam_el * replaced_s * dropped / job_chips)
    running = np.clip(1 - 2 * lam_el * reform, 0.0, 1.0)  # a pause to drop, one to re-admit
    with np.errstate(divide="ignore"):
        elastic_wall = 1 / (capacity * running)

    # two levels of checkpoints: memory (when asked for) and storage
    write = ckpt / (bw / n_jobs)
    if memory_checkpoint_Bps is None:
        memory_on, mem_write = np.asarray(False), np.asarray(0.0)
        p_lost = np.asarray(1.0)
    else:
        mem_bw = _positive("memory_checkpoint_Bps", memory_checkpoint_Bps)
        memory_on = np.asarray(True)
        mem_write = ckpt * group / (job_servers * mem_bw)
        per_server = hw_cluster / servers
        p_lost = (-np.expm1(-per_server * (replaced_s + mem_write))) ** (group - 1)
    q_sw = np.where(memory_on, 1.0, 0.0)  # share of each stop restored from memory
    q_hw = np.where(memory_on, 1 - p_lost, 0.0)
    lam1 = q_sw * lam_sw + q_hw * lam_hw_stop
    lam2 = (1 - q_sw) * lam_sw + (1 - q_hw) * lam_hw_stop
    with np.errstate(divide="ignore", invalid="ignore"):
        path1 = (q_sw * lam_sw * r0 + q_hw * lam_hw_stop * hw_path) / lam1
        path2 = ((1 - q_sw) * lam_sw * r0 + (1 - q_hw) * lam_hw_stop * hw_path) / lam2
    restart1 = np.where(lam1 > 0, path1, 0.0) + mem_write  # read back at the write's speed
    restart2 = np.where(lam2 > 0, path2, 0.0) + write
    wall1, tau1 = _level(lam1, mem_write, restart1)
    wall2, tau = _level(
        lam2, write, restart2, None if interval_s is None else _positive("interval_s", interval_s)
    )
    lam = lam1 + lam2
    mtbf2 = 1 / np.where(lam2 > 0, lam2, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mtbf = 1.0 / lam
        restart = np.where(lam > 0, (lam1 * restart1 + lam2 * restart2) / lam, restart2)
        g = 1.0 / (wall1 * wall2 * elastic_wall)
        ckpt_f = g * (np.where(lam1 > 0, mem_write / tau1, 0.0) + wall1 * write / tau)
    elastic_f = np.where(np.isfinite(elastic_wall), 1 - 1 / elastic_wall, 1.0)
    # what is left of the wall time is restarts and redone work; Daly's total is not the sum of
    # their first-order shares (interruptions x restart, interruptions x half an interval), so
    # it is split between them in proportion to those (clipping restarts to the rest made the
    # redone work 0 where interruptions are many)
    rest = np.clip(1 - g - ckpt_f - elastic_f, 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        first_restart = lam1 * restart1 + lam2 * restart2
        first_lost = np.where(lam1 > 0, lam1 * (tau1 + mem_write) / 2, 0.0) + np.where(
            lam2 > 0, lam2 * (tau + write) / 2, 0.0
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(
            first_restart + first_lost > 0, first_restart / (first_restart + first_lost), 0.0
        )
    restart_f = rest * share
    lost_f = rest - restart_f
    parts = (g, servers, spares, n_jobs, memory_on, p_lost, elastic)
    shape = np.broadcast_shapes(*(np.shape(x) for x in parts))
    b = lambda x: np.broadcast_to(np.asarray(x, float), shape).copy()  # noqa: E731
    return Goodput(
        chips=b(chips),
        servers=b(servers),
        spare_servers=b(spares),
        jobs=b(n_jobs),
        interruptions_per_day=b(total_h * 24),
        chip_per_day=b(chip_h * 24),
        network_per_day=b(net_h * 24),
        server_per_day=b(host_h * 24),
        software_per_day=b(soft_h * 24),
        elastic_drops_per_day=b(lam_el * n_jobs * 86400),
        mtbf_s=b(mtbf),
        checkpoint_bytes=b(ckpt),
        checkpoint_write_s=b(write),
        checkpoint_interval_s=b(tau),
        young_interval_s=b(np.where(lam2 > 0, young_interval_s(write, mtbf2), np.inf)),
        memory_checkpoint_write_s=b(mem_write),
        memory_checkpoint_interval_s=b(np.where(lam1 > 0, tau1, np.inf)),
        memory_restore_fraction=b(lam1 / np.where(lam > 0, lam, 1.0)),
        restart_s=b(restart),
        no_spare_fraction=b(no_spare),
        goodput_fraction=b(g),
        checkpoint_fraction=b(ckpt_f),
        restart_fraction=b(restart_f),
        lost_fraction=b(lost_f),
        elastic_fraction=b(elastic_f),
    )


def _integer(name, value):
    """``value`` as an array of integers >= 1 (a FieldError naming ``name`` otherwise)."""
    a = np.asarray(value, dtype=float)
    bad = (a < 1) | np.isnan(a) | (np.mod(a, 1) != 0)
    if np.any(bad):
        first = (a[bad] if a.ndim else a).ravel()[0].item()
        raise FieldError(name, first, "an integer >= 1 (or an array of them)")
    return a
