"""Figures of the NeuronLink torus (docs/noc.md), rerunnable by anyone:

    .venv/bin/python tools/noc_figures.py            # TLM sweeps and RTL points (~4 min)
    .venv/bin/python tools/noc_figures.py --no-rtl   # TLM only

Writes ``docs/noc_latency_4x4.png``, ``docs/noc_latency_4x4x4.png`` (latency against offered
load, uniform random traffic, 4-flit packets: the model's curve with RTL points on it: 4x4 on
Icarus, 4x4x4 on Verilator) and ``docs/noc_figures.json`` (every point, the zero-load latency
against its closed form, saturation throughput against the channel-load bound).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.link.bounds import channel_load_bound  # noqa: E402
from tlm.link.config import LinkConfig  # noqa: E402
from tlm.link.measure import simulate  # noqa: E402

SHAPES = {"4x4": ("icarus", 1500), "4x4x4": ("verilator", 1500)}
RATES = [0.05, 0.1, 0.2, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9, 1.0]
RTL_RATES = [0.1, 0.3, 0.45]
LENGTH = 4


def tlm_sweep(shape, cycles, seed):
    cfg = LinkConfig(shape)
    points = []
    for rate in RATES:
        r = simulate(cfg, "uniform", rate, cycles, length=LENGTH, seed=seed)
        r.pop("links")
        points.append(r)
        print(
            f"  TLM {shape} rate {rate}: accepted {r['accepted']:.3f}, "
            f"latency {r['latency_mean']:.1f}",
            flush=True,
        )
    return points


def rtl_points(shape, sim, cycles, seed):
    from verif.common.runner import run
    from verif.link.build import build_link

    cfg = LinkConfig(shape)
    simbuild = build_link(sim, "torus", cfg)
    out = ROOT / "build" / "noc" / f"rtl_load_{shape}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    run(
        simbuild,
        "verif.link.bench_load",
        env={
            "LINK_SHAPE": shape,
            "LINK_RATES": ",".join(str(r) for r in RTL_RATES),
            "LINK_CYCLES": cycles,
            "LINK_LENGTH": LENGTH,
            "SEED": seed,
            "LINK_LOAD_JSON": out,
            "PYTHONPATH": ROOT,
        },
        test_dir=simbuild.build_dir / "load",
    )
    return json.loads(out.read_text())


def plot(shape, sweep, rtl, zero_load, bound, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    xs = [p["offered"] for p in sweep]
    ys = [p["latency_mean"] for p in sweep]
    ax.plot(xs, ys, "o-", label="TLM (cycle-exact model)", color="tab:blue")
    if rtl:
        ax.plot(
            [p["offered"] for p in rtl],
            [p["latency_mean"] for p in rtl],
            "x",
            markersize=11,
            mew=2.5,
            color="tab:red",
            label="RTL (measured)",
        )
    ax.axhline(zero_load, ls=":", color="gray", label=f"zero-load closed form {zero_load:.1f}")
    sat = max(p["accepted"] for p in sweep)
    ax.axvline(sat, ls="--", color="tab:green", label=f"saturation (accepted) {sat:.2f}")
    g = bound["max_channel_load"]
    ax.axvline(
        bound["bound"],
        ls="-.",
        color="black",
        label=f"bound {bound['bound']:.2f}: injection (channel load 1/{g:.3f} = {1 / g:.2f})",
    )
    ax.set_yscale("log")
    ax.set_xlabel("offered load (flits per node per cycle)")
    ax.set_ylabel("mean packet latency (cycles)")
    ax.set_title(f"{shape} torus, uniform random, {LENGTH}-flit packets, DOR, 2 VCs x 4 flits")
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--no-rtl", action="store_true", help="skip the RTL points")
    p.add_argument("--cycles", type=int, default=4000, help="TLM cycles per point")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    record = {}
    for shape, (sim, rtl_cycles) in SHAPES.items():
        cfg = LinkConfig(shape)
        print(f"{shape}:", flush=True)
        sweep = tlm_sweep(shape, args.cycles, args.seed)
        bound = channel_load_bound(cfg, "uniform")
        low = simulate(cfg, "uniform", 0.01, 20000, length=LENGTH, seed=args.seed)
        rtl = [] if args.no_rtl else rtl_points(shape, sim, rtl_cycles, args.seed)
        check = []
        for point in rtl:  # the model at the same seed and cycles: must agree exactly
            same = simulate(
                cfg, "uniform", point["rate"], rtl_cycles, length=LENGTH, seed=args.seed
            )
            check.append(
                {
                    k: same[k] == point[k]
                    for k in ("offered", "accepted", "latency_mean", "latency_max")
                }
            )
        record[shape] = {
            "tlm": sweep,
            "rtl": rtl,
            "rtl_equals_tlm_same_seed": check,
            "zero_load_closed_form": low["zero_load_latency"],
            "latency_at_0.01": low["latency_mean"],
            "saturation_accepted": max(x["accepted"] for x in sweep),
            "channel_load_bound": bound,
        }
        plot(
            shape,
            sweep,
            rtl,
            low["zero_load_latency"],
            bound,
            ROOT / "docs" / f"noc_latency_{shape}.png",
        )
    (ROOT / "docs" / "noc_figures.json").write_text(json.dumps(record, indent=1))
    print(
        json.dumps(
            {s: {k: v for k, v in r.items() if k not in ("tlm", "rtl")} for s, r in record.items()},
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
