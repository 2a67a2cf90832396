"""Fill the cache on disk (:mod:`tlm.diskcache`) with the inference model's derived figures for
every shipped hardware, system and model, so that the first ``trnsim infer`` after installing
the package costs what a later one does.

A first command builds what every later one loads: the hardware and model files parsed, the
chip's operator costs, the network's collective closed forms (routes and schedules on the
torus) and the layout's operator tables. With the cache on disk empty that is 0.1-0.3 s
before the first estimate; loaded, a few milliseconds (``python -m bench --only infer``).
:func:`warm` builds them ahead - ``make setup`` runs it (``python -m tlm.inference.warm``) -
for the layouts a user asks for first: every hardware of :data:`HARDWARE`, its server and its
UltraServer (where its scale-up domain is larger), every shipped model, every tensor-parallel
degree the model's heads and the system allow (``pp`` 1; a MoE model's experts within the
group at ``ep = tp`` and not split, ``ep = 1``), BF16 and FP8 weights (those the chip has)
and KV cache - each
engine built and one request priced, then written. It takes a few seconds. A layout it does
not cover (pipeline stages, data-parallel attention) is built on its first call as before.

The cache is keyed by the package's fingerprint: editing the package starts a new, empty one
(a developer's first command pays the build again; ``python -m tlm.inference.warm`` fills it).

Examples
--------
>>> import tempfile
>>> from tlm import diskcache
>>> with diskcache.cache_dir(tempfile.mkdtemp()):
...     n = warm(hardware=("h100",), models=("llama3-8b",))
>>> n  # tp 1, 2, 4, 8 x two weight formats x two KV formats
16
"""

from __future__ import annotations

import sys
import time

from .. import diskcache
from ..cluster.hardware import HARDWARE
from ..workloads.model import model_names
from .estimate import request_times
from .layout import InferenceInputError, as_hardware, as_model, check_layout, system_chips
from .step import Engine

__all__ = ["HARDWARE", "REQUEST", "warm"]

#: The request priced on each layout (its operator tables at these token counts; a later
#: request's other counts are a few table entries).
REQUEST = dict(batch=1, prompt=2048, output=256)
_FORMATS = ("bf16", "fp8")


def _layouts(hw, models):
    """(system, model, tp, ep) of every layout :func:`warm` builds on ``hw``."""
    systems = ["server"]
    if hw.scale_up_chips > hw.server_chips:
        systems.append("ultraserver")
    for system in systems:
        chips = system_chips(hw, system)
        for name in models:
            model = as_model(name)
            tps = [t for t in range(1, chips + 1) if chips % t == 0]
            for tp in tps:
                for ep in sorted({1, tp} if model.moe else {1}):
                    try:
                        check_layout(model, chips, tp, 1, ep, False)
                    except InferenceInputError:
                        continue
                    yield system, model, tp, ep


def warm(hardware=HARDWARE, models=None) -> int:
    """Build and price every layout of the module docstring on ``hardware`` (names) for
    ``models`` (names; default every shipped model), then write the cache on disk. Returns the
    layouts x formats built. Does nothing but count when the cache is off."""
    models = model_names() if models is None else tuple(models)
    built = 0
    for name in hardware:
        hw = as_hardware(name)
        for system, model, tp, ep in _layouts(hw, models):
            for fmt in _FORMATS:
                for kv_fmt in _FORMATS:
                    try:
                        engine = Engine.build(
                            model, hw, system, tp=tp, ep=ep, fmt=fmt, kv_fmt=kv_fmt
                        )
                    except InferenceInputError:  # a format the chip does not have (a100: fp8)
                        continue
                    request_times(engine, **REQUEST)
                    built += 1
    diskcache.flush()
    return built


def main() -> int:
    """``python -m tlm.inference.warm``: warm the cache, say how many layouts and where."""
    start = time.perf_counter()
    built = warm()
    where = diskcache.directory()
    print(
        f"trnsim cache: {built:,} inference layouts built in {time.perf_counter() - start:.1f} s "
        f"({where if where is not None else 'the cache on disk is off'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
