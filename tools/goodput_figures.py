"""Goodput against chips for each reliability strategy: the figure and the table of
docs/cluster.md ("Reliability strategies at scale").

    .venv/bin/python tools/goodput_figures.py                    # docs/goodput_strategies.png
    .venv/bin/python tools/goodput_figures.py --plot out.png     # elsewhere

Llama 3 405B's checkpoint (weights, FP32 master and Adam moments) on trn2 servers of 16 chips,
Llama 3's failure rates, every other input at :mod:`tlm.cluster.goodput`'s defaults; each
strategy adds the options of :data:`STRATEGIES`. Prints the table as Markdown.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tlm.cluster.goodput import (  # noqa: E402
    DEFAULT_MEMORY_CHECKPOINT_BPS,
    FAST_SWAP_S,
    LLAMA3_REPLICA_CHIPS,
    Resilience,
    checkpoint_bytes,
    goodput,
)

#: Chips of the table's rows; the figure's curves run from 1k to 1M.
TABLE_CHIPS = (1024, 16384, 131072, 524288, 1048576)
#: Independent jobs of the "N jobs" strategy: ASSUMED 8.
JOBS = 8
#: Each strategy's options (all off is the baseline; "all" combines the others).
STRATEGIES = {
    "baseline": Resilience(),
    "in-memory checkpoints": Resilience(memory_checkpoint_Bps=DEFAULT_MEMORY_CHECKPOINT_BPS),
    "hot spares, fast swap": Resilience(swap_s=FAST_SWAP_S),
    "elastic DP": Resilience(elastic_replica_chips=LLAMA3_REPLICA_CHIPS),
    f"{JOBS} jobs": Resilience(jobs=JOBS),
    "all combined": Resilience(
        swap_s=FAST_SWAP_S,
        memory_checkpoint_Bps=DEFAULT_MEMORY_CHECKPOINT_BPS,
        elastic_replica_chips=LLAMA3_REPLICA_CHIPS,
        jobs=JOBS,
    ),
}


def curves(chips, model: str = "llama3-405b", hardware: str = "trn2") -> dict:
    """Each strategy's :class:`tlm.cluster.goodput.Goodput` over ``chips``."""
    from tlm.hardware import load_hardware
    from tlm.workloads import load_model

    server = load_hardware(hardware).server_chips
    ckpt = checkpoint_bytes(load_model(model))
    chips = np.asarray(chips)
    return {
        name: goodput(chips=chips, server_chips=server, checkpoint_bytes=ckpt, **r.options())
        for name, r in STRATEGIES.items()
    }


def table(results: dict) -> str:
    """Goodput of each strategy (rows) at each of the table's chip counts (columns), and each
    one's mean time between stops of a job at the largest."""
    chips = next(iter(results.values())).chips
    head = "| strategy | " + " | ".join(f"{int(n):,}" for n in chips) + " | MTBF of a job at 1M |"
    lines = [head, "|---" * (len(chips) + 2) + "|"]
    for name, g in results.items():
        cells = " | ".join(f"{x:.1%}" for x in g.goodput_fraction)
        lines.append(f"| {name} | {cells} | {_duration(float(g.mtbf_s[-1]))} |")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    """Minutes below an hour (``19 min``), else the studies' own units (``2.57 h``)."""
    from tlm.studies.units import human

    return f"{seconds / 60:.1f} min" if seconds < 3600 else human("mtbf_s", seconds)


def plot(results: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name, g in results.items():
        style = "k-" if name == "baseline" else ("k--" if name == "all combined" else "-")
        ax.plot(g.chips, 100 * g.goodput_fraction, style, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("chips (trn2, servers of 16)")
    ax.set_ylabel("goodput (% of chip-time useful)")
    ax.set_ylim(0, 100)
    ax.set_title("Llama 3 405B checkpoints, Llama 3 failure rates: goodput by strategy")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "goodput_strategies.png")
    args = parser.parse_args(argv)
    plot(curves(np.unique(np.geomspace(1024, 1048576, 61).round())), args.plot)
    print(table(curves(TABLE_CHIPS)))
    print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
