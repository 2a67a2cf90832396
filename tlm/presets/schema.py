"""The schema of a chip preset file, validated on load with pydantic.

Every figure is a table ``{value, source, note, alternatives}``: ``source`` is a key of the
preset's ``[sources]`` table (``TRN2_FACTS.md`` keys such as ``T2`` or ``NKI2``, or ``ASSUMED``
for a figure no public page gives), and ``alternatives`` keeps the published figures the preset
did not pick, each under a name, so a study can choose one (``choose={"tensor.freq_hz":
"core_nki2"}``). Units are in the key names (``_hz``, ``_Bps``, ``_bytes``, ``_s``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["Alternative", "Figure", "FigureSection", "PresetFile", "SECTIONS", "OPTIONAL_SECTIONS"]


class Alternative(BaseModel):
    """One published (or assumed) value of a figure, with its source."""

    # validators built when first used (here and below): loading a file builds the file's
    # model, its sections inside it, and importing the schema builds none
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    value: float | int
    source: str = Field(min_length=1)
    note: str = ""


class Figure(Alternative):
    """The value a preset picks, its source, and the named alternatives it did not pick."""

    alternatives: dict[str, Alternative] = {}


class FigureSection(BaseModel):
    """A table of figures, every value (and alternative) positive, the ``_integers`` whole;
    fields that are not figures (a name, a list) are left to their own types."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    #: Fields whose values must be positive integers (the rest: positive numbers).
    _integers: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check_values(self):
        for name in type(self).model_fields:
            figure = getattr(self, name)
            if not isinstance(figure, Figure):
                continue  # not a figure, or an optional figure left out
            options = {"(picked)": figure, **figure.alternatives}
            for label, option in options.items():
                value = option.value
                if isinstance(value, bool) or not value > 0:
                    raise ValueError(f"{name} {label} must be positive, not {value!r}")
                if name in self._integers and value != int(value):
                    raise ValueError(f"{name} {label} must be an integer, not {value!r}")
        return self


class ChipSection(FigureSection):
    _integers = ("cores", "hbm_stacks", "hbm_stack_capacity_bytes", "neuronlink_ports")

    cores: Figure
    hbm_stacks: Figure
    hbm_stack_capacity_bytes: Figure
    hbm_bandwidth_Bps: Figure
    dma_bandwidth_Bps: Figure
    neuronlink_ports: Figure
    neuronlink_bandwidth_Bps: Figure


class CoreSection(FigureSection):
    _integers = (
        "sbuf_partitions",
        "sbuf_partition_bytes",
        "psum_partition_bytes",
        "psum_banks",
        "dma_engines",
    )

    sbuf_partitions: Figure
    sbuf_partition_bytes: Figure
    psum_partition_bytes: Figure
    psum_banks: Figure
    dma_engines: Figure
    dma_engine_bandwidth_Bps: Figure
    dma_fixed_latency_s: Figure


class TensorSection(FigureSection):
    """The tensor engine. ``fp8_max_k``: the K one FP8 op takes (``rows`` x FP8 rows per PE).
    ``mx_max_k``, optional: the same for MX operands (OCP MX: MXFP8, MXFP4); a chip without
    it has no MX formats."""

    _integers = ("rows", "cols", "fp8_max_k", "mx_max_k")

    freq_hz: Figure
    rows: Figure
    cols: Figure
    fp8_max_k: Figure
    mx_max_k: Figure | None = None


class StreamEngineSection(FigureSection):
    """Vector, Scalar or GpSimd: elements per cycle over all 128 partitions."""

    _integers = ("elements_per_cycle_2byte", "elements_per_cycle_4byte", "fixed_cycles")

    freq_hz: Figure
    elements_per_cycle_2byte: Figure
    elements_per_cycle_4byte: Figure
    fixed_cycles: Figure


class PublishedSection(FigureSection):
    """Published chip peaks the model's figures are checked against (FLOP/s): dense, and with
    structured sparsity where the chip has it (data only: no sparse operand is modelled)."""

    dense_fp8_flops: Figure
    dense_bf16_flops: Figure
    dense_fp32_flops: Figure
    sparse_fp8_flops: Figure | None = None
    sparse_bf16_flops: Figure | None = None
    dense_mx_flops: Figure | None = None


class CostSection(FigureSection):
    """What the cluster cost model (:mod:`tlm.cluster.cost`) needs of one chip: its power and
    its price. Optional: a preset without it cannot be costed, everything else works."""

    power_w: Figure
    capex_usd: Figure


class CollectivesSection(FigureSection):
    """What the Neuron runtime adds to a collective on this chip (:mod:`tlm.collectives.runtime`):
    the default logical core size and the runtime's costs, fitted once per generation
    (``tools/calibrate_collectives.py``). Optional: without it, collectives run one rank per
    chip with no runtime costs."""

    _integers = ("lnc",)

    lnc: Figure
    reduce_fixed_s: Figure
    move_fixed_s: Figure
    step_sync_s: Figure
    dma_Bps: Figure


#: The sections of a preset file and their schema.
SECTIONS = {
    "chip": ChipSection,
    "core": CoreSection,
    "tensor": TensorSection,
    "vector": StreamEngineSection,
    "scalar": StreamEngineSection,
    "gpsimd": StreamEngineSection,
    "published": PublishedSection,
}


#: Sections a preset may leave out (None in :class:`tlm.presets.ChipSpec` when absent).
OPTIONAL_SECTIONS = {"cost": CostSection, "collectives": CollectivesSection}


class PresetFile(BaseModel):
    """A whole preset file; every ``source`` must be a key of ``sources``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str = Field(min_length=1)
    description: str = ""
    sources: dict[str, str]
    chip: ChipSection
    core: CoreSection
    tensor: TensorSection
    vector: StreamEngineSection
    scalar: StreamEngineSection
    gpsimd: StreamEngineSection
    published: PublishedSection
    cost: CostSection | None = None
    collectives: CollectivesSection | None = None

    @model_validator(mode="after")
    def _check_sources(self):
        for section in (*SECTIONS, *OPTIONAL_SECTIONS):
            block = getattr(self, section)
            if block is None:
                continue
            for name in type(block).model_fields:
                figure = getattr(block, name)
                if figure is None:  # an optional figure left out
                    continue
                for label, option in {"": figure, **figure.alternatives}.items():
                    for key in option.source.replace(",", " ").split():
                        if key not in self.sources:
                            where = f"{section}.{name}" + (f" alternative {label}" if label else "")
                            known = ", ".join(sorted(self.sources))
                            raise ValueError(
                                f"{where} cites source {key!r}, which is not in [sources] ({known})"
                            )
        return self
