"""``trnsim gemm``: a tiled GEMM on one chip, timed (timing only), optionally traced.

The shipped kernel (:func:`tlm.kernels.build_gemm`) records ``C = A @ B`` on the chip's cores
and the SimPy timing model runs it: engines, DMA queues and HBM stacks sharing bandwidth.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("gemm", m=512, n=512, k=512).results
>>> 0 < r.of_peak_fraction < 1
True
"""

from __future__ import annotations

from pydantic import Field

from ..chip.trace import write_chrome_trace, write_vcd
from ..core.errors import KernelError
from ..core.view import DTYPE_NAMES
from ..formats import MX_BLOCK, MX_FORMATS
from ..kernels import build_gemm
from .preset import PresetInputs
from .protocol import (
    MAX_GEMM_SIZE,
    InputError,
    Results,
    Study,
    format_field,
    register,
    writable_path,
)

__all__ = ["GemmInputs", "GemmResults", "gemm_study", "ENGINES"]

#: Engines whose utilisation the study reports.
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")

#: Input formats: the kernel's dtypes, and the MX formats (on chips with MX).
FORMAT_NAMES = (*DTYPE_NAMES, *MX_FORMATS)


class GemmInputs(PresetInputs):
    """Inputs of ``trnsim gemm``."""

    format: str = format_field(
        "bf16",
        FORMAT_NAMES,
        description="input format of A and B (C is bf16, fp32 for fp32; MX on trn3)",
    )
    m: int = Field(4096, ge=1, le=MAX_GEMM_SIZE, description="rows of A and C")
    n: int = Field(4096, ge=1, le=MAX_GEMM_SIZE, description="columns of B and C")
    k: int = Field(4096, ge=1, le=MAX_GEMM_SIZE, description="contraction size")
    cores: int | None = Field(
        None,
        description="cores to use (default: all of the chip's)",
        json_schema_extra={"allowed": "an integer in 1..the preset's cores"},
    )
    bufs: int = Field(4, ge=2, le=1024, description="SBUF buffers per input stream")
    trace: str | None = Field(
        None,
        description="write a Chrome/Perfetto JSON trace to this file",
        json_schema_extra={"allowed": "a file path this user may write", "unset": "none"},
    )
    vcd: str | None = Field(
        None,
        description="write a VCD (engines busy, queues, SBUF use) to this file",
        json_schema_extra={"allowed": "a file path this user may write", "unset": "none"},
    )

    def resolve(self) -> GemmInputs:
        self.check_format(self.format, names=FORMAT_NAMES)
        mx = MX_FORMATS.get(self.format)
        if mx is not None and mx.element.bits < 8:
            raise InputError(
                "format",
                self.format,
                f"one of {', '.join(n for n in FORMAT_NAMES if n != self.format)}",
                "is not one the GEMM kernel takes: the chip model's memories hold a byte per "
                "element and do not pack 4-bit values (trnsim tensor prices MXFP4)",
            )
        if mx is not None and self.k % MX_BLOCK:
            raise InputError(
                "k",
                self.k,
                f"a multiple of {MX_BLOCK} for {self.format} (one E8M0 scale per "
                f"{MX_BLOCK} elements of K)",
            )
        total = self.spec.chip.cores
        cores = total if self.cores is None else self.cores
        if not 1 <= cores <= total:
            raise InputError(
                "cores", cores, f"an integer in 1..{total} (the cores of {self.spec.name})"
            )
        writable_path("trace", self.trace)
        writable_path("vcd", self.vcd)
        return self.model_copy(update={"cores": cores})


class GemmResults(Results):
    """Time, throughput and what each engine and HBM did."""

    time_s: float
    achieved_flop_per_s: float
    peak_flop_per_s: float = Field(
        description="the engine's dense peak at this format: cores x rows x cols x 2 x clock"
    )
    published_peak_flop_per_s: float | None = Field(
        description="the chip's published dense peak at this format (the preset's [published]; "
        "trn2's 1,299 FP8 TFLOPS is a lower clock than 667 BF16's: --choose "
        "tensor.freq_hz=chip_fp8 runs at it; trn3's 2,517 MX TFLOPS likewise: chip_mxfp8)"
    )
    of_peak_fraction: float
    tensor_utilisation_fraction: float
    vector_utilisation_fraction: float
    scalar_utilisation_fraction: float
    gpsimd_utilisation_fraction: float
    dma_utilisation_fraction: float
    hbm_bandwidth_Bps: float = Field(description="bytes moved to and from HBM per second")
    hbm_peak_Bps: float
    instructions: int


def _capacity_error(inputs: GemmInputs, error: KernelError) -> InputError | None:
    """The input a kernel's capacity error comes from: the operands' size for HBM (the largest
    of m, n, k), the buffers for SBUF; None for any other error."""
    if "HBM overflow" in error.rule:
        field = max(("m", "n", "k"), key=lambda f: getattr(inputs, f))
        return InputError(
            field,
            getattr(inputs, field),
            "sizes whose A, B and C fit the chip's HBM",
            f"is too large ({error.rule})",
        )
    if "SBUF" in error.rule and "overflow" in error.rule:
        return InputError(
            "bufs",
            inputs.bufs,
            "as many buffers as SBUF holds at this tile size (2 or more)",
            f"is too many ({error.rule})",
        )
    return None


def gemm_study(inputs: GemmInputs) -> GemmResults:
    """Run the GEMM kernel in timing-only mode (and write the trace and VCD if asked)."""
    try:
        kernel, _blocks, _c = build_gemm(
            inputs.m,
            inputs.n,
            inputs.k,
            inputs.format,
            preset=inputs.preset,
            choose=inputs.choose or None,
            values=False,
            cores=inputs.cores,
            bufs=inputs.bufs,
        )
        run = kernel.run()
    except KernelError as error:
        named = _capacity_error(inputs, error)
        if named is None:
            raise
        raise named from None
    spec = kernel.spec
    peak = spec.peak_flops(inputs.format)
    flops = 2.0 * inputs.m * inputs.n * inputs.k
    for field, write in (("trace", write_chrome_trace), ("vcd", write_vcd)):
        path = getattr(inputs, field)
        if path is not None:
            try:
                write(run, path)
            except OSError as error:
                raise InputError(
                    field,
                    path,
                    "a file path this user may write",
                    f"cannot be written ({error.strerror})",
                ) from None
    return GemmResults(
        time_s=run.time_s,
        achieved_flop_per_s=flops / run.time_s,
        peak_flop_per_s=peak,
        published_peak_flop_per_s=_published_peak(spec, inputs.format),
        of_peak_fraction=flops / run.time_s / peak,
        **{f"{e}_utilisation_fraction": run.utilisation(e) for e in ENGINES},
        hbm_bandwidth_Bps=run.hbm_bandwidth_Bps,
        hbm_peak_Bps=spec.chip.hbm_bandwidth_Bps,
        instructions=run.instructions,
    )


def _published_peak(spec, fmt: str) -> float | None:
    """The preset's published dense peak for ``fmt`` (None where it gives none)."""
    key = "fp8" if fmt.startswith("fp8") else ("bf16" if fmt == "fp16" else fmt)
    key = "mx" if fmt in MX_FORMATS else key
    published = getattr(spec, "published", None)
    return getattr(published, f"dense_{key}_flops", None) if published is not None else None


STUDY = register(Study("gemm", GemmInputs, gemm_study))
