"""tlm.link.patterns: drawing many destinations at once is drawing them one by one."""

import numpy as np
import pytest

from tlm.link.patterns import PATTERNS, Destinations
from tlm.link.topology import Torus


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("shape", [(4, 4), (4, 4, 4), (3, 3)])
def test_draw_equals_next(pattern, shape, seed):
    torus = Torus(shape)
    srcs = np.random.default_rng(seed).integers(torus.nodes, size=3000)
    one = Destinations(pattern, torus, np.random.default_rng(seed))
    many = Destinations(pattern, torus, np.random.default_rng(seed))
    want = [one.next(int(s)) for s in srcs]
    got = many.draw(srcs)
    assert got.tolist() == [-1 if d is None else d for d in want]
    assert one.rng.random() == many.rng.random()  # the generator is left in the same state
    assert [one.next(int(s)) for s in srcs[:50]] == [many.next(int(s)) for s in srcs[:50]]


def test_bad_pattern():
    with pytest.raises(ValueError) as error:
        Destinations("random", Torus((4, 4)), np.random.default_rng(0))
    assert str(error.value) == (
        "pattern must be one of uniform, transpose, neighbour, hotspot, all-to-all, not 'random'"
    )
