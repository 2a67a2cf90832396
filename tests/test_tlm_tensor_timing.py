"""The cycle model: values per op, op costs, misuse, backpressure."""

import numpy as np
import pytest

from tlm.tensor import EngineConfig, ErrorKind, matmul, matmul_cycles
from tlm.tensor.timing import EngineTiming, LoadBeat, MovingBeat, Op, run_ops

CFG = EngineConfig(4, 3)


def random_op(rng, cfg, k, m, n, new=True):
    s = rng.integers(-128, 128, (k, m)) if new else None
    return Op(rng.integers(-128, 128, (k, n)), s)


def expected_results(cfg, ops):
    out, stationary = [], None
    for op in ops:
        stationary = op.stationary if op.stationary is not None else stationary
        full = np.zeros((cfg.cols, op.moving.shape[1]), np.int64)
        full[: stationary.shape[1]] = matmul(stationary, op.moving, cfg=cfg)
        out.extend(full.T)
    return out


@pytest.mark.parametrize(
    "patterns", [(None, None, None), ([1, 0], [1, 1, 0], [1, 0, 0]), ([1], [1], [0, 0, 0, 1])]
)
def test_results_equal_matmul_under_patterns(patterns, seed):
    rng = np.random.default_rng(seed)
    ops = []
    for i in range(12):
        k = int(rng.integers(1, 5)) if i == 0 or rng.random() < 0.7 else ops[-1].moving.shape[0]
        ops.append(
            random_op(
                rng,
                CFG,
                k,
                int(rng.integers(1, 4)),
                int(rng.integers(1, 9)),
                new=i == 0 or k != ops[-1].moving.shape[0] or rng.random() < 0.5,
            )
        )
    results, _ = run_ops(
        CFG, ops, ld_pattern=patterns[0], mv_pattern=patterns[1], ready_pattern=patterns[2]
    )
    got = [v for _, v in results]
    want = expected_results(CFG, ops)
    assert len(got) == len(want)  # nothing lost or duplicated
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("rows,cols", [(1, 1), (4, 3), (8, 8), (16, 5)])
@pytest.mark.parametrize("k_frac,n", [(1.0, 1), (1.0, 7), (0.5, 3), (1.0, 40)])
def test_cost_function_matches_cycle_model(rows, cols, k_frac, n):
    cfg = EngineConfig(rows, cols)
    k = max(1, int(rows * k_frac))
    ones = np.ones
    alone = [Op(ones((k, n), np.int64), ones((k, cols), np.int64))]
    assert run_ops(cfg, alone)[1] == matmul_cycles(k, cols, n, cfg=cfg, mode="alone")
    ops = 9
    chain = [Op(ones((k, n), np.int64), ones((k, cols), np.int64)) for _ in range(ops)]
    steady = (run_ops(cfg, chain)[1] - run_ops(cfg, chain[:1])[1]) / (ops - 1)
    assert steady == matmul_cycles(k, cols, n, cfg=cfg, mode="back_to_back")
    reuse = [chain[0]] + [Op(ones((k, n), np.int64)) for _ in range(ops - 1)]
    steady = (run_ops(cfg, reuse)[1] - run_ops(cfg, reuse[:1])[1]) / (ops - 1)
    assert steady == matmul_cycles(k, cols, n, cfg=cfg, mode="reuse")


def test_cost_function_errors():
    with pytest.raises(ValueError, match=r"^n must be an integer in 1..512, not 513$"):
        matmul_cycles(1, 1, 513)
    with pytest.raises(
        ValueError,
        match=r"^mode must be one of alone, back_to_back, reuse, "
        r"not 'sometimes'$",
    ):
        matmul_cycles(1, 1, 1, mode="sometimes")


def drive(model, ld=(), mv=(), cycles=60, ready=True):
    """Offer beats back to back; return the results delivered."""
    ld, mv, out = list(ld), list(mv), []
    for _ in range(cycles):
        o = model.step(ld[0] if ld else None, mv[0] if mv else None, ready)
        if o.ld_fire:
            ld.pop(0)
        if o.mv_fire:
            mv.pop(0)
        if o.res_fire:
            out.append(o.res_data)
    assert not ld and not mv, "the engine stopped accepting input"
    return out


def beat(v, load=False, last=True, rows=4):
    return MovingBeat(np.full(rows, v), load, last)


def test_moving_before_any_load_is_dropped_and_counted():
    model = EngineTiming(CFG)
    out = drive(model, mv=[beat(1, last=False), beat(2)])
    assert out == [] and model.step().counts[ErrorKind.NO_STATIONARY] == 1
    assert model.step().flags == 1 << ErrorKind.NO_STATIONARY
    # The engine still works afterwards.
    good = drive(model, ld=[LoadBeat(np.array([1, 2, 3]), 1, True)], mv=[beat(5, load=True)])
    np.testing.assert_array_equal(good[0], [5, 10, 15])


@pytest.mark.parametrize(
    "beats,kind",
    [
        ([LoadBeat(np.ones(3), 3, False), LoadBeat(np.ones(3), 3, True)], ErrorKind.LOAD_LENGTH),
        (
            [
                LoadBeat(np.ones(3), 1, False),
                LoadBeat(np.ones(3), 1, False),
                LoadBeat(np.ones(3), 1, True),
            ],
            ErrorKind.LOAD_LENGTH,
        ),
        ([LoadBeat(np.ones(3), 0, True)], ErrorKind.LOAD_K),
        ([LoadBeat(np.ones(3), 5, False), LoadBeat(np.ones(3), 5, True)], ErrorKind.LOAD_K),
    ],
)
def test_bad_loads_are_discarded_and_counted(beats, kind):
    model = EngineTiming(CFG)
    good = LoadBeat(np.array([2, 3, 4]), 1, True)
    out = drive(model, ld=beats + [good], mv=[beat(1, load=True)])
    np.testing.assert_array_equal(out[0], [2, 3, 4])  # the multiply used the good load
    status = model.step()
    assert status.counts[kind] == 1 and sum(status.counts) == 1


def test_counters_saturate():
    model = EngineTiming(EngineConfig(1, 1))
    model._counts[ErrorKind.LOAD_K] = (1 << 16) - 2
    drive(model, ld=[LoadBeat(np.ones(1), 0, True)] * 3)
    assert model.step().counts[ErrorKind.LOAD_K] == (1 << 16) - 1


def test_second_load_waits_for_a_switch():
    model = EngineTiming(CFG)
    load = LoadBeat(np.ones(3), 1, True)
    readies = [model.step(load).ld_ready for _ in range(3)]
    assert readies == [True, False, False]  # one in the shadow bank, none more until used
    out = model.step(load, beat(1, load=True))  # an op switches to it: the load goes too
    assert out.mv_fire and out.ld_fire
    assert not model.step(load).ld_ready  # that one now waits in the shadow bank in turn


def test_k_must_fit_its_field():
    with pytest.raises(
        ValueError,
        match=r"^LoadBeat k=8 does not fit the 3-bit field of a "
        r"4-row engine \(0..7\)$",
    ):
        EngineTiming(CFG).step(LoadBeat(np.ones(3), 8, True))
