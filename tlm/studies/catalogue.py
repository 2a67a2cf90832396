"""Every ``trnsim`` study: its name, the module that defines it, and what it answers.

The catalogue is plain data, so ``trnsim --help`` lists the studies without importing any,
and ``trnsim STUDY`` imports only that study's module (:data:`tlm.studies.STUDIES` loads a
study the first time it is asked for). A new study is a module of this package that defines
its inputs, results and function and calls :func:`~tlm.studies.protocol.register`, plus one
entry here.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CATALOGUE", "Entry"]


class Entry(NamedTuple):
    """Where a study lives and the one line ``trnsim --help`` shows for it."""

    module: str
    title: str


#: Study name -> entry, in the order ``trnsim --help`` lists them.
CATALOGUE: dict[str, Entry] = {
    "collective": Entry(
        "tlm.studies.collective",
        "a collective on a server, UltraServer or N over EFA: time, algbw, busbw per size",
    ),
    "compare": Entry(
        "tlm.studies.compare",
        "one inference workload on several hardware generations: ratios and their footings",
    ),
    "cost": Entry(
        "tlm.studies.cost",
        "power, energy, owned and cloud cost, goodput and interruptions/day of a training run",
    ),
    "gemm": Entry("tlm.studies.gemm", "a tiled GEMM on one chip: time, FLOP/s, engine use, HBM"),
    "infer": Entry(
        "tlm.studies.infer",
        "TTFT, TPOT, throughput, utilisation and memory of LLM inference on one replica",
    ),
    "infer-search": Entry(
        "tlm.studies.infer_search",
        "the cheapest inference fleet meeting a latency SLO: every layout, format and batch",
    ),
    "model": Entry(
        "tlm.studies.model",
        "a model's parameters, FLOPs and KV bytes; per-chip memory of a parallel layout",
    ),
    "noc": Entry("tlm.studies.noc", "load study of a NeuronLink torus (cycle-exact to the RTL)"),
    "serve": Entry(
        "tlm.studies.serve",
        "a fleet of replicas serving arriving requests: latency percentiles, throughput, SLO, "
        "cost per token",
    ),
    "system": Entry(
        "tlm.studies.system",
        "the peaks of a chip, a server, an UltraServer and N chips: FLOP/s, HBM, links, power",
    ),
    "tensor": Entry(
        "tlm.studies.tensor", "nc_matmul on one tensor engine: cycles, time, utilisation"
    ),
    "tp-step": Entry(
        "tlm.studies.tp_step",
        "a tensor-parallel step on a server: GEMM shares and their all-reduce, sharing HBM",
    ),
    "train": Entry(
        "tlm.studies.train",
        "step time, MFU, memory, time and cost to train a model with one parallel layout",
    ),
    "train-search": Entry(
        "tlm.studies.train_search",
        "every parallel layout on N chips (Dask): the best by time or cost, the Pareto front",
    ),
    "validate": Entry(
        "tlm.studies.validate",
        "the models against published measurements: the error of every row, mean and max",
    ),
}
