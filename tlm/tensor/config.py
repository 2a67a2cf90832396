"""Parameters of one tensor engine, checked once and shared by RTL, TLM and benches."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..formats import FloatFormat, IntFormat, MXFormat, format_set, formats_mix

__all__ = [
    "EngineConfig",
    "ErrorKind",
    "MAX_N",
    "STATUS_COUNTER_BITS",
    "FP32_BEAT_INTERVAL",
    "PE_CUTS",
    "DEFAULT_PE_STAGES",
    "DEFAULT_DECODE_STAGES",
    "PIPELINED_FLOAT",
    "ONE_STAGE_FLOAT",
]

#: Moving columns per nc_matmul: one PSUM bank of 2 KiB holds 512 fp32 (TRN2_FACTS, ISA).
MAX_N = 512

#: Default width of each saturating error counter on the engine's status port.
STATUS_COUNTER_BITS = 16


class ErrorKind(enum.IntEnum):
    """Protocol misuse the engine detects. The value is the bit in ``status.flags`` and the
    index of the counter in ``status.counts``."""

    #: A MultiplyMoving asked to reuse the stationary before any stationary was loaded.
    #: Its beats are consumed and dropped; no results are produced.
    NO_STATIONARY = 0
    #: A LoadStationary whose ``last`` flag disagrees with its declared K (cut short or
    #: overrun). The load is discarded; an overrun drops beats up to its ``last``.
    LOAD_LENGTH = 1
    #: A LoadStationary declaring K = 0 or K > rows. The whole load is dropped.
    LOAD_K = 2
    #: A LoadStationary whose format code names no format the engine was elaborated with.
    #: The whole load is dropped.
    LOAD_FORMAT = 3
    #: A MultiplyMoving whose format code names no format the engine was elaborated with.
    #: The whole op is dropped; no results are produced.
    MOVING_FORMAT = 4
    #: A MultiplyMoving whose format does not mix with that of the stationary it uses (see
    #: :func:`tlm.formats.formats_mix`). The whole op is dropped; no results are produced.
    FORMAT_MISMATCH = 5


#: Moving beats of an FP32 op are accepted at most one every this many cycles: Trainium runs
#: FP32 matmuls at a quarter of the BF16 rate (TRN2_FACTS "Tensor engine semantics": "FP32
#: inputs cost 4x", ISA; 181 against 667 dense TFLOPS, T2).
FP32_BEAT_INTERVAL = 4


#: Where the PE's pipeline registers go (the cuts of ``hdl.formats.mac``), in the order they
#: are added as the stage count grows: a PE of ``s`` stages has the first ``s - 1`` cuts and its
#: output register. ``mul.*`` cuts sit before the partial sum arrives (a constant latency);
#: ``add.*`` cuts are on the row-to-row path of the sum (a cycle per row each). "int" is an
#: integer-only engine; "float" any engine with a floating-point format. With the first ten
#: float cuts (11 stages, :data:`PIPELINED_FLOAT`) each stage of every format set is within the
#: 22 generic gate levels of trn2's clock at 5 nm (docs/tensor_engine.md, "Pipelined PE"); the
#: last two (after the normalisation's shift, before the rounding's increment) only add
#: latency there.
PE_CUTS = {
    "int": ("mul.product",),
    "float": (
        "mul.product",
        "add.align",
        "mul.multiply",
        "add.order",
        "add.sum",
        "add.abs",
        "add.norm_half",
        "mul.csa",
        "mul.norm",
        "mul.round",
        "add.norm",
        "add.round",
    ),
}

#: The default stage count per kind. Integers: 2 (the product ahead of the sum; 21 generic gate
#: levels a stage against 32 in one, within the 22 a stage holds at trn2's clock at 5 nm).
#: Floating point: 11 (22 levels a stage against 147 in one, every format set;
#: docs/tensor_engine.md, "Pipelined PE"): 5 of them before the partial sum arrives, 6 on the
#: sum's path, so a result leaves 6 cycles a row later than the product entered.
DEFAULT_PE_STAGES = {"int": 2, "float": 11}

#: The default stages of the operand decoders at the array's edge, per kind: 2 on a float
#: engine (a register between the leading zeros' count and the shift of a subnormal's
#: significand, cut ``dec.norm``; in one stage the skew lane's read and the decoder take 33
#: levels at 128 rows, 22 in two), 1 on an integer one, which decodes nothing.
DEFAULT_DECODE_STAGES = {"int": 1, "float": 2}

#: ``pe_stages`` and ``decode_stages`` of a floating-point engine whose every stage is within
#: 22 generic gate levels (trn2's clock at 5 nm), every format set: the defaults, spelled out
#: for ``EngineConfig(..., **PIPELINED_FLOAT)``. ``pe_stages=1, decode_stages=1`` is the
#: one-cycle multiply-accumulate of earlier releases (a 147-level path).
PIPELINED_FLOAT = {"pe_stages": 11, "decode_stages": 2}

#: ``pe_stages`` and ``decode_stages`` of a floating-point engine that multiplies and adds in
#: one cycle with combinational decoders (the default before 2026-11-27; 147 levels a stage):
#: what synthesis, power and the benches compare the default with.
ONE_STAGE_FLOAT = {"pe_stages": 1, "decode_stages": 1}


def _check_count(name: str, value, most: int, where: str = "") -> None:
    """Raise the one-line error of a count that is not an integer in ``1..most``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(f"{name} must be an integer in 1..{most}{where}, not {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    """Shape and number formats of a tensor engine.

    Parameters
    ----------
    rows : int
        PE rows: the contraction (K, partition) dimension, 1 or more (Trainium: 128).
    cols : int
        PE columns: the stationary free dimension (M), 1 or more (Trainium: 128).
    fmt : str, format, or a set of them
        The operand formats the engine is elaborated with (see :mod:`tlm.formats` and
        :func:`tlm.formats.format_set`): one format, a list, a comma-separated string or
        ``"all"``. Each LoadStationary and MultiplyMoving picks one of them by its format
        code, the format's position in :attr:`formats`; after construction ``fmt`` is
        ``formats[0]``, the format of code 0.
    status_bits : int
        Width of each saturating error counter on the status port (default 16).
    pe_stages : int or None
        Pipeline stages of a PE, ``1 .. len(PE_CUTS[kind]) + 1`` (kind "int" or "float",
        see :data:`PE_CUTS`); ``None`` takes :data:`DEFAULT_PE_STAGES` (2 int, 11 float).
        After construction, the number.
    decode_stages : int or None
        Stages of the operand decoders at the array's edge: 1 or 2 on an engine with a
        floating-point format (``None``: :data:`DEFAULT_DECODE_STAGES`, 2), 1 on an integer-only
        engine, which decodes nothing. Each stage past the first is a cycle of latency.

    Examples
    --------
    >>> cfg = EngineConfig(4, 3)
    >>> cfg.latency   # cycles from a moving beat's acceptance to its result being valid
    9
    >>> cfg.mul_stages, cfg.add_stages
    (1, 1)
    >>> cfg = EngineConfig(128, 128, "bf16,fp8_e4m3,fp8_e5m2")
    >>> [f.name for f in cfg.formats], cfg.fmt_bits, cfg.code("bf16")
    (['fp8_e4m3', 'fp8_e5m2', 'bf16'], 2, 2)
    >>> cfg.pe_stages, cfg.decode_stages, cfg.mul_stages, cfg.add_stages, cfg.latency
    (11, 2, 5, 6, 903)
    >>> EngineConfig(128, 128, "bf16", pe_stages=1, decode_stages=1).latency
    257
    """

    rows: int = 128
    cols: int = 128
    fmt: IntFormat = field(default="int8")
    status_bits: int = STATUS_COUNTER_BITS
    pe_stages: int | None = None
    decode_stages: int | None = None
    formats: tuple = field(init=False, repr=False)

    def __post_init__(self):
        for name in ("rows", "cols"):
            _check_count(name, getattr(self, name), 1024)
        formats = format_set(self.fmt)
        object.__setattr__(self, "formats", formats)
        object.__setattr__(self, "fmt", formats[0])
        _check_count("status_bits", self.status_bits, 32)
        kind = self.pe_kind
        for name, default, most, what in (
            ("pe_stages", DEFAULT_PE_STAGES, len(PE_CUTS[kind]) + 1, "a PE"),
            ("decode_stages", DEFAULT_DECODE_STAGES, 2 if self.has_float else 1, "an engine"),
        ):
            if getattr(self, name) is None:
                object.__setattr__(self, name, default[kind])
            _check_count(name, getattr(self, name), most, f" for {what} of kind {kind!r}")

    @property
    def pe_kind(self) -> str:
        """Which row of :data:`PE_CUTS` the PE follows: "float" with any floating-point
        format, else "int"."""
        return "float" if self.has_float else "int"

    @property
    def pe_cuts(self) -> tuple[str, ...]:
        """The PE's pipeline cuts (names of :data:`PE_CUTS`) at :attr:`pe_stages`."""
        return PE_CUTS[self.pe_kind][: self.pe_stages - 1]

    @property
    def mul_stages(self) -> int:
        """PE stages before the partial sum arrives: the product's registers."""
        return sum(c.startswith("mul.") for c in self.pe_cuts)

    @property
    def add_stages(self) -> int:
        """PE stages on the partial sum's path: cycles per row down a column."""
        return self.pe_stages - self.mul_stages

    @property
    def latency(self) -> int:
        """Cycles (without stalls) from accepting a moving beat to its result being valid:
        ``rows * add_stages`` down the columns, ``mul_stages`` ahead of the first sum,
        ``cols`` across the rows and de-skew, one register between the skew lines and the
        array, and ``decode_stages - 1`` in the operand decoders."""
        return self.rows * self.add_stages + self.mul_stages + self.cols + self.decode_stages

    @property
    def k_bits(self) -> int:
        """Width of the declared-K field of a load beat."""
        return self.rows.bit_length()

    @property
    def fmt_bits(self) -> int:
        """Width of the format-code field of load and moving beats (0 for one format)."""
        return (len(self.formats) - 1).bit_length()

    @property
    def has_int(self) -> bool:
        return any(isinstance(f, IntFormat) for f in self.formats)

    @property
    def has_float(self) -> bool:
        """Any floating-point format, MX formats included (their datapath is floating point)."""
        return any(isinstance(f, FloatFormat | MXFormat) for f in self.formats)

    @property
    def has_mx(self) -> bool:
        """Any MX format: a TLM engine only (the RTL has none, docs/tensor_engine.md)."""
        return any(isinstance(f, MXFormat) for f in self.formats)

    def code(self, fmt) -> int:
        """The format code of ``fmt`` (a name or format) on this engine's ports.

        Raises
        ------
        ValueError
            If the engine was not elaborated with ``fmt``.
        """
        names = [f.name for f in self.formats]
        name = getattr(fmt, "name", fmt)
        if name not in names:
            raise ValueError(
                f"format {name!r} is not one this engine was elaborated with ({', '.join(names)})"
            )
        return names.index(name)

    def format_of(self, code: int):
        """The format of ``code``, or ``None`` when no format has that code."""
        return self.formats[code] if 0 <= code < len(self.formats) else None

    def pairs(self) -> list[tuple]:
        """Every (stationary, moving) format pair an op may use on this engine."""
        return [(s, m) for s in self.formats for m in self.formats if formats_mix(s, m)]

    @property
    def format_tag(self) -> str:
        """The format set in a file name: one name, ``all``, or names joined by ``-``."""
        if len(self.formats) == 1:
            return self.fmt.name
        if len(self.formats) == len(format_set("all")):
            return "all"
        return "-".join(f.name for f in self.formats)

    @property
    def tag(self) -> str:
        """Short name used for generated files and build folders (``_s<bits>`` for status
        counters narrower or wider than the default, ``_p<pe>d<decode>`` for stage counts
        other than the kind's defaults)."""
        bits = "" if self.status_bits == STATUS_COUNTER_BITS else f"_s{self.status_bits}"
        kind = self.pe_kind
        default = (DEFAULT_PE_STAGES[kind], DEFAULT_DECODE_STAGES[kind])
        stages = (self.pe_stages, self.decode_stages)
        staged = "" if stages == default else f"_p{stages[0]}d{stages[1]}"
        return f"r{self.rows}c{self.cols}_{self.format_tag}{bits}{staged}"
