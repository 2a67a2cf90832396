"""``trnsim gemm``: a tiled GEMM on one chip, timed (and optionally traced).

trnsim gemm --preset trn2 --m 4096 --n 4096 --k 4096 --dtype bf16 --trace out.json
"""

from __future__ import annotations

import argparse

from ..presets import PRESETS

__all__ = ["add_gemm_parser", "gemm_study"]

DTYPES = ("bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "fp32")


def _choice(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected section.figure=alternative, not {text!r}")
    key, _, alt = text.partition("=")
    return key.strip(), alt.strip()


def gemm_study(args) -> list[dict]:
    """Run the GEMM kernel in timing-only mode and return its figures as table rows."""
    from ..kernels import build_gemm
    from .trace import write_chrome_trace, write_vcd

    kernel, _blocks, _c = build_gemm(
        args.m,
        args.n,
        args.k,
        args.dtype,
        preset=args.preset,
        choose=dict(args.choose) or None,
        values=False,
        cores=args.cores,
        bufs=args.bufs,
    )
    run = kernel.run()
    spec = kernel.spec
    peak = spec.peak_flops(args.dtype)
    flops = 2.0 * args.m * args.n * args.k
    rows = [
        ("preset", spec.name, ""),
        ("gemm", f"{args.m}x{args.n}x{args.k} {args.dtype}", "M x N x K"),
        ("time", run.time_s * 1e6, "us"),
        ("achieved", flops / run.time_s / 1e12, "TFLOPS"),
        ("peak (model)", peak / 1e12, "TFLOPS"),
        ("of peak", 100 * flops / run.time_s / peak, "%"),
    ]
    for engine in ("tensor", "vector", "scalar", "gpsimd", "dma"):
        rows.append((f"{engine} utilisation", 100 * run.utilisation(engine), "%"))
    rows += [
        ("HBM bandwidth used", run.hbm_bandwidth_Bps / 1e9, "GB/s"),
        ("HBM peak", spec.chip.hbm_bandwidth_Bps / 1e9, "GB/s"),
        ("instructions", run.instructions, ""),
        ("simulation wall time", run.wall_s, "s"),
    ]
    if args.trace:
        rows.append(("trace", str(write_chrome_trace(run, args.trace)), "Chrome/Perfetto"))
    if args.vcd:
        rows.append(("vcd", str(write_vcd(run, args.vcd)), "GTKWave"))
    return [{"figure": f, "value": v, "unit": u} for f, v, u in rows]


def add_gemm_parser(sub) -> argparse.ArgumentParser:
    """Register ``trnsim gemm`` on the subparsers of ``trnsim``."""
    g = sub.add_parser("gemm", help="tiled GEMM on one chip: time, TFLOPS, utilisation, HBM")
    g.add_argument("--preset", default="trn2", choices=PRESETS, help="chip preset (trn2)")
    g.add_argument("--m", type=int, default=4096, help="rows of A and C (default 4096)")
    g.add_argument("--n", type=int, default=4096, help="columns of B and C (default 4096)")
    g.add_argument("--k", type=int, default=4096, help="contraction size (default 4096)")
    g.add_argument("--dtype", default="bf16", choices=DTYPES, help="input format (bf16)")
    g.add_argument("--cores", type=int, default=None, help="cores to use (default: all)")
    g.add_argument("--bufs", type=int, default=4, help="SBUF buffers per input stream (4)")
    g.add_argument(
        "--choose",
        type=_choice,
        action="append",
        default=[],
        metavar="SECTION.FIGURE=ALT",
        help="pick a named alternative, e.g. tensor.freq_hz=core_nki2",
    )
    g.add_argument("--trace", default=None, help="write a Chrome/Perfetto JSON trace here")
    g.add_argument("--vcd", default=None, help="write a VCD (engine busy, queues, SBUF) here")
    g.add_argument("--json", action="store_true", help="print JSON")
    g.set_defaults(study=gemm_study, title="GEMM on one chip (timing only)")
    return g
