"""Goodput at scale: interruptions, checkpoints, restarts and hot spares, vectorised over chip
counts and configurations.

A synchronous training job stops whenever any of its parts fails. Interruptions arrive as a
Poisson process whose rate adds up four named causes (:class:`FailureRates`): per chip (the
accelerator and its HBM), per server (host CPU, memory, NIC, SSD, power supply, unplanned host
maintenance), per chip's share of the network (switches, cables) and per chip's share of
software faults (bugs, collective time-outs). The defaults are Meta's Llama 3 405B run (Llama
Team, *The Llama 3 Herd of Models*, 2024, Section 3.3.4 and Table 5: 419 unexpected
interruptions in a 54-day snapshot on 16,384 H100 in servers of 8), split by its
categories; no failure rate of Trainium is published, so the same rates per chip are ASSUMED
for it (a Trainium server holds 16 chips, so it has half the hosts per chip).

After each interruption the job restarts from its last checkpoint: ``restart_s`` (detect,
reschedule, initialise: ASSUMED 10 min) plus reading the checkpoint back, plus, when a failed
server finds no hot spare, the repair time. Checkpoints hold the weights, the master copy and
Adam's moments (:func:`checkpoint_bytes`) and are written at the storage bandwidth (default 2
TB/s, the sustained throughput of the Tectonic file system behind Llama 3, Section 3.3.1).
The checkpoint interval is Daly's optimum (J. T. Daly, *A higher order estimate of the optimum
checkpoint interval for restart dumps*, FGCS 22(3), 2006), Young's first-order
``sqrt(2 delta M)`` (J. W. Young, CACM 17(9), 1974) as the reference, and the goodput Daly's
exact expected run time under exponential failures:

    wall / work = M exp(R / M) (exp((tau + delta) / M) - 1) / tau

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
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..workloads.model import Model, element_bytes

__all__ = [
    "FailureRates",
    "LLAMA3",
    "DEFAULT_STORAGE_BPS",
    "DEFAULT_RESTART_S",
    "DEFAULT_REPAIR_S",
    "DEFAULT_SPARE_FRACTION",
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
        raise ValueError(f"{name} must be {allowed} (or an array of them), not {first!r}")
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
    return m * np.exp(r / m) * np.expm1((t + d) / m) / t


@dataclass(frozen=True)
class Goodput:
    """Goodput and where the rest of the time goes, per configuration (arrays of one shape).

    The fractions of wall time add up to 1: ``goodput`` (useful work), ``checkpoint`` (writing
    the checkpoints of the work kept), ``restart`` (from each interruption to training again,
    waiting for repairs included) and ``lost`` (work and partial checkpoints redone).
    """

    chips: np.ndarray
    servers: np.ndarray
    spare_servers: np.ndarray
    interruptions_per_day: np.ndarray
    chip_per_day: np.ndarray
    network_per_day: np.ndarray
    server_per_day: np.ndarray
    software_per_day: np.ndarray
    mtbf_s: np.ndarray
    checkpoint_bytes: np.ndarray
    checkpoint_write_s: np.ndarray
    checkpoint_interval_s: np.ndarray
    young_interval_s: np.ndarray
    restart_s: np.ndarray
    no_spare_fraction: np.ndarray
    goodput_fraction: np.ndarray
    checkpoint_fraction: np.ndarray
    restart_fraction: np.ndarray
    lost_fraction: np.ndarray

    def row(self, i=0) -> dict:
        """Configuration ``i``'s figures as plain numbers."""
        return {f.name: np.ravel(getattr(self, f.name))[i].item() for f in fields(self)}


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
) -> Goodput:
    """Goodput of a synchronous job (every argument a scalar or an array; they broadcast).

    Parameters
    ----------
    chips : int or array
        Chips the job trains on.
    server_chips : int or array
        Chips per server (the unit a host failure takes out and a spare replaces).
    checkpoint_bytes : float or array
        Bytes of one checkpoint (:func:`checkpoint_bytes`).
    storage_Bps : float or array
        Storage bandwidth of the cluster, bytes/s, for writing and reading checkpoints.
    restart_s : float or array
        Seconds from an interruption to training again, reading the checkpoint excluded.
    repair_s : float or array
        Seconds to repair a failed server when no hot spare takes its place.
    spare_fraction : float or array
        Hot spare servers per server of the job (rounded up to whole servers).
    interval_s : float or array, optional
        Compute between checkpoints; Daly's optimum (:func:`daly_interval_s`) by default.
    rates : FailureRates, optional
        Interruption rates (Llama 3's by default).

    Notes
    -----
    Spares: a failed chip, server or link takes its server out of the job; with ``S`` spares
    and ``lambda_hw`` such failures per second, ``lambda_hw x repair_s`` servers are under
    repair on average (Little's law), so a fraction ``max(0, 1 - S / (lambda_hw repair_s))``
    of those failures finds no spare and waits ``repair_s`` (a fluid approximation: it
    ignores the bunching of failures). Software faults restart on the same servers.
    """
    total_h, chip_h, net_h, host_h, soft_h, servers = _rates(chips, server_chips, rates)
    ckpt = _positive("checkpoint_bytes", checkpoint_bytes)
    bw = _positive("storage_Bps", storage_Bps)
    r0 = _positive("restart_s", restart_s, allow_zero=True)
    repair = _positive("repair_s", repair_s, allow_zero=True)
    spare_f = _positive("spare_fraction", spare_fraction, allow_zero=True)
    lam = total_h / 3600.0
    mtbf = 1.0 / lam
    write = ckpt / bw
    spares = np.ceil(servers * spare_f)
    hw_per_s = (chip_h + net_h + host_h) / 3600.0
    out_for_repair = hw_per_s * repair
    with np.errstate(divide="ignore", invalid="ignore"):
        no_spare = np.where(out_for_repair > 0, 1 - spares / out_for_repair, 0.0)
    no_spare = np.clip(no_spare, 0.0, 1.0)
    restart = r0 + write + (hw_per_s / lam) * no_spare * repair  # read back at write speed
    tau = (
        daly_interval_s(write, mtbf) if interval_s is None else _positive("interval_s", interval_s)
    )
    wall_per_work = daly_wall_per_work(tau, write, restart, mtbf)
    g = 1.0 / wall_per_work
    ckpt_f = g * write / tau  # one write per interval of work
    # what is left of the wall time is restarts and redone work; Daly's total is not the sum of
    # their first-order shares (interruptions x restart, interruptions x half an interval), so
    # it is split between them in proportion to those (clipping restarts to the rest made the
    # redone work 0 where interruptions are many)
    rest = 1 - g - ckpt_f
    first_restart, first_lost = lam * restart, lam * (tau + write) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(
            first_restart + first_lost > 0, first_restart / (first_restart + first_lost), 0.0
        )
    restart_f = rest * share
    lost_f = rest - restart_f
    shape = np.broadcast_shapes(*(np.shape(x) for x in (g, servers, spares)))
    b = lambda x: np.broadcast_to(np.asarray(x, float), shape).copy()  # noqa: E731
    return Goodput(
        chips=b(chips),
        servers=b(servers),
        spare_servers=b(spares),
        interruptions_per_day=b(total_h * 24),
        chip_per_day=b(chip_h * 24),
        network_per_day=b(net_h * 24),
        server_per_day=b(host_h * 24),
        software_per_day=b(soft_h * 24),
        mtbf_s=b(mtbf),
        checkpoint_bytes=b(ckpt),
        checkpoint_write_s=b(write),
        checkpoint_interval_s=b(tau),
        young_interval_s=b(young_interval_s(write, mtbf)),
        restart_s=b(restart),
        no_spare_fraction=b(no_spare),
        goodput_fraction=b(g),
        checkpoint_fraction=b(ckpt_f),
        restart_fraction=b(restart_f),
        lost_fraction=b(lost_f),
    )
