"""Entry points of the tensor engine's cocotb bench: Icarus at small sizes, Verilator at a mid
size, and the full 128x128 engine on Verilator in the slow tier (``make test-slow``)."""

import pytest

from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT, run
from verif.common.toolchain import have_simulator
from verif.tensor.build import build_engine
from verif.tensor.run import bench_env, rerun
from verif.tensor.signals import config_from_env

#: ld:mv:ready pattern triples every run goes through: full rate, idle producers,
#: backpressure, and random of all three.
PATTERNS = ",".join(
    [
        "always:always:always",
        "1of2:3of4:always",
        "always:always:3of4",
        "always:always:1of4",
        "random:random:random",
    ]
)


#: Random patterns, and the periodic ones PATTERNS leaves out, on every stream.
IDLE_PATTERNS = "random:random:random,3of4:1of4:1of2,1of4:1of2:3of4"


def run_bench(
    sim,
    rows,
    cols,
    seed,
    *,
    ops,
    max_n,
    patterns=PATTERNS,
    fmt="int8",
    status_bits=None,
    arith=None,
):
    if not have_simulator(sim):
        pytest.fail(f"{sim} is not installed: run `make setup`")
    cfg = EngineConfig(rows, cols, fmt, **({"status_bits": status_bits} if status_bits else {}))
    simbuild = build_engine(sim, cfg, arith=arith)
    run(
        simbuild,
        "verif.tensor.bench",
        rerun=rerun(sim, cfg, seed, ops=ops, max_n=max_n, patterns=patterns, arith=arith),
        env=bench_env(cfg, ops=ops, max_n=max_n, patterns=patterns)
        | {"SEED": seed, "PYTHONPATH": ROOT},
        test_dir=simbuild.build_dir / f"run-{rows}x{cols}-{fmt}-{seed}",
    )


@pytest.mark.sim
@pytest.mark.parametrize(
    "rows,cols", [(1, 1), (1, 4), (3, 5), (4, 4), (8, 3)], ids=lambda v: str(v)
)
def test_icarus(rows, cols, seed):
    run_bench("icarus", rows, cols, seed, ops=10, max_n=16)


@pytest.mark.sim
@pytest.mark.parametrize("rows,cols", [(32, 32), (16, 24)], ids=lambda v: str(v))
def test_verilator(rows, cols, seed):
    run_bench("verilator", rows, cols, seed, ops=16, max_n=96)


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128(seed):
    run_bench("verilator", 128, 128, seed, ops=12, max_n=512)


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128_bf16(seed):
    """The full engine in BF16: every result bit for bit, under all five pattern triples."""
    run_bench("verilator", 128, 128, seed, ops=6, max_n=256, fmt="bf16")


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128_every_format(seed):
    """The full engine elaborated with every format, formats chosen per op (misuse too)."""
    run_bench(
        "verilator",
        128,
        128,
        seed,
        ops=8,
        max_n=64,
        fmt="all",
        patterns="always:always:always,random:random:random",
    )


@pytest.mark.sim
@pytest.mark.parametrize(
    "sim,fmt,rows,cols",
    [
        ("icarus", "bf16", 3, 2),
        ("icarus", "fp8_e4m3", 2, 3),
        ("verilator", "fp16", 6, 4),
    ],
)
def test_floating_point_formats(sim, fmt, rows, cols, seed):
    """The engine elaborated for one floating-point format: results bit for bit; random
    patterns, then the periodic ones no triple of PATTERNS uses (tensor.patterns coverage)."""
    run_bench(sim, rows, cols, seed, ops=6, max_n=8, patterns=IDLE_PATTERNS, fmt=fmt)


@pytest.mark.sim
def test_counters_saturate(seed):
    """Misuse counters of one bit: each kind of misuse comes again once its counter is full,
    and RTL and model hold it there (the counters' saturation, never reached by 16-bit
    counters in a run; 40 ops a pattern triple make every kind twice for every seed tried,
    on the model alone, 40 of 40)."""
    run_bench("icarus", 3, 2, seed, ops=40, max_n=6, fmt="bf16,fp16,tf32", status_bits=1)


@pytest.mark.sim
@pytest.mark.parametrize(
    "sim,fmt,rows,cols",
    [
        ("icarus", "all", 3, 2),
        ("icarus", "bf16,fp16,tf32", 2, 2),
        ("verilator", "all", 8, 8),
        ("verilator", "fp8_e4m3,fp8_e5m2,bf16", 5, 3),
    ],
)
def test_formats_chosen_per_op(sim, fmt, rows, cols, seed):
    """One engine elaborated with a set of formats: every op picks its own (per LoadStationary
    and MultiplyMoving), misuse of format codes included, results bit for bit."""
    run_bench(sim, rows, cols, seed, ops=12, max_n=8, fmt=fmt)


@pytest.mark.sim
def test_one_format_code_from_reset_on():
    """A run whose ops all take format code 0 from reset on (this seed's first pattern
    triple): the decoders' format index was a Verilog `always @*` block that Icarus runs only
    when its input changes, so with the code held at 0 it stayed X and so did every operand
    decoded after it (2026-11-28, CI). A directed case: the seed is fixed."""
    patterns = "always:always:always"
    run_bench("icarus", 3, 2, 971045975, ops=40, max_n=6, patterns=patterns, fmt="bf16,fp16,tf32")


@pytest.mark.sim
@pytest.mark.parametrize("sim,rows,cols", [("icarus", 3, 2), ("verilator", 8, 8)])
def test_words_form_passes_the_bench(sim, rows, cols, seed):
    """The every-format engine with its arithmetic in the words form (hdl/arith.py, the
    form large engines simulate) passes the lockstep bench that holds the gates form, small
    enough that both run in the regression."""
    run_bench(sim, rows, cols, seed, ops=12, max_n=8, fmt="all", arith="words")


#: Column 0 of the sum op: 2 - 2**-24 (a tie) rounds up to 2.0, a carry into the exponent.
_TIE = [0x40000000, 0x3FFFFFFF, 0x3FFFFFFF, 0x40000000, 0x40000000]
#: Column 1: -2 + v, v of SUM_MOVING: -1.0, -0.5, -0.9921875, then -2.0 (the gaps of 31, 41).
_NEGATIVE = [0xBF800000, 0xBF000000, 0xBF7E0000, 0xC0000000, 0xC0000000]


@pytest.mark.parametrize(
    "fmt,bits",
    [
        # TF32: the product op rounds up to 2**-130, a carry through 19 kept bits
        ("bf16,fp16,tf32", _TIE + _NEGATIVE + [0x80000] * 2),
        # FP32: 2 - 2**-45 rounds up to 2.0, a carry through all 24
        ("fp32", _TIE + _NEGATIVE + [0x40000000] * 2),
        ("fp16", _TIE[:3] + _NEGATIVE[:3]),  # FP16 holds neither 2**-30 nor 2**-40
        ("int8", []),
    ],
)
def test_rounding_ops_reach_their_corners(fmt, bits):
    """The directed ops of run 0 give the binary32 results their docstring names (checked on
    the model), so that they keep reaching the corners they are there for."""
    import numpy as np

    from tlm.tensor import matmul
    from verif.tensor.stimulus import rounding_ops

    got = []
    for op in rounding_ops(EngineConfig(2, 2, fmt)):
        out = matmul(op.stationary, op.moving, fmt=tuple(f.name for f in op.fmt))
        got += np.asarray(out, np.float32).view(np.uint32).ravel().tolist()
    assert got == bits


def _aligned_sums(ops):
    """The binary32 adder's sum before normalisation (``add_total`` of ``hdl/fp/add.py``, an
    integer on the smaller addend's last place) at each K = 2 op's second step: the
    accumulator (the first product) plus the second product."""
    import struct

    import numpy as np

    def unpack(v):  # sign, 24-bit significand, exponent field (a subnormal's 0 read as 1)
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        e, frac = (bits >> 23) & 0xFF, bits & 0x7FFFFF
        return bits >> 31, frac | (1 << 23 if e else 0), max(e, 1)

    sums = []
    for op in ops:
        w = op.stationary.astype(np.float32)
        x = op.moving.astype(np.float32)
        assert w.shape[0] == 2
        for m in range(w.shape[1]):
            for n in range(x.shape[1]):
                (sx, mx, ex), (sy, my, ey) = sorted(
                    (unpack(float(w[k, m] * x[k, n])) for k in range(2)), key=lambda u: -u[2]
                )
                gap = ex - ey
                big = mx << min(gap, 31)
                small = my if gap <= 31 else int(my != 0)
                sums.append((-big if sx else big) + (-small if sy else small))
    return sums


@pytest.mark.parametrize("fmt,low", [("bf16,fp16,tf32", 3), ("fp32", 0), ("bf16", 9)])
def test_adder_ops_reach_every_place(fmt, low):
    """adder_ops' sums (on a model of the adder's alignment) have their leading one at every
    place of the field from ``low`` to 54 but 23, both signs, and the negation ops leave
    negative sums ``-(2**23 - 2**p)`` for each p = 23 - q of negation_places: the sums that
    killed the surviving mutants of the leading-zero count (places 17, 18) and of the
    negation's prefix OR (p = 11, ones of bits 10 and 11 its only input)."""
    from verif.tensor.stimulus import adder_ops, negation_places

    cfg = EngineConfig(2, 2, fmt)
    sums = _aligned_sums(adder_ops(cfg))
    for sign in (1, -1):
        leads = {abs(t).bit_length() - 1 for t in sums if t * sign > 0}
        assert leads >= set(range(low, 55)) - {23}
    fmt_used = max(
        (f for f in cfg.formats if (f, f) in cfg.pairs() and f.kind == "float"),
        key=lambda f: (f.exp_bits, 23 if f.ignored_low_bits else f.man_bits),
    )
    lows = {(t & -t).bit_length() - 1 for t in sums if t < 0 and -t == 2**23 - (t & -t)}
    assert lows == {23 - q for q in negation_places(fmt_used)}
    if fmt != "bf16":
        assert 11 in lows


def test_adder_ops_none_on_integers():
    from verif.tensor.stimulus import adder_ops

    assert adder_ops(EngineConfig(2, 2, "int8")) == []
    assert adder_ops(EngineConfig(1, 2, "bf16")) == []


def _first_sums(ops):
    """The adder's sum before normalisation (as :func:`_aligned_sums`) at each K = 1 op's
    step: the accumulator +0.0 plus the product."""
    import numpy as np

    sums = []
    for op in ops:
        w, x = op.stationary.astype(np.float32), op.moving.astype(np.float32)
        zero = np.zeros((1,) + w.shape[1:], np.float32)
        both = type(op)(np.vstack([x, np.ones_like(x)]), np.vstack([w, zero]), op.fmt)
        sums += _aligned_sums([both])
    return sums


@pytest.mark.parametrize("fmt,places", [("bf16,fp16,tf32", range(2, 55)), ("fp32", range(55))])
def test_lowest_one_ops_reach_every_place(fmt, places):
    """lowest_one_ops' negative sums (a product plus zero, on the model of the adder's
    alignment) have their lowest one at every place a product's can be: the float target's
    m003 (output 27 of the negation's prefix OR without total[24..27]) needs one at 24 to 27,
    which the random ops and the other directed ones never gave."""
    from verif.tensor.stimulus import adder_ops, lowest_one_ops, rounding_ops

    cfg = EngineConfig(2, 2, fmt)
    lows = {(t & -t).bit_length() - 1 for t in _first_sums(lowest_one_ops(cfg)) if t < 0}
    assert lows == set(places)
    before = _aligned_sums(adder_ops(cfg) + [op for op in rounding_ops(cfg) if len(op.moving) == 2])
    assert not {(t & -t).bit_length() - 1 for t in before if t < 0} & set(range(24, 28))


def _rounding_carries(ops):
    """The kept bits of each product of ``ops`` (K = 1) that rounds up to binary32 (a
    multiple of 2**-149 below 2**-126, else 24 bits), as strings of bits."""
    import math
    from fractions import Fraction

    import numpy as np

    out = []
    for op in ops:
        for w in op.stationary.astype(np.float64)[0]:
            for x in op.moving.astype(np.float64)[0]:
                p = abs(Fraction(w) * Fraction(x))
                q = p / Fraction(2) ** max(math.floor(math.log2(p)) - 23, -149)
                kept, rest = divmod(q, 1)
                if rest > Fraction(1, 2) or rest == Fraction(1, 2) and kept % 2:
                    out.append(bin(int(kept))[2:])
    return out


def test_carry_ops_stop_the_rounding_carry_at_each_place():
    """carry_ops' products round up with the carry stopping at each place 0 to 15 of the
    float target's kept bits, ones above it: m020 (output 11 of the increment's prefix AND
    with kept[11] tied to 1) needs a stop at 11 with bits 0-10 set, which no op reached."""
    from verif.tensor.stimulus import carry_ops, rounding_ops

    cfg = EngineConfig(2, 2, "bf16,fp16,tf32")
    kept = _rounding_carries(carry_ops(cfg))
    stops = {len(k) - 1 - k.rfind("0") for k in kept if "0" in k}
    assert stops >= set(range(16))
    assert any(k.endswith("0" + "1" * 11) and len(k) > 14 for k in kept)
    before = _rounding_carries([op for op in rounding_ops(cfg) if len(op.moving) == 1])
    assert not any(k.endswith("0" + "1" * 11) for k in before)
    assert carry_ops(EngineConfig(2, 2, "int8")) == carry_ops(EngineConfig(2, 2, "fp16")) == []


def test_sum_carry_ops_stop_the_sums_rounding_carry_at_each_place():
    """sum_carry_ops' K = 2 sums round up (ties to even) with the carry stopping at each place
    2 to 15 of the kept bits, ones above it: the float target's m018 (output 17 of the
    adder's rounding increment with kept[14] & kept[15] tied to 1) needs bits 0-13 and 16-17
    set and 14 or 15 clear, which the random ops of seed 1 gave before the specials changed
    their draws, and nothing since."""
    import math
    from fractions import Fraction

    import numpy as np

    from verif.tensor.stimulus import sum_carry_ops

    kept = []
    for op in sum_carry_ops(EngineConfig(2, 2, "bf16,fp16,tf32")):
        w, x = op.stationary.astype(np.float64), op.moving.astype(np.float64)
        for c in range(w.shape[1]):
            for n in range(x.shape[1]):
                s = sum(Fraction(w[k, c]) * Fraction(x[k, n]) for k in range(2))
                q = s / Fraction(2) ** (math.floor(math.log2(s)) - 23)
                t, rest = divmod(q, 1)
                assert rest > Fraction(1, 2) or rest == Fraction(1, 2) and t % 2
                kept.append(int(t))
    stops = {(k ^ (k + 1)).bit_length() - 1 for k in kept}
    assert stops == set(range(2, 16))
    corner = sum(1 << i for i in [*range(14), 16, 17])
    assert any(k & corner == corner and (k >> 14) & 3 != 3 for k in kept)
    assert (
        sum_carry_ops(EngineConfig(2, 2, "int8")) == sum_carry_ops(EngineConfig(2, 2, "fp32")) == []
    )


def test_subnormal_ops_put_the_leading_one_at_every_place():
    """subnormal_ops give every float format of the engine, moving and (the widest) stationary
    side, subnormal operands whose leading one is at each place of the fraction, and the
    results are their exact products with 2**bias: m007 (the decoders' leading-zero count
    wrong for significands of 8 to 31) needs one of those, which random operands rarely gave
    in a product big enough to show."""
    import numpy as np

    from tlm.tensor import matmul
    from verif.tensor.fp_operands import stored_fraction_bits
    from verif.tensor.stimulus import subnormal_ops

    cfg = EngineConfig(2, 2, "bf16,fp16,tf32")
    leads = {}
    for op in subnormal_ops(cfg):
        fmt = op.fmt[0]
        f = stored_fraction_bits(fmt)
        sub = op.moving if len(op.moving) == 1 else op.stationary
        side = "moving" if len(op.moving) == 1 else "stationary"
        raw = sub.view(f"u{fmt.storage_bits // 8}").ravel().astype(np.int64)
        fracs = (raw[(raw >> f) & ((1 << fmt.exp_bits) - 1) == 0] & ((1 << f) - 1)) >> (
            fmt.ignored_low_bits
        )
        leads.setdefault((fmt.name, side), set()).update(int(v).bit_length() - 1 for v in fracs)
        out = np.asarray(matmul(op.stationary, op.moving, fmt=(fmt.name, fmt.name)), np.float64)
        scale = 2.0 ** (2 ** (fmt.exp_bits - 1) - 1)
        want = sub.astype(np.float64) * scale
        assert set(out.ravel()) - {0.0} == set(want.ravel()) - {0.0}, fmt.name
    assert leads == {
        ("bf16", "moving"): set(range(7)),
        ("fp16", "moving"): set(range(10)),
        ("tf32", "moving"): set(range(10)),
        ("fp16", "stationary"): set(range(10)),
    }
    assert subnormal_ops(EngineConfig(2, 2, "int8")) == []


def _infinity_steps(seeds):
    """How often, over the float target's random ops of ``seeds``, a moving beat's operand
    is infinite where the previous beat's in the same row is not, or the other way round."""
    import numpy as np

    from verif.tensor.stimulus import random_stimulus

    cfg = EngineConfig(2, 2, "bf16,fp16,tf32")
    steps = 0
    for seed in seeds:
        stim = random_stimulus(cfg, np.random.default_rng(seed), ops=8, max_n=8, misuse=False)
        for op in stim.ops:
            with np.errstate(invalid="ignore"):  # NaN bit patterns cast
                inf = np.isinf(op.moving.astype(np.float64))
            steps += int((inf[:, 1:] != inf[:, :-1]).sum())
    return steps


def test_float_operands_have_specials_beside_finite_values(monkeypatch):
    """In SPECIALS_P of the draws a float op's operands are SPECIALS_DENSITY special values among
    edge values, so that an infinite moving operand follows a finite one in a row (and the other
    way) a few times a run (29 in 8 runs, 3 without): while the result stream stalls, that kills the
    float target's m029 (the multiplier's registered infinity flag loaded while the pipeline holds),
    which edge values alone (about one infinity in 200) left alive."""
    import verif.tensor.stimulus as stimulus

    seeds = range(8)
    with_specials = _infinity_steps(seeds)
    monkeypatch.setattr(stimulus, "SPECIALS_P", 0.0)
    without = _infinity_steps(seeds)
    assert with_specials >= 2 * len(seeds) and with_specials > 4 * without, (with_specials, without)


def test_mismatch_burst_counts_past_bit_6():
    """Run 0 of a multi-format engine's bench has MISMATCH_BURST moving ops of one beat in a
    format that does not mix with the stationary in use, before the directed ops (whose
    cycles then show the counter's last value); none where every format mixes."""
    from verif.tensor.stimulus import MISMATCH_BURST, run_stimulus

    cfg = EngineConfig(2, 2, "bf16,fp16,tf32")
    stim = run_stimulus(cfg, 1, 0, ops=8, max_n=8)
    s_fmt = stim.ops[7].fmt[0]  # the last random op's stationary
    clash = {cfg.code(f) for f in cfg.formats if (s_fmt, f) not in cfg.pairs()}
    first_directed = len(stim.mv_beats) - sum(len(op.moving_beats(cfg)) for op in stim.ops[8:])
    burst = stim.mv_beats[first_directed - MISMATCH_BURST : first_directed]
    assert MISMATCH_BURST >= 2**6
    assert all(b.last and not b.load and b.fmt in clash for b in burst)
    later = run_stimulus(cfg, 1, 1, ops=8, max_n=8)
    assert not any(m.startswith("format_mismatch x") for m in later.misuse)
    one = run_stimulus(EngineConfig(2, 2, "int8"), 1, 0, ops=8, max_n=8)
    assert not any("format_mismatch" in m for m in one.misuse)


def test_bad_format_loads_count_to_3():
    """Run 0 of an engine with a format code that names no format ends its loads before the
    directed ops with LOAD_FORMAT_BURST one-beat loads of that code (the counter then goes
    1 -> 2 -> 3 at least); none in later runs or where every code names a format."""
    from verif.tensor.stimulus import LOAD_FORMAT_BURST, run_stimulus

    cfg = EngineConfig(2, 2, "bf16,fp16,tf32")
    stim = run_stimulus(cfg, 1, 0, ops=8, max_n=8)
    first_directed = len(stim.ld_beats) - sum(len(op.load_beats(cfg)) for op in stim.ops[8:])
    burst = stim.ld_beats[first_directed - LOAD_FORMAT_BURST : first_directed]
    assert LOAD_FORMAT_BURST >= 3
    assert all(b.k == 1 and b.last and b.fmt >= len(cfg.formats) for b in burst), burst
    later = run_stimulus(cfg, 1, 1, ops=8, max_n=8)
    assert not any(m.startswith("load_bad_format x") for m in later.misuse)
    one = run_stimulus(EngineConfig(2, 2, "int8"), 1, 0, ops=8, max_n=8)
    assert not any(m.startswith("load_bad_format x") for m in one.misuse)


def test_config_from_env():
    """The benches' engine from ``TE_*``: defaults when unset or empty, the stage counts of a
    pipelined engine when given (what ``make bench`` sends for ``PIPELINED_FLOAT``)."""
    assert config_from_env({}) == EngineConfig(4, 4)
    assert config_from_env({"TE_PE_STAGES": "", "TE_STATUS_BITS": ""}) == EngineConfig(4, 4)
    env = {"TE_ROWS": "8", "TE_COLS": "2", "TE_FORMAT": "all", "TE_STATUS_BITS": "4"}
    env |= {"TE_PE_STAGES": "11", "TE_DECODE_STAGES": "2"}
    cfg = config_from_env(env)
    assert cfg == EngineConfig(8, 2, "all", status_bits=4, pe_stages=11, decode_stages=2)
    assert cfg.latency == 8 * 6 + 5 + 2 + 2
