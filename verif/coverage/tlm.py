"""Stimulus coverage on the cycle-exact model alone, without a simulator.

The tensor bench's run is a function of its parameters and seed: the same stimulus, the same
stream patterns, and - since the RTL is held to the model cycle for cycle - the same cycles.
:func:`tensor_coverage` replays it on :class:`~tlm.tensor.timing.EngineTiming` with the same
sampler, in milliseconds instead of seconds, which is how the seeds and directed runs of the
regression were chosen (``python -m verif.coverage.tlm``: which seeds add bins).
:func:`replay_router` does the same for the router bench.

Example::

    python -m verif.coverage.tlm --rows 3 --cols 2 --format all --seeds 20
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tlm.tensor.config import EngineConfig
from tlm.tensor.timing import EngineTiming
from verif.common.patterns import pattern
from verif.tensor.drivers import Traffic
from verif.tensor.stimulus import run_stimulus

from .db import Covergroup, fraction
from .tensor import ITEMS, EngineCoverage

__all__ = ["tensor_coverage", "replay", "replay_router"]


def replay(cfg: EngineConfig, seed: int, *, ops, max_n, patterns, coverage, misuse=True):
    """The tensor bench's run (``verif.tensor.bench.random_ops``) on the model, sampling
    ``coverage``; returns the cycles."""
    cycles = 0
    for i, triple in enumerate(patterns.split(",")):
        names = triple.split(":")
        sub = seed + i
        stim = run_stimulus(cfg, seed, i, ops=ops, max_n=max_n, misuse=misuse)
        rng = np.random.default_rng(sub)
        traffic = Traffic(stim, *(pattern(p, rng) for p in names))
        model = EngineTiming(cfg)
        coverage.patterns(*names)
        while not traffic.done:
            ld, mv, ready = traffic.offers()
            coverage.before(model)
            out = model.step(ld, mv, ready)
            coverage.after(model, ld, mv, ready, out)
            traffic.update(out)
            cycles += 1
    return cycles


def replay_router(cfg, coord, seed, *, packets, patterns, coverage, **misuse):
    """The router bench's run (``verif.link.bench_router``: ``lockstep`` or, with ``rogue``
    and ``spurious``, ``misuse``) on the model, sampling ``coverage``; returns the cycles."""
    from tlm.link.router import Router
    from verif.link.router_env import RouterEnv

    cycles = 0
    for i, triple in enumerate(patterns.split(",")):
        send, ready, credit = triple.split(":")
        rng = np.random.default_rng(seed + i)
        # lockstep's first triple begins with the contention pairs and the hand-over rounds,
        # as the bench's does
        first = i == 0 and not misuse
        env = RouterEnv(
            cfg, coord, rng, packets, 0.1, send=send, ready=ready, credit=credit,
            directed_drops=True, contention=first, handover=first, **misuse,
        )  # fmt: skip
        model = Router(cfg, coord)
        coverage.patterns(send, ready, credit)
        idle = 0
        while idle < 30:
            ins = env.drive()
            want = model.outputs()
            env.observe(want, ins)
            coverage.cycle(model, ins, want, model.step(**ins.kwargs()).grants)
            idle = idle + 1 if env.idle else 0
            cycles += 1
    return cycles


def tensor_coverage(cfg, seeds, **kwargs) -> list[tuple[int, dict[str, set[str]]]]:
    """For each seed, the bins it hit that no earlier seed did: ``[(seed, {item: bins})]``."""
    seen = {name: set() for name in ITEMS}
    out = []
    for seed in seeds:
        Covergroup.forget(ITEMS)  # a fresh count per seed
        coverage = EngineCoverage(cfg)
        replay(cfg, seed, coverage=coverage, **kwargs)
        new = {}
        for name in ITEMS:
            hit = {b for b, h in coverage.group.hits(name).items() if h} - seen[name]
            if hit:
                new[name] = hit
                seen[name] |= hit
        out.append((seed, new))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m verif.coverage.tlm", description=__doc__)
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--cols", type=int, default=4)
    p.add_argument("--format", default="int8")
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--ops", type=int, default=10)
    p.add_argument("--max-n", type=int, default=16)
    p.add_argument("--patterns", default="always:always:always,random:random:random")
    args = p.parse_args(argv)
    cfg = EngineConfig(args.rows, args.cols, args.format)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    total = {name: set() for name in ITEMS}
    for seed, new in tensor_coverage(
        cfg, seeds, ops=args.ops, max_n=args.max_n, patterns=args.patterns
    ):
        for name, bins in new.items():
            total[name] |= bins
        if new:
            print(f"seed {seed}: " + "; ".join(f"{n}: {sorted(b)}" for n, b in new.items()))
    for name, bins in ITEMS.items():
        hits = {b: int(b in total[name]) for b in bins}
        missing = sorted(set(bins) - total[name])
        print(f"{name:24} {fraction(hits):5.2f}  missing: {missing if missing else '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
