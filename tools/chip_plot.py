"""Draw docs/chip_timeline.png: the timeline of a GEMM on the trn2 chip model.

    .venv/bin/python tools/chip_plot.py [--m 4096 --n 4096 --k 4096] [-o docs/chip_timeline.png]

Top: core 0's engines and DMA queues, one bar per instruction (start to queue free). Bottom:
SBUF bytes per partition in use on core 0 and the chip's HBM bandwidth in use over time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COLORS = {
    "nc_matmul": "tab:blue",
    "dma_copy": "tab:orange",
    "tensor_copy": "tab:green",
    "activation": "tab:red",
}


def main(argv=None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from tlm.kernels import build_gemm

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--format", default="bf16", help="input format (the flag of trnsim gemm)")
    p.add_argument("-o", "--out", default=str(ROOT / "docs" / "chip_timeline.png"))
    args = p.parse_args(argv)
    kernel, _, _ = build_gemm(args.m, args.n, args.k, args.format)
    run = kernel.run()
    core0 = [i for i in run.program if i.core == 0]
    queues = ["tensor", "vector", "scalar"] + [f"dma{q}" for q in range(16)]
    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(12, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for row, queue in enumerate(queues):
        for op in COLORS:
            spans = [
                (i.start_s * 1e6, (i.end_s - i.start_s) * 1e6)
                for i in core0
                if i.queue == queue and i.op == op
            ]
            if spans:
                ax.broken_barh(spans, (row - 0.4, 0.8), color=COLORS[op])
    ax.set_yticks(range(len(queues)), queues)
    ax.invert_yaxis()
    ax.legend(
        handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()],
        labels=list(COLORS),
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize=8,
    )
    peak = 100 * run.flops / run.time_s / kernel.spec.peak_flops(args.format)
    ax.set_title(
        f"GEMM {args.m}x{args.n}x{args.k} {args.format} on trn2 (8 cores): core 0; "
        f"{run.time_s * 1e6:.1f} us, {peak:.1f}% of peak"
    )
    # SBUF occupancy of core 0 and HBM bandwidth of the chip
    from tlm.chip.trace import _sbuf_changes

    steps, level = [(0.0, 0)], 0
    for t, core, delta in _sbuf_changes(run):
        if core == 0:
            level += delta
            steps.append((t * 1e6, level))
    xs, ys = zip(*steps, strict=True)
    ax2.step(xs, np.array(ys) / 1024, where="post", color="tab:purple", label="SBUF KiB/partition")
    ax2.set_ylabel("SBUF KiB / partition")
    times = [t * 1e6 for t, _ in run.bandwidth_history]
    hbm = [
        sum(v for r, v in use.items() if r.startswith("hbm")) / 1e9
        for _, use in run.bandwidth_history
    ]
    twin = ax2.twinx()
    twin.step(times, hbm, where="post", color="tab:gray", lw=0.8)
    twin.axhline(kernel.spec.chip.hbm_bandwidth_Bps / 1e9, color="tab:gray", ls=":", lw=0.8)
    twin.set_ylabel("HBM GB/s (chip)")
    ax2.set_xlabel("simulated time (us)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
