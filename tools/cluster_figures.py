"""The cluster model's figures in docs/: scaling from 1k to 1M chips, a step-time breakdown and
a Pareto front, each from the shipped studies (``trnsim train-search`` and ``trnsim train``).

    .venv/bin/python tools/cluster_figures.py            # writes docs/cluster_*.png

Scaling: for each chip count, the search's fastest layout that fits (the model file's global
batch: the batch does not grow with the cluster, so very large clusters run out of data
parallelism and their MFU falls - the figure shows where), with its time to train (goodput
included), MFU, goodput and facility power.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COUNTS = (1024, 4096, 16384, 65536, 262144, 1048576)


def scaling(model: str, hardware: str, path: Path) -> list[dict]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from tlm.cluster.search import NoValidLayout, search
    from tlm.hardware import load_hardware
    from tlm.workloads import load_model

    m, hw = load_model(model), load_hardware(hardware)
    rows = []
    for n in COUNTS:
        try:
            best = search(m, hw, [n], scheduler="inline").best("time")
        except NoValidLayout as error:
            print(f"{n} chips: {error}")
            continue
        rows.append(best)
        print(
            f"{n:>8} chips: dp {best['dp']} tp {best['tp']} pp {best['pp']} cp {best['cp']} "
            f"mb {best['micro_batch']} v {best['interleave']} {best['recompute']}: "
            f"{best['train_s'] / 86400:.1f} days, MFU {best['mfu']:.1%}, goodput "
            f"{best['goodput']:.1%}, {best['power_w'] / 1e6:.1f} MW"
        )
    chips = [r["chips"] for r in rows]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
    panels = (
        ("days to train", [r["train_s"] / 86400 for r in rows], True),
        ("MFU (%)", [100 * r["mfu"] for r in rows], False),
        ("goodput (%)", [100 * r["goodput"] for r in rows], False),
        ("facility power (MW)", [r["power_w"] / 1e6 for r in rows], True),
    )
    for ax, (label, values, log) in zip(axes, panels, strict=True):
        ax.plot(chips, values, "o-")
        ax.set_xscale("log", base=2)
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("chips")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{model} on {hardware}: the fastest fitting layout at each size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return rows


def main() -> int:
    from tlm.studies import run_study

    docs = ROOT / "docs"
    scaling("llama3-405b", "trn2", docs / "cluster_scaling.png")
    run_study(
        "train",
        model="llama3-405b",
        hardware="trn2",
        chips=16384,
        tp=16,
        pp=8,
        interleave=2,
        plot=str(docs / "cluster_breakdown.png"),
    )
    run_study(
        "train-search",
        model="llama3-70b",
        hardware="trn2",
        chips="1024..16384:2",
        scheduler="inline",
        plot=str(docs / "cluster_pareto.png"),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
