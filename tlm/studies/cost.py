"""``trnsim cost``: power, energy, cost (owned against cloud), goodput and interruptions per day
of a training run of ``--steps`` steps of ``--step-time-s`` on ``--chips`` chips of a
``--hardware`` (trn1, trn2, trn3, trn3-gen2, a100, h100 or a hardware file).

The step time is an input until the step-time model lands. The checkpoint is the ``--model``'s
weights, master copy and Adam moments (:func:`tlm.cluster.goodput.checkpoint_bytes`); the
failure rates are Llama 3's (:mod:`tlm.cluster.goodput`); power and cost are
:mod:`tlm.cluster.cost`'s. Reliability strategies are off unless asked for: a fast swap to a
warm spare (``--swap-s``), in-memory peer checkpoints (``--memory-checkpoint-Bps``,
``--peer-group-servers``), elastic data parallelism (``--elastic-replica-chips``,
``--reform-s``) and ``--jobs`` independent jobs (:class:`tlm.cluster.goodput.Resilience`). The
series: the interruptions per day by cause. See docs/cluster.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("cost", hardware="h100", chips=16384, step_time_s=10.0, steps=1000,
...               model="llama3-405b").results
>>> round(r.interruptions_per_day, 2), round(r.goodput_fraction, 3)
(7.76, 0.926)
"""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from ..cluster.cost import (
    DEFAULT_AMORTISATION_YEARS,
    DEFAULT_PUE,
    DEFAULT_USD_PER_KWH,
    run_cost,
)
from ..cluster.goodput import (
    DEFAULT_PEER_GROUP_SERVERS,
    DEFAULT_REFORM_S,
    DEFAULT_REPAIR_S,
    DEFAULT_RESTART_S,
    DEFAULT_SPARE_FRACTION,
    DEFAULT_STORAGE_BPS,
    Resilience,
    checkpoint_bytes,
    goodput,
)
from ..errors import FieldError
from ..hardware import HardwareError, load_hardware
from ..hardware.prices import price_footing
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import HARDWARE_ALLOWED, hardware_field, price_field, priced, with_price_footing
from .protocol import MAX_CHIPS, MAX_COUNT, InputError, Inputs, Results, Study, loaded, register
from .workload import MODEL_ALLOWED, workload_input

__all__ = [
    "RESILIENCE_FIELDS",
    "ClusterInputs",
    "CostInputs",
    "RunResults",
    "CostResults",
    "CauseRow",
    "cost_study",
    "run_figures",
]


#: The inputs that set :class:`tlm.cluster.goodput.Resilience` (``jobs``: ``trnsim cost`` only,
#: the training studies model one job on their chips).
RESILIENCE_FIELDS = (
    "swap_s",
    "memory_checkpoint_Bps",
    "peer_group_servers",
    "elastic_replica_chips",
    "reform_s",
    "jobs",
)


class ClusterInputs(Inputs):
    """Inputs every cluster study shares: the hardware, the chips, the model, and what
    goodput, power and cost depend on (``trnsim cost``, ``trnsim train``)."""

    deprecated = dict(HARDWARE_DEPRECATED)

    hardware: str = hardware_field()
    chips: int = Field(16384, ge=1, le=MAX_CHIPS, description="chips the job trains on")
    model: str = Field(
        "llama3-405b",
        description="the model trained: its checkpoint is written, its tokens set the steps",
        json_schema_extra={"allowed": MODEL_ALLOWED},
    )
    storage_Bps: float = Field(
        DEFAULT_STORAGE_BPS, gt=0, description="storage bandwidth for checkpoints (Llama 3's)"
    )
    restart_s: float = Field(
        DEFAULT_RESTART_S, ge=0, description="restart after an interruption, reading excluded"
    )
    repair_s: float = Field(
        DEFAULT_REPAIR_S, ge=0, description="repair of a failed server without a hot spare"
    )
    spares_per_server: float = Field(
        DEFAULT_SPARE_FRACTION, ge=0, le=1, description="hot spare servers per job server"
    )
    swap_s: float | None = Field(
        None,
        ge=0,
        description="hardware failure to training again on a warm spare, reading excluded "
        "(FlashRecovery: 150 s)",
        json_schema_extra={"unset": "--restart-s (no fast swap)"},
    )
    memory_checkpoint_Bps: float = Field(
        0.0,
        ge=0,
        description="in-memory checkpoints in peers' host memory (GEMINI): copy bandwidth per "
        "server, ASSUMED 50e9 (0: none, storage checkpoints only)",
    )
    peer_group_servers: int = Field(
        DEFAULT_PEER_GROUP_SERVERS,
        ge=1,
        le=64,
        description="servers of a peer group holding each other's in-memory checkpoints",
    )
    elastic_replica_chips: int = Field(
        0,
        ge=0,
        le=MAX_CHIPS,
        description="elastic data parallelism: chips of one replica, dropped on a hardware "
        "failure until its server is replaced (Llama 3 405B: 128; 0: none, failures stop the "
        "job)",
    )
    reform_s: float = Field(
        DEFAULT_REFORM_S,
        ge=0,
        description="pause to drop or re-admit an elastic replica (ASSUMED)",
    )
    pue: float = Field(DEFAULT_PUE, ge=1, le=3, description="facility power / IT power")
    usd_per_kwh: float = Field(DEFAULT_USD_PER_KWH, gt=0, description="electricity price")
    amortisation_years: float = Field(
        DEFAULT_AMORTISATION_YEARS, gt=0, description="years owned hardware is paid over"
    )
    price: str = price_field()
    oversubscription: float = Field(
        1.0, ge=1, description="scale-out Clos oversubscription at the leaves"
    )

    def device(self):
        """The hardware these inputs name, at the ``price`` they pick."""
        hw = loaded("hardware", self.hardware, load_hardware, HardwareError, HARDWARE_ALLOWED)
        return priced(hw, self.price)

    def workload(self):
        """The model these inputs name."""
        return workload_input(self.model)

    def resilience(self) -> Resilience:
        """The run's reliability strategies (:class:`tlm.cluster.goodput.Resilience`; 0 here is
        None there: the strategy is off)."""
        values = {f: getattr(self, f) for f in RESILIENCE_FIELDS if f in type(self).model_fields}
        for name in ("memory_checkpoint_Bps", "elastic_replica_chips"):
            values[name] = values[name] or None
        try:
            return Resilience(**values)
        except FieldError as error:
            raise InputError(error.field, error.value, error.allowed) from None

    def resolved_resilience(self, least_chips: int) -> dict:
        """The update that resolves the strategies' defaults (a swap as slow as the restart),
        after refusing a replica or a number of jobs larger than the (least) chip count."""
        r = self.resilience()
        for name in ("elastic_replica_chips", "jobs"):
            value = getattr(r, name)
            if value is not None and value > least_chips:
                raise InputError(name, value, f"at most the chips ({least_chips})")
        return {"swap_s": self.restart_s} if self.swap_s is None else {}

    def run_settings(self) -> tuple:
        """The run's goodput and cost settings as a search takes them
        (:data:`tlm.cluster.search.GOODPUT_SETTINGS`, ``COST_SETTINGS``)."""
        return (
            ("storage_Bps", self.storage_Bps),
            ("restart_s", self.restart_s),
            ("repair_s", self.repair_s),
            ("spare_fraction", self.spares_per_server),
            *self.resilience().options().items(),
            ("pue", self.pue),
            ("usd_per_kwh", self.usd_per_kwh),
            ("amortisation_years", self.amortisation_years),
        )

    def economics(self):
        """The cost model's scale-out fabric at these inputs' oversubscription."""
        from ..cluster.cost import Fabric

        return Fabric(oversubscription=self.oversubscription)


class CostInputs(ClusterInputs):
    """Inputs of ``trnsim cost``."""

    jobs: int = Field(
        1,
        ge=1,
        le=MAX_CHIPS,
        description="independent jobs the chips are split into, each seeing 1/jobs of the "
        "failures and of the storage; goodput is the cluster's useful chip-time",
    )
    step_time_s: float = Field(10.0, gt=0, description="time of one training step")
    steps: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="steps of the run",
        json_schema_extra={"unset": "the model file's tokens / (global batch x sequence)"},
    )

    def resolve(self) -> CostInputs:
        self.device()
        m = self.workload()
        update = self.resolved_resilience(self.chips)
        if self.steps is None:
            tokens_per_step = m.global_batch_sequences * m.seq_len
            update["steps"] = max(1, round(m.tokens / tokens_per_step))
        return self.model_copy(update=update)


class CauseRow(BaseModel):
    """One cause of interruptions."""

    cause: str
    interruptions_per_day: float
    share_fraction: float


class RunResults(Results):
    """Power, energy, cost and goodput of a run (what every cluster study reports)."""

    servers: int
    spare_servers: int
    clos_tiers: int
    switch_ports: float = Field(description="scale-out switch ports, optics included")
    chip_power_w: float
    host_power_w: float
    network_power_w: float
    facility_overhead_power_w: float = Field(description="(PUE - 1) x IT power")
    total_power_w: float
    step_energy_j: float
    interruptions_per_day: float
    mtbf_s: float = Field(description="mean time between the job's interruptions")
    checkpoint_bytes: float
    checkpoint_write_s: float
    checkpoint_interval_s: float | None = Field(
        description="Daly's optimum compute between them (none: no stop needs them)"
    )
    memory_checkpoint_write_s: float | None = Field(description="in-memory (none: not used)")
    memory_checkpoint_interval_s: float | None = Field(
        description="Daly's optimum compute between in-memory checkpoints (none: not used)"
    )
    memory_restore_fraction: float = Field(description="stops restored from peers' memory")
    elastic_drops_per_day: float = Field(description="hardware failures elastic DP absorbs")
    restart_s: float = Field(description="mean, reading the checkpoint and repairs included")
    goodput_fraction: float = Field(description="useful chip-time / wall chip-time")
    checkpoint_fraction: float
    restart_fraction: float
    lost_fraction: float = Field(description="work redone after interruptions")
    elastic_fraction: float = Field(description="run without dropped replicas, or re-forming")
    run_wall_s: float = Field(description="steps x step time / goodput")
    run_energy_j: float
    capex_usd: float = Field(description="chips, hosts and switch ports bought, spares too")
    owned_usd: float = Field(description="the run's share of the capex, and its energy")
    energy_usd: float
    cloud_usd: float = Field(description="instance-hours at the price in force (price_kind)")
    cloud_over_owned_ratio: float = Field(description="cloud cost / owned cost")


RunResults = with_price_footing(RunResults)


class CostResults(RunResults):
    """Power, energy, cost, goodput; the series: interruptions per day by cause."""

    series: list[CauseRow] = Field(default=[], exclude=True)


def cost_study(inputs: CostInputs) -> CostResults:
    """Goodput first (it stretches the run), then power, energy and cost over the wall time."""
    figures, causes = run_figures(inputs, inputs.step_time_s, inputs.steps)
    return CostResults(**figures, series=causes)


def _no_progress(inputs, g):
    """Raise the input error of a run that never progresses: the time lost per interruption
    (restart, or a warm spare's swap; repairs without a spare; elastic pauses) outgrows the
    time between interruptions. The input named is the one whose share of the lost time is
    largest."""
    stops = g["restart_fraction"] + g["lost_fraction"]
    field = "restart_s" if stops >= g["elastic_fraction"] else "reform_s"
    if field == "restart_s":  # a stop costs the restart, a hardware one the swap or the repair
        no_spare = g["no_spare_fraction"]
        swap = inputs.restart_s if inputs.swap_s is None else inputs.swap_s
        parts = {
            "restart_s": inputs.restart_s,
            "swap_s": (1 - no_spare) * swap if inputs.swap_s is not None else 0.0,
            "repair_s": no_spare * inputs.repair_s,
        }
        field = max(parts, key=parts.get)
    raise InputError(
        field,
        getattr(inputs, field),
        f"a time that leaves the run some progress: {g['interruptions_per_day']:.3g} "
        f"interruptions a day on {inputs.chips:,} chips, each costing it",
        "stops the run",
    )


def run_figures(inputs: ClusterInputs, step_time_s: float, steps: int):
    """Goodput, power, energy and cost of ``steps`` steps of ``step_time_s`` for the run the
    inputs describe: :class:`RunResults`' fields, and the interruptions by cause."""
    hw = inputs.device()
    ckpt = checkpoint_bytes(inputs.workload())
    g = goodput(
        chips=inputs.chips,
        server_chips=hw.server_chips,
        checkpoint_bytes=ckpt,
        storage_Bps=inputs.storage_Bps,
        restart_s=inputs.restart_s,
        repair_s=inputs.repair_s,
        spare_fraction=inputs.spares_per_server,
        **inputs.resilience().options(),
    ).row()
    if not g["goodput_fraction"] > 0:
        _no_progress(inputs, g)
    c = run_cost(
        hw,
        inputs.chips,
        step_time_s=step_time_s,
        steps=steps,
        goodput=g["goodput_fraction"],
        fabric=inputs.economics(),
        pue=inputs.pue,
        usd_per_kwh=inputs.usd_per_kwh,
        amortisation_years=inputs.amortisation_years,
        spare_servers=g["spare_servers"],
    )
    p = c.power
    total = g["interruptions_per_day"]
    causes = [
        CauseRow(cause=name, interruptions_per_day=g[key], share_fraction=g[key] / total)
        for name, key in (
            ("chip", "chip_per_day"),
            ("server", "server_per_day"),
            ("network", "network_per_day"),
            ("software", "software_per_day"),
        )
    ]
    figures = dict(
        servers=int(p.servers),
        spare_servers=int(g["spare_servers"]),
        clos_tiers=int(p.tiers),
        switch_ports=float(p.switch_ports),
        chip_power_w=float(p.chip_w),
        host_power_w=float(p.host_w),
        network_power_w=float(p.network_w),
        facility_overhead_power_w=float(p.facility_overhead_w),
        total_power_w=float(p.total_w),
        step_energy_j=float(c.step_energy_j),
        interruptions_per_day=total,
        mtbf_s=g["mtbf_s"],
        checkpoint_bytes=g["checkpoint_bytes"],
        checkpoint_write_s=g["checkpoint_write_s"],
        checkpoint_interval_s=_finite(g["checkpoint_interval_s"]),
        memory_checkpoint_write_s=g["memory_checkpoint_write_s"] or None,
        memory_checkpoint_interval_s=_finite(g["memory_checkpoint_interval_s"]),
        memory_restore_fraction=g["memory_restore_fraction"],
        elastic_drops_per_day=g["elastic_drops_per_day"],
        restart_s=g["restart_s"],
        goodput_fraction=g["goodput_fraction"],
        checkpoint_fraction=g["checkpoint_fraction"],
        restart_fraction=g["restart_fraction"],
        lost_fraction=g["lost_fraction"],
        elastic_fraction=g["elastic_fraction"],
        run_wall_s=float(c.run_wall_s),
        run_energy_j=float(c.run_energy_j),
        capex_usd=float(c.capex_usd),
        owned_usd=float(c.owned_usd),
        energy_usd=float(c.energy_usd),
        cloud_usd=float(c.cloud_usd),
        cloud_over_owned_ratio=float(c.cloud_usd / c.owned_usd),
        **price_footing(hw),
    )
    return figures, causes


def _finite(x: float) -> float | None:
    """``x``, or None where the model reports an interval that never ends."""
    return x if math.isfinite(x) else None


STUDY = register(
    Study(
        "cost",
        CostInputs,
        cost_study,
    )
)
