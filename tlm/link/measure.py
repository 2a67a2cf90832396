"""One measured load point: offered against accepted load, latency and link use.

:func:`simulate` drives a network model with :class:`~tlm.link.sources.LoadSources` and
measures, over the cycles after a warm-up:

* offered load: flits created per node per cycle; accepted load: flits delivered per node
  per cycle;
* packet latency: from the cycle a packet is created (queued at its source) to the cycle its
  tail leaves the ejection port, for packets created after the warm-up and delivered by the end;
* link utilisation: flits sent per cycle on each directed link.

:mod:`tlm.link.bounds` has the closed forms the figures are checked against.
"""

from __future__ import annotations

from .config import LinkConfig
from .network import RouterNetwork
from .sources import LoadSources, advance

__all__ = ["simulate", "ENGINES"]

#: Engines of :func:`simulate`: ``compiled``, the compiled network (:mod:`tlm.link.compiled`), and
#: ``python``, the per-router reference model (:class:`~tlm.link.network.RouterNetwork`). Both give
#: the same figures to the last bit.
ENGINES = ("compiled", "python")


def simulate(
    cfg: LinkConfig,
    pattern: str = "uniform",
    rate: float = 0.3,
    cycles: int = 20000,
    *,
    length: int = 4,
    seed: int = 0,
    warmup: int | None = None,
    engine: str = "compiled",
) -> dict:
    """Run ``pattern`` at ``rate`` flits per node per cycle for ``cycles`` cycles on the
    model, with :class:`LoadSources`.

    ``engine`` is one of :data:`ENGINES`: ``"compiled"`` runs the whole study compiled
    (:func:`tlm.link.compiled.run_load`), ``"python"`` steps
    :class:`~tlm.link.network.RouterNetwork` from Python; the figures are identical.

    Returns a dict of figures (see the module docstring), with ``links`` giving every
    directed link's utilisation.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> fast = simulate(cfg, rate=0.2, cycles=500)
    >>> fast == simulate(cfg, rate=0.2, cycles=500, engine="python")
    True
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    sources = LoadSources(cfg, pattern, rate, cycles, length=length, seed=seed, warmup=warmup)
    if engine == "compiled":
        from .compiled import run_load  # numba loads only when asked for

        return run_load(sources)
    net = RouterNetwork(cfg)
    snapshot = None
    for cycle in range(cycles):
        if cycle == sources.warmup:
            snapshot = [list(x) for x in net.link_flits]
        advance(net, sources)
    if snapshot is None:
        snapshot = [[0] * cfg.ports for _ in range(cfg.torus.nodes)]
    sent = [
        [a - b for a, b in zip(now, before, strict=True)]
        for now, before in zip(net.link_flits, snapshot, strict=True)
    ]
    return sources.result(sent)
