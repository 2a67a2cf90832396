"""Transfers as packets (tlm.collectives.packets): bytes survive the trip, the plan is enforced."""

from __future__ import annotations

import numpy as np
import pytest

from tlm.collectives.packets import PacketError, Reassembly, data_bytes, encode, plan_step
from tlm.link.config import LinkConfig
from tlm.link.flit import FlitFormat


@pytest.mark.parametrize("width,len_bits", [(64, 2), (128, 3), (515, 4)])
def test_bytes_round_trip_in_any_order(seed, width, len_bits):
    rng = np.random.default_rng(seed)
    cfg = LinkConfig((4, 4), width=width, len_bits=len_bits, inject_depth=1 << len_bits)
    routes = [(int(rng.integers(16)), int(rng.integers(16))) for _ in range(12)]
    sizes = [int(n) for n in rng.integers(0, 300, 12)]
    data = [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes]
    plan = plan_step(cfg.fmt, routes, sizes)
    per = data_bytes(cfg.fmt)
    assert sum(p.nbytes for p in plan) == sum(sizes)
    assert all(p.flits <= cfg.fmt.max_length for p in plan)
    assert all(p.flits == 1 + -(-p.nbytes // per) for p in plan)
    receive = Reassembly(cfg, plan, sizes)
    for i in rng.permutation(len(plan)):
        p = plan[i]
        receive.take(p.dst, encode(cfg, p, data[p.transfer][p.offset : p.offset + p.nbytes]))
    receive.check_done()
    assert [receive.data(t) for t in range(len(sizes))] == data


def test_the_plan_is_enforced():
    cfg = LinkConfig((4, 4))
    plan = plan_step(cfg.fmt, [(0, 5), (3, 5)], [20, 3])
    receive = Reassembly(cfg, plan, [20, 3])
    flits = encode(cfg, plan[0], bytes(range(20)))
    with pytest.raises(PacketError, match="does not have there"):
        receive.take(4, flits)  # wrong node
    with pytest.raises(PacketError, match="has 2 flits"):
        receive.take(5, flits[:2])
    receive.take(5, flits)
    with pytest.raises(PacketError, match="or a second time"):
        receive.take(5, flits)
    with pytest.raises(PacketError, match="misses 1 packets"):
        receive.data(1)
    with pytest.raises(PacketError, match="1 packets never arrived"):
        receive.check_done()


def test_sequence_numbers_must_not_wrap():
    fmt = FlitFormat(dims=2, seq_bits=2)
    with pytest.raises(ValueError, match="node 0 sends more than 4 packets"):
        plan_step(fmt, [(0, 1)], [5 * 21])
    with pytest.raises(ValueError, match=r"nbytes\[0\] must be an integer >= 0, not -1"):
        plan_step(fmt, [(0, 1)], [-1])
