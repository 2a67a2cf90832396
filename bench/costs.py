"""``python -m bench --only costs``: figures of the calibrated operator costs.

* :meth:`tlm.costs.OpCosts.gemm_s` on 1,000,000 random shapes in one call (M 1..65536,
  N and K 64..65536, batch 1..512, inside and beyond the calibration grid): shapes per second,
  the strategy search's inner loop (brief: >= 1,000,000 shapes/s);
* the same for :meth:`~tlm.costs.OpCosts.vector_s` (norms) and the roofline of a chip with no
  TLM (A100);
* one shape through ``gemm_s`` (scalars): the latency of a single estimate's operator.

Measured and printed, never asserted.
"""

from __future__ import annotations

import numpy as np

from .common import best_time

__all__ = ["bench_costs", "random_shapes"]

N = 1_000_000


def random_shapes(n: int, seed: int = 0) -> dict:
    """``n`` GEMM shapes, log-uniform in each dimension."""
    rng = np.random.default_rng(seed)
    return dict(
        m=np.round(2 ** rng.uniform(0, 16, n)),
        n=np.round(2 ** rng.uniform(6, 16, n)),
        k=np.round(2 ** rng.uniform(6, 16, n)),
        batch=rng.choice([1, 1, 1, 8, 64, 512], n),
    )


def bench_costs() -> list[dict]:
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware

    trn2 = OpCosts.for_preset("trn2")
    a100 = OpCosts.for_hardware(load_hardware("a100"))
    shapes = random_shapes(N)
    rows = []
    for label, fn in (
        ("gemm_s, trn2 calibrated, bf16", lambda: trn2.gemm_s(**shapes)),
        ("gemm_s, trn2 calibrated, fp8", lambda: trn2.gemm_s(**shapes, fmt="fp8")),
        ("gemm_s, a100 roofline", lambda: a100.gemm_s(**shapes)),
        ("vector_s, trn2 norm", lambda: trn2.vector_s(shapes["m"] * shapes["n"], "norm")),
    ):
        seconds = best_time(fn, repeat=3)
        rows.append(
            {
                "figure": f"{label}, {N:,} shapes in one call",
                "value": N / seconds,
                "unit": "shapes/s",
                "target": ">= 1,000,000",
                "naive": "",
            }
        )
    single = best_time(lambda: trn2.gemm_s(8192, 1280, 8192), repeat=200)
    rows.append(
        {
            "figure": "gemm_s, trn2, one shape (scalars)",
            "value": single * 1e6,
            "unit": "us",
            "target": "",
            "naive": "",
        }
    )
    return rows
