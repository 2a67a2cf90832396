"""Where a model replica runs: the system (servers or UltraServers of a hardware), its network,
the parallel layout's checks, the formats, and the named fixed costs.

A replica is ``tp x pp`` chips: ``tp`` innermost (stride 1: on a trn2 server the 4x4 torus
plane, on an UltraServer its 4x4x4 torus' sub-rings), ``pp`` stages at stride ``tp``. Experts
(``ep``) are split across the tensor-parallel group: ``ep`` must divide ``tp`` and the experts;
each expert's FFN is split ``tp / ep`` ways (expert tensor parallelism). With
``dp_attention`` a stage is ``ep`` chips instead (a multiple of ``tp`` dividing the experts:
attention data-parallel over ``ep / tp`` groups, :mod:`tlm.inference.expert`). The system sets the
network the collectives are priced on: ``server`` is the hardware's server (trn2: the
trn2.48xlarge 4x4 torus, its own system preset; servers joined by EFA for ``Nxserver``),
``ultraserver`` its scale-up domain (trn2: 64 chips, 4x4x4).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources

from ..cluster.memory import DEFAULT_RESERVE_BYTES
from ..cluster.network import Network
from ..costs import OpCosts
from ..hardware import HARDWARE, Hardware, HardwareError, load_hardware
from ..system.graph import SYSTEMS
from ..workloads.model import Model, element_bytes, load_model
from ..workloads.operators import tp_allowed
from .errors import InferenceInputError
from .memory import DEFAULT_BLOCK_TOKENS

__all__ = [
    "FORMATS",
    "FIXED_COSTS",
    "FixedCosts",
    "ReplicaSpec",
    "fixed_costs",
    "system_chips",
    "network_for",
    "costs_for",
    "check_layout",
    "weight_bytes_per_element",
    "ACTIVATION_FORMAT",
]

#: Formats of the weights and the GEMMs' inputs (``fmt``) and of the KV cache (``kv_fmt``),
#: with the :mod:`tlm.formats` name each stores as: FP8 is the tensor engine's E4M3. Either
#: name is taken (:func:`check_format`); the model keys its costs by the first.
FORMATS = {"bf16": "bf16", "fp8": "fp8_e4m3"}
_BY_FORMAT_NAME = {name: key for key, name in FORMATS.items()}
#: Activations between operators stay in BF16 in HBM (an FP8 GEMM quantises its input on the
#: way in): the format of hidden states, Q/K/V, attention outputs and collectives.
ACTIVATION_FORMAT = "bf16"


def weight_bytes_per_element(fmt: str) -> float:
    """Bytes of one weight in ``fmt`` (``bf16`` or ``fp8_e4m3``)."""
    return element_bytes(FORMATS[check_format("fmt", fmt)])


def check_format(name: str, fmt) -> str:
    """The model's key (:data:`FORMATS`) of format ``fmt``, given by its key or by its
    :mod:`tlm.formats` name (``fp8_e4m3`` is ``fp8``); :class:`InferenceInputError` if the
    model has no such format."""
    key = _BY_FORMAT_NAME.get(fmt, fmt) if isinstance(fmt, str) else fmt
    if key not in FORMATS:
        raise InferenceInputError(name, fmt, f"one of {', '.join(FORMATS.values())}")
    return key


def as_model(model) -> Model:
    """A :class:`Model` or a model name or file (:func:`tlm.workloads.load_model`)."""
    return model if isinstance(model, Model) else _model_named(model)


def as_hardware(hardware) -> Hardware:
    """A :class:`Hardware` or a hardware name or file (:func:`load_hardware`)."""
    if isinstance(hardware, Hardware):
        return hardware
    try:
        return hardware_named(hardware)
    except HardwareError:
        raise InferenceInputError(
            "hardware", hardware, f"one of {', '.join(HARDWARE)} or a hardware file"
        ) from None


# A shipped name is loaded once a process (a file is read again: it may have changed); the
# figures derived from what it loads are cached on its content.
def _model_named(name) -> Model:
    if isinstance(name, str) and not name.endswith(".toml"):
        return _shipped_model(name)
    return load_model(name)


@cache
def _shipped_model(name: str) -> Model:
    return load_model(name)


def hardware_named(name) -> Hardware:
    """A hardware name (loaded once a process) or file (read each time)."""
    if isinstance(name, str) and name in HARDWARE:
        return _shipped_hardware(name)
    return load_hardware(name)


@cache
def _shipped_hardware(name: str) -> Hardware:
    return load_hardware(name)


_SYSTEM = re.compile(r"(?:(\d+)x)?(server|ultraserver)")


def system_chips(hw: Hardware, system) -> int:
    """Chips of ``system`` (``server``, ``ultraserver``, ``Nxserver``, ``Nxultraserver``) of
    ``hw``; an int is taken as the chips themselves (a multiple of nothing: any count).

    Raises
    ------
    InferenceInputError
        An unknown system, or ``ultraserver`` on hardware whose scale-up domain is the server.
    """
    if isinstance(system, int) and not isinstance(system, bool):
        if system < 1:
            raise InferenceInputError("system", system, "a positive number of chips")
        return system
    match = _SYSTEM.fullmatch(system) if isinstance(system, str) else None
    if not match or (match[1] is not None and int(match[1]) < 1):
        raise InferenceInputError(
            "system", system, "server, ultraserver, Nxserver or Nxultraserver"
        )
    n = int(match[1] or 1)
    if match[2] == "server":
        return n * hw.server_chips
    if hw.scale_up_chips <= hw.server_chips:
        raise InferenceInputError(
            "system",
            system,
            f"server or Nxserver for {hw.name} (its scale-up domain is the server of "
            f"{hw.server_chips} chips)",
        )
    return n * hw.scale_up_chips


def server_system(hw: Hardware, system) -> str | None:
    """The system preset of ``hw``'s server when the replica is built of servers and the
    server has one of its own (trn2: ``trn2-server``, whose servers talk over EFA)."""
    if not isinstance(system, str) or not system.endswith("server") or "ultra" in system:
        return None
    name = f"{hw.chip_preset}-server" if hw.chip_preset else None
    return name if name in SYSTEMS and name != hw.system else None


def network_for(hw: Hardware, system) -> Network:
    """The network the replica's collectives run on: the server's own system preset for a
    system of servers (trn2: the 4x4 torus, EFA between servers), else the hardware's (its
    scale-up domain: the trn2 UltraServer, an 8-GPU NVSwitch board). One per hardware and
    server preset (it keeps the closed forms it works out)."""
    return _network(hw, server_system(hw, system))


@cache
def _network(hw: Hardware, server: str | None) -> Network:
    return Network.for_hardware(replace(hw, system=server) if server else hw)


@cache
def costs_for(hw: Hardware) -> OpCosts:
    """The chip's operator costs (calibrated for a Trainium preset, the roofline for a GPU)."""
    return OpCosts.for_hardware(hw)


@dataclass(frozen=True)
class ReplicaSpec:
    """One model replica: what it serves, on which chips, in which layout and formats -
    validated once, in the constructor, and hashable (the figures derived from it are cached
    on it).

    Parameters
    ----------
    model : Model or str
        A model or a model name or file (:func:`tlm.workloads.load_model`).
    hardware : Hardware or str
        A hardware or its name or file (:func:`tlm.hardware.load_hardware`).
    system : str or int
        ``server``, ``ultraserver``, ``Nxserver``, ``Nxultraserver``, or a chip count: the
        chips the replica may use (its stages must divide them) and its network.
    tp, pp, ep : int
        Tensor, pipeline and expert parallelism.
    dp_attention : bool
        Attention data-parallel over ``ep / tp`` groups of ``tp`` chips, the experts over all
        ``ep`` chips of a stage (:mod:`tlm.inference.expert`); else the experts are split
        within the tensor-parallel group.
    micro_batches : int, optional
        Micro-batches an iteration is split into to fill the stages
        (:mod:`tlm.inference.pipeline`); default ``pp``.
    fmt, kv_fmt : str
        ``bf16`` or ``fp8``: the weights and GEMM inputs (a format the chip has); the KV cache.
    block_tokens : int
        KV page size in tokens.
    reserve_bytes : float
        Runtime reserve per chip.
    max_tokens : int
        The largest iteration (tokens) the KV capacity leaves room for.
    max_sequences : int, optional
        The sequences that iteration samples (the LM head's rows); default ``max_tokens``.
    extra_weights_bytes, extra_kv_per_token_bytes : float
        Memory per chip of what shares the chips (a draft model).

    Raises
    ------
    InferenceInputError
        Naming the field, its value and what is allowed.
    """

    model: Model
    hardware: Hardware
    system: str | int = "server"
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp_attention: bool = False
    micro_batches: int | None = None
    fmt: str = "bf16"
    kv_fmt: str = "bf16"
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    reserve_bytes: float = DEFAULT_RESERVE_BYTES
    max_tokens: int = 8192
    max_sequences: int | None = None
    extra_weights_bytes: float = 0.0
    extra_kv_per_token_bytes: float = 0.0

    def __post_init__(self):
        model, hw = as_model(self.model), as_hardware(self.hardware)
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "hardware", hw)
        mb = self.micro_batches
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, int) or mb < 1):
            raise InferenceInputError("micro_batches", mb, "a positive integer")
        if mb is None:
            object.__setattr__(self, "micro_batches", self.pp)
        elif self.pp == 1 and mb > 1:
            raise InferenceInputError(
                "micro_batches", mb, "1 when pp is 1 (micro-batches fill pipeline stages)"
            )
        check_layout(model, self.chips_available, self.tp, self.pp, self.ep, self.dp_attention)
        given = self.fmt
        object.__setattr__(self, "fmt", check_format("fmt", self.fmt))
        object.__setattr__(self, "kv_fmt", check_format("kv_fmt", self.kv_fmt))
        chip = costs_for(hw).formats()  # the GEMMs' format must be one the chip has
        have = [f for f in FORMATS if f in chip]
        if self.fmt not in have:
            raise InferenceInputError(
                "fmt",
                given,
                f"one of {', '.join(FORMATS[f] for f in have)} (the formats of {hw.name})",
            )
        for name in ("max_tokens", "block_tokens", "max_sequences"):
            n = getattr(self, name)
            if name == "max_sequences" and n is None:
                continue
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InferenceInputError(name, n, "a positive integer")
        for name in ("reserve_bytes", "extra_weights_bytes", "extra_kv_per_token_bytes"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, int | float) or not 0 <= x < 1e18:
                raise InferenceInputError(name, x, "a number of bytes >= 0")

    @property
    def chips_available(self) -> int:
        """Chips of the system (:func:`system_chips`)."""
        return system_chips(self.hardware, self.system)


def check_layout(model: Model, chips: int, tp, pp, ep, dp_attention=False) -> None:
    """Raise :class:`InferenceInputError` unless the replica's chips fit ``chips`` and can
    hold ``model``: ``tp`` as :func:`tlm.workloads.operators.tp_allowed` allows, ``pp``
    dividing the layers; without ``dp_attention`` ``tp x pp`` chips, ``ep`` dividing both
    ``tp`` and the experts (1 for a dense model); with it (a MoE model) ``ep x pp`` chips,
    ``ep`` a multiple of ``tp`` dividing the experts (:mod:`tlm.inference.expert`)."""
    for name, value in (("tp", tp), ("pp", pp), ("ep", ep)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InferenceInputError(name, value, "a positive integer")
    if not isinstance(dp_attention, bool):
        raise InferenceInputError("dp_attention", dp_attention, "True or False")
    why = tp_allowed(model, tp)
    if why:
        raise InferenceInputError("tp", tp, f"{why} of {model.name}")
    if model.layers % pp:
        raise InferenceInputError("pp", pp, f"a divisor of the {model.layers} layers")
    if dp_attention:
        _check_dp_attention(model, chips, tp, pp, ep)
        return
    if chips % (tp * pp):
        raise InferenceInputError(
            "tp", tp, f"such that tp x pp divides the system's {chips} chips (pp {pp})"
        )
    if model.moe is None:
        if ep != 1:
            raise InferenceInputError("ep", ep, f"1 for {model.name} (a dense model)")
    elif model.moe.experts % ep or tp % ep:
        raise InferenceInputError(
            "ep", ep, f"a divisor of both the {model.moe.experts} experts and tp ({tp})"
        )


def _check_dp_attention(model: Model, chips: int, tp: int, pp: int, ep: int) -> None:
    """The expert-parallel layout with data-parallel attention: ``ep`` chips per stage."""
    if model.moe is None:
        raise InferenceInputError(
            "dp_attention", True, f"False for {model.name} (a dense model: no experts to spread)"
        )
    if ep % tp or model.moe.experts % ep:
        raise InferenceInputError(
            "ep",
            ep,
            f"a multiple of tp ({tp}) dividing the {model.moe.experts} experts with dp_attention",
        )
    if chips % (ep * pp):
        raise InferenceInputError(
            "ep",
            ep,
            f"such that ep x pp divides the system's {chips} chips with dp_attention (pp {pp})",
        )


#: The named fixed costs, as ``fixed_costs.toml`` and the model's keyword arguments name them.
FIXED_COSTS = (
    "step_fixed_s",
    "collective_fixed_s",
    "collective_bandwidth_factor",
    "request_fixed_s",
)


@dataclass(frozen=True)
class FixedCosts:
    """The named fixed costs of inference (per iteration, per collective call, per request),
    seconds, and the collectives' bandwidth factor.

    Attributes
    ----------
    step_fixed_s : float
        Per iteration: the runtime's launch, sampling, the host's sync.
    collective_fixed_s : float
        Added to each collective call.
    request_fixed_s : float
        Per request, outside the iterations: the serving stack's work between a request's
        arrival and its admission to the batch and on its first token's way out (receiving and
        tokenising the prompt, queueing it to the scheduler, detokenising and returning the
        token). It adds to the TTFT and the end-to-end latency; the replica is not busy.
    collective_bandwidth_factor : float
        The fraction of the modelled link bandwidth the runtime's collectives reach, in (0, 1]:
        a collective of ``n`` bytes is priced as the network's collective of ``n / factor``.
    source : str
        Where they come from (the data file's section).
    """

    step_fixed_s: float
    collective_fixed_s: float
    collective_bandwidth_factor: float
    source: str
    request_fixed_s: float = 0.0

    def __post_init__(self):
        for name in ("step_fixed_s", "collective_fixed_s", "request_fixed_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not 0 <= value < 1e3
            ):
                raise InferenceInputError(name, value, "a finite number of seconds >= 0")
        factor = self.collective_bandwidth_factor
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not 0 < factor <= 1:
            raise InferenceInputError("collective_bandwidth_factor", factor, "a number in (0, 1]")
        for name in FIXED_COSTS:
            object.__setattr__(self, name, float(getattr(self, name)))

    @classmethod
    def given(cls, hardware_name: str, **given) -> FixedCosts:
        """The data file's fixed costs of ``hardware_name`` (:func:`fixed_costs`) with the
        ``given`` ones (names of :data:`FIXED_COSTS`; None: the file's) in their place; the
        source says when any differs.

        Raises
        ------
        InferenceInputError
            A given cost that is not allowed, naming it.
        """
        unknown = sorted(set(given) - set(FIXED_COSTS))
        if unknown:
            raise TypeError(f"FixedCosts.given takes {', '.join(FIXED_COSTS)}, not {unknown[0]}")
        shipped = fixed_costs(hardware_name)
        values = {k: getattr(shipped, k) if given.get(k) is None else given[k] for k in FIXED_COSTS}
        changed = any(values[k] != getattr(shipped, k) for k in FIXED_COSTS)
        source = shipped.source + (" replaced by given values" if changed else "")
        return cls(**values, source=source)


@cache
def fixed_costs(hardware_name: str) -> FixedCosts:
    """The fixed costs of ``tlm/inference/data/fixed_costs.toml`` for a hardware name (its
    own section, else ``default``)."""
    text = resources.files(__package__).joinpath("data/fixed_costs.toml").read_text()
    data = tomllib.loads(text)
    section = hardware_name if hardware_name in data else "default"
    values, told = {}, set()
    for key in FIXED_COSTS:
        figure = data[section][key]
        low = figure["value"] > 0 if key == "collective_bandwidth_factor" else figure["value"] >= 0
        if figure["source"] not in data["sources"] or not low or figure["value"] > 1e3:
            raise ValueError(f"fixed_costs.toml [{section}] {key}: bad source or value")
        values[key] = float(figure["value"])
        told.add(figure["source"])
    where = f"tlm/inference/data/fixed_costs.toml, section {section} ({', '.join(sorted(told))})"
    return FixedCosts(**values, source=where)
