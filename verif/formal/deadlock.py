"""Deadlock freedom of the torus: the channel dependency graph of dimension-order routing with
the dateline VCs has no cycle (Dally and Seitz), checked exhaustively.

A channel is one VC of one directed link, ``(node, port, vc)``. Every packet of every
(source, destination, lane) is walked hop by hop with :func:`tlm.link.routing.route` and
:func:`~tlm.link.routing.out_vc`, the functions the RTL's route compute is held to
(``tests/test_hdl_link_route.py``); a packet holding channel ``a`` that asks for ``b`` next adds
the edge ``a -> b``. Without the dateline (every hop in class 0) the same walk must find a
cycle: the check is not vacuous.
"""

from __future__ import annotations

from tlm.link.config import LinkConfig
from tlm.link.routing import out_vc, route
from tlm.link.topology import LOCAL

__all__ = ["dependency_graph", "find_cycle"]


def dependency_graph(cfg: LinkConfig, *, dateline: bool = True) -> dict:
    """Edges of the channel dependency graph: ``{channel: set of channels}``.

    Parameters
    ----------
    cfg : LinkConfig
        The torus shape and VC count.
    dateline : bool
        ``False`` puts every hop in class 0 (the routing without the dateline rule).
    """
    torus = cfg.torus
    graph: dict[tuple, set] = {}
    for src in torus.coords():
        for dst in torus.coords():
            for lane in range(cfg.lanes):
                here, held = src, None
                for _ in range(sum(cfg.shape) + 1):
                    port, cls = route(cfg.shape, here, src, dst)
                    if port == LOCAL:
                        break
                    channel = (
                        torus.node(here),
                        port,
                        out_vc(lane, cls if dateline else 0, cfg.vcs),
                    )
                    graph.setdefault(channel, set())
                    if held is not None:
                        graph[held].add(channel)
                    here, held = torus.neighbour(here, port), channel
                else:
                    raise AssertionError(f"{src} -> {dst} does not arrive: {cfg.shape}")
    return graph


def find_cycle(graph: dict) -> list | None:
    """A cycle of ``graph`` as a list of channels, or ``None`` (iterative depth-first search)."""
    state = dict.fromkeys(graph, 0)  # 0 unseen, 1 on the path, 2 done
    for root in graph:
        if state[root]:
            continue
        path, stack = [root], [iter(graph[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                return path[path.index(nxt) :] + [nxt]
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph[nxt]))
    return None
