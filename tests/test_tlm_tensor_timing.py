"""The cycle model: values per op, op costs, misuse, backpressure."""

import functools

import numpy as np
import pytest

from tlm.formats import get_format
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


@pytest.mark.parametrize("fmt", ["int8", "bf16", "fp32"])
@pytest.mark.parametrize("rows,cols", [(1, 1), (4, 3), (8, 8), (16, 5)])
@pytest.mark.parametrize("k_frac,n", [(1.0, 1), (1.0, 7), (0.5, 3), (1.0, 40)])
@pytest.mark.parametrize("stages", [1, 5, 13])
def test_cost_function_matches_cycle_model(rows, cols, k_frac, n, fmt, stages):
    cfg = EngineConfig(rows, cols, "int8,bf16,fp32", pe_stages=stages)
    k = max(1, int(rows * k_frac))
    dtype = get_format(fmt).dtype if fmt != "int8" else np.int64

    def ones(shape):
        return np.ones(shape, dtype)

    cost = functools.partial(matmul_cycles, k, cols, n, cfg=cfg, fmt=fmt)
    alone = [Op(ones((k, n)), ones((k, cols)))]
    assert run_ops(cfg, alone)[1] == cost(mode="alone")
    ops = 9
    chain = [Op(ones((k, n)), ones((k, cols))) for _ in range(ops)]
    steady = (run_ops(cfg, chain)[1] - run_ops(cfg, chain[:1])[1]) / (ops - 1)
    assert steady == cost(mode="back_to_back")
    reuse = [chain[0]] + [Op(ones((k, n))) for _ in range(ops - 1)]
    steady = (run_ops(cfg, reuse)[1] - run_ops(cfg, reuse[:1])[1]) / (ops - 1)
    assert steady == cost(mode="reuse")


def test_fp32_costs_four_times_bf16():
    cfg = EngineConfig(128, 128, "all")
    for mode in ("back_to_back", "reuse"):
        bf16 = matmul_cycles(128, 128, 512, cfg=cfg, mode=mode, fmt="bf16")
        assert matmul_cycles(128, 128, 512, cfg=cfg, mode=mode, fmt="fp32") == 4 * bf16


def test_cost_function_errors():
    with pytest.raises(ValueError, match=r"^n must be an integer in 1..512, not 513$"):
        matmul_cycles(1, 1, 513)
    with pytest.raises(
        ValueError,
        match=r"^mode must be one of alone, back_to_back, reuse, "
        r"not 'sometimes'$",
    ):
        matmul_cycles(1, 1, 1, mode="sometimes")
    with pytest.raises(
        ValueError,
        match=r"^format 'bf16' is not one this engine was elaborated with \(int8\)$",
    ):
        matmul_cycles(1, 1, 1, cfg=EngineConfig(4, 4), fmt="bf16")


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


MIXED = EngineConfig(4, 3, "all")


def random_operand(rng, fmt, shape):
    """Uniform raw bits of ``fmt`` (NaN, infinities and subnormals included) or int8 values."""
    if fmt.kind == "int":
        return rng.integers(-128, 128, shape)
    raw = rng.integers(0, 1 << fmt.storage_bits, shape, dtype=np.uint64)
    return raw.astype(f"u{fmt.storage_bits // 8}").view(fmt.dtype)


def bits(vector):
    vector = np.asarray(vector)
    return vector.view(np.uint32) if vector.dtype == np.float32 else vector.astype(np.int64)


@pytest.mark.parametrize("patterns", [(None, None, None), ([1, 0], [1, 1, 0], [1, 0, 0])])
def test_format_chosen_per_op(patterns, seed):
    """Ops of random format pairs (reuses keep the stationary's format and may change the
    moving one among those that mix) give matmul's values bit for bit."""
    rng = np.random.default_rng(seed)
    pairs = MIXED.pairs()
    ops, want = [], []
    stationary = s_fmt = None
    for i in range(24):
        reuse = i and rng.random() < 0.3
        if reuse:
            k = ops[-1].moving.shape[0]
            m_fmt = rng.choice([m for s, m in pairs if s == s_fmt])
        else:
            s_fmt, m_fmt = pairs[rng.integers(len(pairs))]
            k = int(rng.integers(1, 5))
            stationary = random_operand(rng, s_fmt, (k, int(rng.integers(1, 4))))
        moving = random_operand(rng, m_fmt, (k, int(rng.integers(1, 6))))
        ops.append(Op(moving, None if reuse else stationary, (s_fmt.name, m_fmt.name)))
        # Lanes at or beyond M hold zero weights: 0 * inf is NaN there, as in the engine.
        padded = np.zeros((k, MIXED.cols), stationary.dtype)
        padded[:, : stationary.shape[1]] = stationary
        want.extend(matmul(padded, moving, cfg=MIXED, fmt=(s_fmt.name, m_fmt.name)).T)
    results, _ = run_ops(
        MIXED, ops, ld_pattern=patterns[0], mv_pattern=patterns[1], ready_pattern=patterns[2]
    )
    assert len(results) == len(want)
    for i, ((_, got), w) in enumerate(zip(results, want, strict=True)):
        assert np.array_equal(bits(got), bits(w)), f"result {i} (seed {seed})"


def test_bad_format_codes_and_mismatches_are_dropped_and_counted():
    cfg = EngineConfig(4, 3, "bf16,fp16,fp32")  # codes 0, 1, 2; 3 names no format
    bf16, fp16 = (get_format(n).dtype for n in ("bf16", "fp16"))
    good = LoadBeat(np.array([1, 2, 3], bf16), 1, True, fmt=0)
    model = EngineTiming(cfg)
    out = drive(model, ld=[LoadBeat(np.ones(3), 1, True, fmt=3), good], mv=[])
    assert model.step().counts[ErrorKind.LOAD_FORMAT] == 1
    # Moving with an unknown code, then fp16 against the bf16 stationary: both dropped.
    mv_bad = [MovingBeat(np.ones(4, fp16), True, True, fmt=3)]
    mv_mix = [MovingBeat(np.ones(4, fp16), False, j == 1, fmt=1) for j in range(2)]
    out = drive(model, mv=mv_bad + mv_mix)
    status = model.step()
    assert out == []
    assert status.counts[ErrorKind.MOVING_FORMAT] == 1
    assert status.counts[ErrorKind.FORMAT_MISMATCH] == 1
    assert status.flags == sum(
        1 << k for k in (ErrorKind.LOAD_FORMAT, ErrorKind.MOVING_FORMAT, ErrorKind.FORMAT_MISMATCH)
    )
    # The bad-code op still switched to the bf16 stationary; a bf16 op now uses it.
    out = drive(model, mv=[MovingBeat(np.array([2, 0, 0, 0], bf16), False, True, fmt=0)])
    np.testing.assert_array_equal(out[0], np.array([2, 4, 6], np.float32))


def test_fp32_beats_are_accepted_one_in_four_ticks():
    cfg = EngineConfig(2, 2, "bf16,fp32")
    f32 = np.float32
    model = EngineTiming(cfg)
    drive(model, ld=[LoadBeat(np.ones(2, f32), 1, True, fmt=1)])
    beats = [MovingBeat(np.ones(2, f32), j == 0, j == 2, fmt=1) for j in range(3)]
    fired = []
    for cycle in range(12):
        if model.step(mv=beats[0] if beats else None).mv_fire:
            beats.pop(0)
            fired.append(cycle)
    assert fired == [0, 4, 8]


def test_format_code_must_fit_its_field():
    with pytest.raises(
        ValueError,
        match=r"^MovingBeat fmt=4 does not fit the 2-bit format field of this engine \(0..3\)$",
    ):
        EngineTiming(EngineConfig(4, 3, "bf16,fp16,fp32")).step(
            mv=MovingBeat(np.ones(4), True, True, fmt=4)
        )
