"""What one operator costs on one chip: GEMMs, HBM traffic, Vector/Scalar engine work.

One definition for training and inference. :meth:`OpCosts.for_preset` reads the chip TLM's
calibration (``tlm/costs/data/<preset>.json``, made by ``tools/calibrate_costs.py``: the
shipped GEMM kernel run over a log grid of M, N and K per format) and interpolates the GEMM
efficiency between its points; :meth:`OpCosts.for_hardware` gives a chip with no TLM (an
A100, an H100) the roofline ``max(flops / (peak x efficiency), bytes / HBM bandwidth)`` with a
named, ASSUMED ``efficiency``. Every method takes numpy arrays (broadcast against each other)
and returns an array of the broadcast shape - a numpy scalar for scalar inputs - so a strategy
search costs a million shapes in a few numpy operations. Scalars are worked out on Python
floats with the same formulas (:mod:`tlm.elementwise`): numpy's per-call cost, paid a
few hundred times by one shape, would be most of a single estimate's time; the bits are the
same (``tests/test_costs.py`` holds scalars to their vectorised rows). ``source`` says where
the figures come from, for the outputs to print; :meth:`OpCosts.gemm_basis` says it per
shape.

See ``docs/costs.md``.

Examples
--------
>>> from tlm.costs import OpCosts
>>> trn2 = OpCosts.for_preset("trn2")
>>> t = trn2.gemm_s(4096, 4096, 4096)                   # seconds, one chip, BF16
>>> bool(0.9 < 2 * 4096**3 / t / trn2.peak_flops("bf16") < 1)
True
>>> float(trn2.gemm_efficiency(4096, 4096, 4096)) == float(2 * 4096**3 / t / 667e12)
True
>>> trn2.gemm_s([1, 8192], 8192, 8192, fmt="fp8").shape    # arrays in, arrays out
(2,)
>>> trn2.source.split(",")[0]
'chip TLM trn2'
>>> from tlm.hardware import load_hardware
>>> a100 = OpCosts.for_hardware(load_hardware("a100"))
>>> a100.source.split(":")[0]
'roofline'
>>> round(float(a100.gemm_s(8192, 8192, 8192)) * 1e3, 2)   # 2 x 8192^3 / (312e12 x 0.7016)
5.06
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ..datafile import read_text
from ..elementwise import ceil, exp, floor, log2, maximum, minimum, where, zeros_like
from ..formats import MX_FORMATS
from .attention import FA2, FA2_SPEED, NKI_FLASH, FlashKernel, FlashSpeed
from .grid import CORES, DATA_VERSION, FORMATS, data_path

__all__ = [
    "BASIS",
    "DEFAULT_EFFICIENCY",
    "FORMAT_TABLE",
    "VECTOR_OPS",
    "DEFAULT_CALL_S",
    "MEASURED_GEMM",
    "MeasuredGemm",
    "VECTOR_TILE_ELEMENTS",
    "CostsError",
    "OpCosts",
]

#: What :meth:`OpCosts.gemm_basis` codes mean: 0 the chip TLM's grid (interpolated), 1 beyond
#: the grid's largest M, N or K (extrapolated: the edge's tiles repeated in steady state),
#: 2 the roofline (no calibration for this chip or format).
BASIS = ("calibrated", "extrapolated", "roofline")

#: Fraction of the dense peak that large GEMMs reach on a chip with no TLM (the roofline's
#: compute term): ASSUMED, about what cuBLAS reaches on large BF16 GEMMs on A100/H100 (80-90 %
#: in vendors' and users' published measurements); a named parameter the training validation
#: fits (``OpCosts.for_hardware(hw, efficiency=...)``).
DEFAULT_EFFICIENCY = 0.8
#: Seconds a GEMM kernel costs beyond its roofline on a chip with no TLM (launch, prologue,
#: the last wave's tail): ASSUMED 0 by default; a named parameter the training validation fits
#: (``OpCosts.for_hardware(hw, call_s=...)``).
DEFAULT_CALL_S = 0.0


@dataclass(frozen=True)
class MeasuredGemm:
    """A GEMM kernel's published time on one core of the real chip: ``[m, k] x [k, n]`` in
    ``fmt``, ``seconds`` end to end (:data:`MEASURED_GEMM`)."""

    m: int
    n: int
    k: int
    fmt: str
    seconds: float
    source: str


#: The one published measurement of a GEMM on each Trainium generation's hardware that the chip
#: TLM's kernel times are held to (:meth:`OpCosts.for_preset`: every calibrated GEMM time x
#: ``seconds`` over the TLM's one-core time at that shape, ``OpCosts.gemm_hardware_ratio``).
#: The chip TLM is this project's tensor engine (back to back, an op with a new stationary
#: takes ``max(N, K)`` cycles): 99.7 % of a NeuronCore-v2's peak on the shape below, where
#: Neuron's own fully optimised NKI kernel measured 6.97 ms on Trn1 hardware (78.9 TFLOP/s,
#: 83 % of the preset's 95 TFLOP/s a core; the page's profiler says 85.24 % HFU). What the
#: hardware spends beyond the TLM is not broken down by the source (instruction issue, PSUM
#: evacuation by the other engines, DMA waits; the NKI guide's 2.8 GHz tensor-engine clock
#: against the preset's 2.9 is 3.5 % of it): the ratio carries it, one figure per platform,
#: fitted on this measurement, never on a training or inference row. trn2 and trn3 have no
#: such published measurement here: their TLM times stand (docs/costs.md).
MEASURED_GEMM = {
    "trn1": MeasuredGemm(
        m=4096,
        n=8192,
        k=8192,
        fmt="bf16",
        seconds=6.97e-3,
        source="AWS Neuron docs, NKI tutorial 'Matrix multiplication' (aws-neuron-sdk "
        "general/nki/tutorials/matrix_multiplication.rst, SDK 2.20 72825d50 to 1db4d74e, "
        "2024-09 to 2025-10): nki_matmul_fully_optimized_, [4096,8192] @ [8192,8192] BF16 "
        "on one NeuronCore of a Trn1.32xlarge, 6.97 ms (HFU 85.24 %)",
    ),
}

#: Format names accepted, and the calibration table and peak each uses. FP16 runs at BF16's
#: rate with the same operand width, FP8 E5M2 (and E4M3FN) at E4M3's: they share the tables.
#: MX formats (chips with MX only: trn3) have no calibration: the roofline at their peak.
FORMAT_TABLE = {
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e4m3fn": "fp8",
    "fp8_e5m2": "fp8",
    "fp32": "fp32",
    "mxfp8": "mxfp8",
    "mxfp8_e5m2": "mxfp8",
    "mxfp4": "mxfp4",
}
#: Bytes an operand element costs in HBM and DMA traffic: an MX element's bits plus its share
#: of the E8M0 scale, 8 bits per 32 elements (8.25 bits for MXFP8, 4.25 for MXFP4).
_OPERAND_BYTES = {
    "bf16": 2,
    "fp8": 1,
    "fp32": 4,
    **{k: MX_FORMATS[k].storage_bits / 8 for k in ("mxfp8", "mxfp4")},
}
#: The formats the Vector and Scalar engines compute in (not MX: a block format of matmuls).
_VECTOR_BYTES = {k: _OPERAND_BYTES[k] for k in ("bf16", "fp8", "fp32")}
_KERNEL_FORMAT = {**FORMATS, "fp32": "fp32", "mxfp8": "mxfp8", "mxfp4": "mxfp4"}

#: The Vector/Scalar engine work of each elementwise operator, per element: passes over the
#: data on each engine (they run side by side, tile after tile), elements moved to and from
#: HBM when the operator is not fused (``from_hbm``), and whether the widest operand is FP32.
#: ``elementwise``: a binary op (residual add, gating multiply) on the Vector engine;
#: ``activation``: GeLU/SiLU/exp on the Scalar engine; ``softmax``: as
#: ``tlm/kernels/softmax.py`` does it (Vector row max, Scalar exp with the row sum, Vector
#: divide; FP32 intermediates); ``norm``: RMSNorm/LayerNorm (Scalar square with the row sum,
#: Vector scale by the reciprocal root and by the weight).
VECTOR_OPS = {
    "elementwise": {"vector": 1, "scalar": 0, "hbm_elements": 3, "fp32": False},
    "activation": {"vector": 0, "scalar": 1, "hbm_elements": 2, "fp32": False},
    "softmax": {"vector": 2, "scalar": 1, "hbm_elements": 2, "fp32": True},
    "norm": {"vector": 2, "scalar": 1, "hbm_elements": 2, "fp32": False},
}

#: Free elements per partition in one Vector/Scalar instruction (a 128 x 2048 tile, 4 KiB per
#: partition in BF16): ASSUMED, how a kernel tiles a large elementwise operator; it sets how
#: often the instruction's fixed cost is paid.
VECTOR_TILE_ELEMENTS = 2048


class CostsError(ValueError):
    """Bad arguments or a calibration file that does not validate."""


def _fmt_key(fmt, allowed, chip=None) -> str:
    key = FORMAT_TABLE.get(fmt) if isinstance(fmt, str) else None
    if key is None or key not in allowed:
        names = ", ".join(f for f, k in FORMAT_TABLE.items() if k in allowed)
        if key is not None and key.startswith("mx") and chip is not None:
            from ..presets import mx_presets

            raise CostsError(
                f"fmt {fmt!r} is an MX format, which {chip} does not have (MX formats are on "
                f"{', '.join(mx_presets())}); allowed: {names}"
            )
        raise CostsError(f"fmt must be one of {names}, not {fmt!r}")
    return key


#: Scalar types taken on the scalar path (a bool is not a number here).
_SCALARS = frozenset({int, float, np.float64, np.int64, np.float32, np.int32})


def _array(name, value, low, inclusive, what):
    """``value`` checked: a float for a scalar (the scalar path), else a float array."""
    if type(value) in _SCALARS:
        x = float(value)
        if math.isfinite(x) and (x >= low if inclusive else x > low):
            return x
        raise CostsError(f"{name} must be {what}, not {x!r}")
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise CostsError(f"{name} must be {what}, not {value!r}") from None
    bad = ~np.isfinite(a) | ((a < low) if inclusive else (a <= low))
    if bad.any():
        raise CostsError(f"{name} must be {what}, not {float(a[bad].flat[0])!r}")
    return a


def _out(a):
    if type(a) is not np.ndarray:
        return np.float64(a)  # a scalar's figure, as numpy gives it
    return a[()] if a.ndim == 0 else a


@dataclass(frozen=True)
class _Table:
    """One format's calibration: the log2 axes and each table's efficiency on the grid."""

    log_axes: tuple  # (log2 m, log2 n, log2 k) grid values
    top: tuple  # the largest m, n, k of the grid
    fixed_s: dict  # {"all"|"one": seconds of the grid's smallest shape}
    log_efficiency: dict  # {"all"|"one": ln(efficiency) at the grid points, flat}
    uniform: bool  # every axis is consecutive powers of two

    @cached_property
    def lists(self) -> tuple:
        """The axes and each grid as Python lists: the scalar path indexes them without
        numpy's per-item cost."""
        grids = {c: g.tolist() for c, g in self.log_efficiency.items()}
        return [a.tolist() for a in self.log_axes], grids


def _as_lists(table: _Table, cores: str) -> tuple:
    axes, grids = table.lists
    return axes, grids[cores]


def _interpolate(table: _Table, cores: str, m, n, k):
    """Efficiency, trilinear in (log2 m, log2 n, log2 k) on its logarithm, inside the grid
    (the caller clamps the shape to it).

    Log-efficiency is log-time plus a linear function of the log-shape (the FLOPs), so this
    interpolates log-time linearly too: where the calibration's time grows along an axis,
    so does the interpolated time (linear interpolation of the efficiency itself would dip
    between points where fixed costs dominate).
    """
    one = type(m) is not np.ndarray  # a scalar shape: Python floats and ints throughout
    if one:
        axes, grid = _as_lists(table, cores)
    else:
        axes, grid = table.log_axes, table.log_efficiency[cores]
    idx, frac = [], []
    for axis, x in zip(axes, (m, n, k), strict=True):
        lx = log2(x)
        if one:
            if table.uniform:  # powers of two: the cell is the integer part (no search)
                i = int(floor(lx - axis[0]))
            else:
                i = bisect.bisect_right(axis, lx) - 1
            i = min(max(i, 0), len(axis) - 2)
        else:
            if table.uniform:
                i = np.floor(lx - axis[0]).astype(np.intp)
            else:
                i = np.searchsorted(axis, lx, side="right") - 1
            i = np.minimum(np.maximum(i, 0), len(axis) - 2)
        f = (lx - axis[i]) / (axis[i + 1] - axis[i])
        idx.append(i)
        frac.append(minimum(maximum(f, 0.0), 1.0))
    (i, j, q), (fi, fj, fq) = idx, frac
    nn, nk = len(table.log_axes[1]), len(table.log_axes[2])
    base = (i * nn + j) * nk + q  # into the grid: flat, (m, n, k) C order
    take = grid.__getitem__ if one else grid.take

    def along_k(offset):
        low = take(base + offset)
        return low + fq * (take(base + offset + 1) - low)

    c00, c01 = along_k(0), along_k(nk)
    c10, c11 = along_k(nn * nk), along_k(nn * nk + nk)
    c0 = c00 + fj * (c01 - c00)
    c1 = c10 + fj * (c11 - c10)
    return exp(c0 + fi * (c1 - c0))


#: The shipped kernel's output blocks (:func:`tlm.kernels.gemm_blocks`): up to 512 x 1024,
#: halved (N first, down to 512, then M down to 128) while there are fewer blocks than cores
#: and the halves fit on them.
#: Mirrored here, vectorised; a test holds :func:`kernel_blocks` to ``gemm_blocks``.
BLOCK_M, BLOCK_N, MIN_BLOCK_M, MIN_BLOCK_N = 512, 1024, 128, 512


def kernel_blocks(m, n, cores):
    """The shipped kernel's blocking of an ``m x n`` output on ``cores`` cores, vectorised.

    Returns
    -------
    (bm, bn, blocks) : arrays
        Block rows and columns (before clipping to the shape) and the number of blocks.
    """
    # gemm_blocks' halving loop unrolled: N from 1024 to 512 first, then M from 512 to 256
    # and 128, each while there are fewer blocks than cores and the halved ones fit on them
    rows = {b: ceil(m / b) for b in (BLOCK_M, BLOCK_M // 2, MIN_BLOCK_M)}
    cols = {b: ceil(n / b) for b in (BLOCK_N, MIN_BLOCK_N)}
    steps = [
        (BLOCK_M, BLOCK_N),
        (BLOCK_M, MIN_BLOCK_N),
        (BLOCK_M // 2, MIN_BLOCK_N),
        (MIN_BLOCK_M, MIN_BLOCK_N),
    ]
    bm, bn = float(BLOCK_M), float(BLOCK_N)
    blocks = rows[BLOCK_M] * cols[BLOCK_N]
    going = blocks < cores
    for r, c in steps[1:]:
        count = rows[r] * cols[c]
        going = going & (count <= cores)
        bm = where(going, float(r), bm)
        bn = where(going, float(c), bn)
        blocks = where(going, count, blocks)
        going = going & (count < cores)
    return bm, bn, blocks


def balanced_shape(m, n, cores):
    """The ``(m', n')`` whose blocks load every used core as much as ``m x n`` loads its
    busiest core: the kernel hands blocks round robin, so ``ceil(blocks / cores)`` full
    blocks on the busiest core take as long as a shape with that many on every core. Fewer
    blocks than cores that the kernel could still halve (the halves would not fit in one
    round) likewise: one such block on every core. Equal to ``(m, n)`` when the blocks
    divide evenly (every grid shape)."""
    bm, bn, blocks = kernel_blocks(m, n, cores)
    rows = minimum(bm, m)
    cols = minimum(bn, n)
    halvable = (bm > MIN_BLOCK_M) | (bn > MIN_BLOCK_N)
    used = where(blocks < cores, where(halvable, cores, blocks), ceil(blocks / cores) * cores)
    padded_m = ceil(m / bm) * rows
    return padded_m, used * rows * cols / padded_m


class OpCosts:
    """Operator costs on one chip; build with :meth:`for_preset` or :meth:`for_hardware`.

    Attributes
    ----------
    name : str
        The chip (``trn2``, ``a100``).
    source : str
        Where the figures come from, for outputs to print.
    sources : dict
        The same per part: ``gemm``, ``memory``, ``vector``.
    efficiency : float
        The roofline's fraction of peak for formats without calibration.
    hbm_bandwidth_Bps : float
        The HBM roofline's bandwidth, bytes/s.
    flash : tlm.costs.attention.FlashKernel
        The chip family's causal flash-attention kernel (its tiles): Neuron's NKI kernel on
        Trainium, FlashAttention-2 on a GPU.
    flash_efficiency : callable or None
        Called with a sequence length (the keys each query block walks), the (forward,
        backward) fraction of the dense BF16 peak the GPU's flash kernel reaches on the tiles
        it computes, from its published speeds (:class:`tlm.costs.attention.FlashSpeed` of
        :data:`tlm.costs.attention.FA2_SPEED`); None where its products are priced as GEMMs
        (Trainium: the chip TLM's kernel, or a GPU with no published speed).
    gemm_hardware_ratio : float
        What every calibrated GEMM time is multiplied by: the chip's published GEMM measurement
        over the chip TLM's time at its shape (:data:`MEASURED_GEMM`); 1 where none is
        published, or with ``for_preset(..., measured=False)`` (the TLM's own times).
    """

    def __init__(
        self,
        *,
        name,
        peaks,
        hbm_bandwidth_Bps,
        efficiency,
        sources,
        tables=None,
        cores=1,
        spec=None,
        call_s=0.0,
        flash: FlashKernel = FA2,
        flash_efficiency: FlashSpeed | None = None,
        gemm_hardware_ratio: float = 1.0,
    ):
        self.name = name
        self.gemm_hardware_ratio = float(gemm_hardware_ratio)
        self.flash = flash
        self.flash_efficiency = flash_efficiency
        self.call_s = float(call_s)
        self._peaks = dict(peaks)
        self.hbm_bandwidth_Bps = float(hbm_bandwidth_Bps)
        self.efficiency = float(efficiency)
        self._tables = dict(tables or {})
        self._cores = int(cores)
        self._spec = spec
        self.sources = dict(sources)
        self.source = "; ".join(self.sources.values())

    def __repr__(self) -> str:
        return f"OpCosts({self.name!r}: {self.source})"

    # ---- construction ---------------------------------------------------------------------

    @classmethod
    def for_preset(cls, preset: str = "trn2", *, data=None, measured: bool = True) -> OpCosts:
        """A chip preset's costs: the chip TLM's calibration where the package has one, its
        GEMM times held to the chip's published GEMM measurement where one exists
        (:data:`MEASURED_GEMM`: trn1).

        Parameters
        ----------
        preset : str
            One of :data:`tlm.presets.PRESETS`.
        data : path, optional
            A calibration file to use instead of ``tlm/costs/data/<preset>.json``.
        measured : bool
            Scale the calibrated GEMM times to :data:`MEASURED_GEMM` (the shipped costs);
            False: the chip TLM's own times (what ``tlm.costs.calibrate.check`` compares).

        Raises
        ------
        CostsError
            An unknown preset, or a calibration file that does not validate (naming it).
        """
        from ..presets import PRESETS, load_preset

        if preset not in PRESETS:
            raise CostsError(f"preset must be one of {', '.join(PRESETS)}, not {preset!r}")
        spec = load_preset(preset)
        if data is None:
            path = data_path(preset)
            where = f"tlm/costs/data/{preset}.json"
            text = path.read_text() if path.is_file() else None
        else:
            where = str(data)
            text = read_text(Path(data), CostsError, where)
        peaks = {
            key: spec.peak_flops(_KERNEL_FORMAT[key])
            for key in _OPERAND_BYTES
            if spec.has_mx or not key.startswith("mx")
        }
        hbm = spec.chip.hbm_bandwidth_Bps
        preset_file = f"tlm/presets/{preset}.toml"
        sources = {
            "memory": f"memory: HBM roofline at {hbm / 1e12:g} TB/s ({preset_file} "
            f"chip.hbm_bandwidth_Bps)",
            "vector": f"vector/scalar: engine rates of {preset_file} (vector "
            f"{spec.vector.freq_hz / 1e9:g} GHz x {spec.vector.elements_per_cycle_2byte:g} "
            f"elements/cycle, scalar {spec.scalar.freq_hz / 1e9:g} GHz x "
            f"{spec.scalar.elements_per_cycle_2byte:g}, x {spec.chip.cores} cores), "
            f"{VECTOR_TILE_ELEMENTS}-element tiles ASSUMED",
        }
        if text is None:
            sources["gemm"] = (
                f"roofline: peak x efficiency {DEFAULT_EFFICIENCY:g} ASSUMED, no chip TLM "
                f"calibration for {preset} (tools/calibrate_costs.py --preset {preset})"
            )
            tables = {}
        else:
            raw = _parse(text, where, preset)
            tables = {f: _table(raw, f, peaks[f], spec.chip.cores) for f in raw["tables"]}
            top = raw["axes"]["m"][-1], raw["axes"]["n"][-1], raw["axes"]["k"][-1]
            sources["gemm"] = (
                f"chip TLM {preset}, cached {where} ({raw['date']}, commit "
                f"{raw['commit'][:12]}): GEMM efficiency interpolated (log-log) in log2(M, N, K) "
                f"on the grid M, N, K up to {top[0]}, {top[1]}, {top[2]} for "
                f"{', '.join(raw['tables'])}; beyond it the edge's tiles repeated (steady "
                f"state); other formats: roofline at peak"
            )
        sources = {"gemm": sources.pop("gemm"), **sources}
        costs = cls(
            name=preset,
            peaks=peaks,
            hbm_bandwidth_Bps=hbm,
            efficiency=1.0 if tables else DEFAULT_EFFICIENCY,
            sources=sources,
            tables=tables,
            cores=spec.chip.cores,
            spec=spec,
            flash=NKI_FLASH,
        )
        hw = MEASURED_GEMM.get(preset) if measured else None
        key = None if hw is None else _fmt_key(hw.fmt, peaks, preset)
        if key in tables:
            # the TLM's one-core time at the measured shape (the ratio still 1), then held
            tlm_s = float(costs._product_s(key, "one", float(hw.m), float(hw.n), float(hw.k)))
            costs.gemm_hardware_ratio = hw.seconds / tlm_s
            costs.sources["gemm"] = (
                f"chip TLM {preset} x {costs.gemm_hardware_ratio:.4f} FITTED on one published "
                f"kernel measurement (the TLM's {tlm_s * 1e3:.3f} ms on one core against "
                f"{hw.seconds * 1e3:g} ms: {hw.source}), "
                + costs.sources["gemm"].removeprefix(f"chip TLM {preset}, ")
            )
            costs.source = "; ".join(costs.sources.values())
        return costs

    @classmethod
    def for_hardware(
        cls, hardware, efficiency: float | None = None, call_s: float | None = None
    ) -> OpCosts:
        """A cluster hardware file's chip (:func:`tlm.hardware.load_hardware`).

        A Trainium file (it names a chip preset) gets :meth:`for_preset`'s calibrated costs
        unless ``efficiency`` is given; any other chip the roofline
        ``max(flops / (peak x efficiency), bytes / HBM bandwidth)``.

        Parameters
        ----------
        hardware : Hardware
        efficiency : float, optional
            Fraction of the dense peak large GEMMs reach, in (0, 1]; default the hardware
            file's ``gemm_efficiency`` (FITTED by tools/calibrate_training.py), else
            :data:`DEFAULT_EFFICIENCY` (ASSUMED).
        call_s : float, optional
            Seconds each GEMM kernel costs beyond its roofline (launch, prologue, the last
            wave's tail), >= 0; default the file's ``gemm_call_s``, else
            :data:`DEFAULT_CALL_S` (ASSUMED). A batch of products is one kernel.

        Raises
        ------
        CostsError
            ``efficiency`` outside (0, 1], or ``hardware`` not a Hardware.
        """
        from ..hardware import Hardware

        if not isinstance(hardware, Hardware):
            raise CostsError(
                f"hardware must be a Hardware (tlm.hardware.load_hardware), not {hardware!r}"
            )
        if efficiency is not None and (
            isinstance(efficiency, bool)
            or not isinstance(efficiency, int | float)
            or not 0 < efficiency <= 1
        ):
            raise CostsError(f"efficiency must be a number in (0, 1], not {efficiency!r}")
        if call_s is not None and (
            isinstance(call_s, bool) or not isinstance(call_s, int | float) or not call_s >= 0
        ):
            raise CostsError(f"call_s must be a number of seconds >= 0, not {call_s!r}")
        if hardware.chip_preset is not None and efficiency is None and call_s is None:
            return cls.for_preset(hardware.chip_preset)

        def pick(given, name, default):
            """The value given, else the file's (and its source), else the default."""
            if given is not None:
                return float(given), "given"
            if getattr(hardware, name) is not None:
                return getattr(hardware, name), hardware.sources[name].split(": ", 1)[-1]
            return default, "ASSUMED"

        eff, told = pick(efficiency, "gemm_efficiency", DEFAULT_EFFICIENCY)
        fixed, told_call = pick(call_s, "gemm_call_s", DEFAULT_CALL_S)
        peaks = {k: v for k, v in hardware.dense_flops.items() if k in _OPERAND_BYTES}
        where = hardware.sources.get("hbm_bandwidth_Bps", hardware.name).split(":")[0]
        listed = ", ".join(f"{k} {v / 1e12:g} TFLOP/s" for k, v in peaks.items())
        sources = {
            "gemm": f"roofline: peak x efficiency {eff:g} {told}, {fixed * 1e6:g} us per "
            f"kernel {told_call} (no chip TLM for {hardware.name}; peaks {listed})",
            "memory": f"memory: HBM roofline at {hardware.hbm_bandwidth_Bps / 1e12:g} TB/s "
            f"({where})",
            "vector": "vector: HBM roofline of the operands only (no engine model for "
            f"{hardware.name}; fused work costs 0)",
        }
        flash = FA2 if hardware.chip_preset is None else NKI_FLASH
        speed = FA2_SPEED.get(hardware.name) if hardware.chip_preset is None else None
        flash_eff = None
        if speed is not None:
            flash_eff = FlashSpeed(flash, *speed)
            fwd, bwd = flash_eff(8192)
            sources["flash"] = (
                f"flash: {flash.name} at {fwd:.3f} / {bwd:.3f} of peak on its tiles at 8K, "
                f"forward / backward, by sequence length ({speed[0].source}; {speed[1].source})"
            )
        return cls(
            name=hardware.name,
            peaks=peaks,
            hbm_bandwidth_Bps=hardware.hbm_bandwidth_Bps,
            efficiency=eff,
            sources=sources,
            call_s=fixed,
            flash=flash,
            flash_efficiency=flash_eff,
        )

    # ---- figures --------------------------------------------------------------------------

    def formats(self) -> tuple[str, ...]:
        """The number formats the chip's tensor engine has a peak in (``fmt`` names)."""
        return tuple(f for f, k in FORMAT_TABLE.items() if k in self._peaks)

    def peak_flops(self, fmt: str = "bf16") -> float:
        """Dense peak FLOP/s of the chip in ``fmt`` (for a preset: the TLM's clock x array)."""
        return float(self._peaks[_fmt_key(fmt, self._peaks, self.name)])

    def _shape(self, m, n, k, batch, fmt):
        key = _fmt_key(fmt, self._peaks, self.name)
        m = _array("m", m, 0, False, "a positive number (rows; < 1 for a fraction of calls)")
        n = _array("n", n, 1, True, "a number >= 1")
        k = _array("k", k, 1, True, "a number >= 1")
        batch = _array("batch", batch, 1, True, "an integer >= 1")
        if type(batch) is float:
            if batch != math.floor(batch):
                raise CostsError(f"batch must be an integer >= 1, not {batch!r}")
            if not any(type(x) is np.ndarray for x in (m, n, k)):
                return key, m, n, k, batch  # one shape: the scalar path
            batch = np.asarray(batch)
        whole = batch == np.floor(batch)
        if not whole.all():
            raise CostsError(f"batch must be an integer >= 1, not {float(batch[~whole].flat[0])!r}")
        return key, *np.broadcast_arrays(m, n, k, batch)

    def _roofline(self, key, m, n, k, batch):
        flop = 2.0 * batch * m * n * k
        size = _OPERAND_BYTES[key]
        out = 4 if key == "fp32" else 2
        nbytes = batch * ((m * k + k * n) * size + m * n * out)
        compute = flop / (self._peaks[key] * self.efficiency)
        return self.call_s + maximum(compute, nbytes / self.hbm_bandwidth_Bps)

    def _product_s(self, key, cores, m, n, k):
        """Seconds of one product on ``cores`` (``all`` or ``one``) from the calibration.

        On all cores the shape is first replaced by :func:`balanced_shape` (the busiest
        core's load spread over every core: a ragged last block or one block too many for
        the cores costs a whole round). Inside the grid: the interpolated efficiency. Beyond
        its largest M, N or K: the steady state - the edge's tiles repeated,
        ``t = t0 + (t(edge) - t0) x ratio``, with
        ``ratio`` the shape's work over the edge shape's (the product of ``x / top`` over the
        dimensions beyond) and ``t0`` the kernel's fixed time (the grid's ``1 x 1 x 1``: one
        load, one matmul, one copy, one store), paid once. A fraction ``m < 1`` of a row
        costs that fraction of a one-row product.
        """
        table = self._tables[key]
        rows = maximum(m, 1.0)
        if cores == "all":
            rows, n = balanced_shape(rows, n, self._cores)
        cm, cn, ck = (minimum(x, top) for x, top in zip((rows, n, k), table.top, strict=True))
        eff = _interpolate(table, cores, cm, cn, ck)
        peak = self._peaks[key] / (1 if cores == "all" else self._cores)
        edge = 2.0 * cm * cn * ck / (peak * eff)
        ratio = (rows / cm) * (n / cn) * (k / ck)
        fixed = table.fixed_s[cores]
        t = where(ratio > 1, fixed + (edge - fixed) * ratio, edge)
        return t * minimum(m, 1.0) * self.gemm_hardware_ratio

    def gemm_s(self, m, n, k, batch=1, fmt: str = "bf16"):
        """Seconds for ``batch`` products ``[m, k] x [k, n]`` on one chip.

        With a calibration: one product (``batch`` 1) takes the calibrated time of the shipped
        kernel on all cores, interpolated; ``batch`` > 1 products take the faster of running
        them one after another on all cores and side by side, one per core
        (``ceil(batch / cores)`` rounds of the one-core time, at least the HBM roofline of all
        their operands). Without: the roofline.

        Parameters
        ----------
        m : array_like
            Rows of A and C, > 0 (a MoE expert's average tokens may be fractional; below 1 it
            is that fraction of a one-row product).
        n, k : array_like
            Columns of C and the contraction, >= 1.
        batch : array_like
            Independent products, an integer >= 1.
        fmt : str
            Operand format, a key of :data:`FORMAT_TABLE` the chip has a peak for.

        Returns
        -------
        numpy.ndarray or numpy.float64
            Seconds, of the broadcast shape of the arguments.

        Raises
        ------
        CostsError
            Naming the argument, its first bad value and what is allowed.
        """
        key, m, n, k, batch = self._shape(m, n, k, batch, fmt)
        if key not in self._tables:
            return _out(self._roofline(key, m, n, k, batch))
        t = self._product_s(key, "all", m, n, k)
        if type(t) is not np.ndarray:  # one shape
            if batch > 1:
                side = ceil(batch / self._cores) * self._product_s(key, "one", m, n, k)
                nbytes = batch * ((m * k + k * n) * _OPERAND_BYTES[key] + m * n * 2)
                side = maximum(side, nbytes / self.hbm_bandwidth_Bps)
                t = minimum(batch * t, side)
            return _out(t)
        many = batch > 1
        if many.any():  # the one-core table only where it can matter
            b, mm, nn, kk = (x[many] for x in (batch, m, n, k))
            side = np.ceil(b / self._cores) * self._product_s(key, "one", mm, nn, kk)
            nbytes = b * ((mm * kk + kk * nn) * _OPERAND_BYTES[key] + mm * nn * 2)
            side = np.maximum(side, nbytes / self.hbm_bandwidth_Bps)
            t = np.array(t, dtype=float)  # writable, also for 0-d
            t[many] = np.minimum(b * t[many], side)
        return _out(t)

    def gemm_efficiency(self, m, n, k, batch=1, fmt: str = "bf16"):
        """Fraction of the dense peak :meth:`gemm_s`'s time achieves (same arguments)."""
        key, m, n, k, batch = self._shape(m, n, k, batch, fmt)
        seconds = np.asarray(self.gemm_s(m, n, k, batch, fmt))
        return _out(2.0 * batch * m * n * k / (seconds * self._peaks[key]))

    def gemm_basis(self, m, n, k, batch=1, fmt: str = "bf16"):
        """Where each :meth:`gemm_s` figure comes from: codes into :data:`BASIS`
        (0 calibrated, 1 extrapolated beyond the grid, 2 roofline), an int8 array."""
        key, *shape = self._shape(m, n, k, batch, fmt)
        m, n, k, batch = (np.asarray(x, dtype=float) for x in shape)
        if key not in self._tables:
            return _out(np.full(m.shape, 2, dtype=np.int8))
        top = self._tables[key].top
        rows, cols = balanced_shape(np.maximum(m, 1.0), n, self._cores)
        beyond = (np.maximum(m, rows) > top[0]) | (np.maximum(n, cols) > top[1]) | (k > top[2])
        return _out(np.asarray(beyond, dtype=np.int8))  # (a scalar's too: not a float)

    def memory_s(self, nbytes):
        """Seconds to move ``nbytes`` (>= 0) to or from HBM at its full bandwidth."""
        nbytes = _array("nbytes", nbytes, 0, True, "a number of bytes >= 0")
        return _out(nbytes / self.hbm_bandwidth_Bps)

    def vector_s(self, elements, op: str = "elementwise", fmt: str = "bf16", from_hbm=True):
        """Seconds of an elementwise operator over ``elements`` on one chip's Vector and
        Scalar engines (all cores, 128 partitions each).

        Parameters
        ----------
        elements : array_like
            Elements of the operator's output (>= 0); a norm or softmax over rows counts
            every element of every row.
        op : str
            A key of :data:`VECTOR_OPS`: ``elementwise``, ``activation``, ``softmax``,
            ``norm``.
        fmt : str
            Operand format (``bf16``, ``fp16``, ``fp8*``, ``fp32``): 2-byte operands stream
            at the engines' 2-byte rate, others at the 4-byte rate.
        from_hbm : bool
            The operands come from HBM and the result goes back (an unfused operator): at
            least the HBM roofline of those bytes. False when it is fused into a GEMM's
            epilogue (data in SBUF/PSUM).

        Returns
        -------
        numpy.ndarray or numpy.float64
            Seconds, of the shape of ``elements``.
        """
        if op not in VECTOR_OPS:
            raise CostsError(f"op must be one of {', '.join(VECTOR_OPS)}, not {op!r}")
        key = _fmt_key(fmt, _VECTOR_BYTES)
        elements = _array("elements", elements, 0, True, "a number of elements >= 0")
        if not isinstance(from_hbm, bool):
            raise CostsError(f"from_hbm must be True or False, not {from_hbm!r}")
        spec = VECTOR_OPS[op]
        nbytes = elements * spec["hbm_elements"] * _OPERAND_BYTES[key]
        hbm = nbytes / self.hbm_bandwidth_Bps if from_hbm else zeros_like(elements)
        if self._spec is None:
            return _out(hbm)
        wide = spec["fp32"] or _OPERAND_BYTES[key] > 2
        per_partition = ceil(elements / (self._cores * self._spec.core.sbuf_partitions))
        instructions = ceil(per_partition / VECTOR_TILE_ELEMENTS)
        engine_s = zeros_like(elements)
        for name in ("vector", "scalar"):
            if not spec[name]:
                continue
            e = getattr(self._spec, name)
            rate = e.elements_per_cycle_4byte if wide else e.elements_per_cycle_2byte
            # isa.stream_cycles per instruction, summed over the instructions of one pass
            cycles = instructions * e.fixed_cycles + ceil(
                per_partition * self._spec.core.sbuf_partitions / rate
            )
            engine_s = maximum(engine_s, spec[name] * cycles / e.freq_hz)
        return _out(maximum(engine_s, hbm))


def _parse(text: str, where: str, preset: str) -> dict:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as error:
        raise CostsError(f"{where}: not valid JSON: {error}") from None
    if not isinstance(raw, dict) or raw.get("version") != DATA_VERSION:
        got = raw.get("version") if isinstance(raw, dict) else None
        raise CostsError(
            f"{where}: version must be {DATA_VERSION}, not {got!r} (rebuild it with "
            f"tools/calibrate_costs.py --preset {preset})"
        )
    if raw.get("preset") != preset:
        raise CostsError(f"{where}: preset must be {preset!r}, not {raw.get('preset')!r}")
    for name in ("m", "n", "k"):
        axis = raw.get("axes", {}).get(name)
        if (
            not isinstance(axis, list)
            or len(axis) < 2
            or any(not isinstance(a, int) or a < 1 for a in axis)
            or sorted(set(axis)) != axis
        ):
            raise CostsError(
                f"{where}: axes.{name} must be at least two ascending positive integers, "
                f"not {axis!r}"
            )
    size = len(raw["axes"]["m"]) * len(raw["axes"]["n"]) * len(raw["axes"]["k"])
    for f, table in raw.get("tables", {}).items():
        if f not in FORMATS:
            raise CostsError(f"{where}: tables.{f} must be one of {', '.join(FORMATS)}")
        for cores in CORES:
            times = table.get(cores)
            if not isinstance(times, list) or len(times) != size:
                raise CostsError(
                    f"{where}: tables.{f}.{cores} must be a list of {size} times, one per shape"
                )
            if not all(isinstance(t, int | float) and t > 0 for t in times):
                raise CostsError(f"{where}: tables.{f}.{cores} must hold positive seconds")
    return raw


def _table(raw: dict, fmt: str, peak: float, cores: int) -> _Table:
    axes = [np.asarray(raw["axes"][d], dtype=float) for d in ("m", "n", "k")]
    flop = 2.0 * axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]
    eff = {}
    for c in CORES:
        times = np.asarray(raw["tables"][fmt][c], dtype=float).reshape(flop.shape)
        eff[c] = np.log(flop / (times * (peak if c == "all" else peak / cores))).ravel()
    log_axes = tuple(np.log2(a) for a in axes)
    return _Table(
        log_axes=log_axes,
        uniform=all((np.diff(a) == 1).all() for a in log_axes),
        top=tuple(float(a[-1]) for a in axes),
        log_efficiency=eff,
        fixed_s={c: float(raw["tables"][fmt][c][0]) for c in CORES},
    )
