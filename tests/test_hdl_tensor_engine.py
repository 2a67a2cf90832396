"""The tensor engine in Amaranth's simulator, in lockstep with the TLM's cycle model."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.tensor import TensorEngine
from tlm.tensor.config import EngineConfig
from verif.tensor.drivers import Traffic
from verif.tensor.scoreboard import Observed, Scoreboard
from verif.tensor.signals import raw_lanes
from verif.tensor.stimulus import pattern, random_stimulus


def run_engine(cfg, stim, seed, ld_pat="always", mv_pat="always", ready_pat="always"):
    rng = np.random.default_rng(seed)
    dut = TensorEngine(cfg)
    traffic = Traffic(stim, pattern(ld_pat, rng), pattern(mv_pat, rng), pattern(ready_pat, rng))
    board = Scoreboard(cfg, seed)
    limit = 200 + 8 * (len(stim.ld_beats) + len(stim.mv_beats) + cfg.latency) * 4

    async def bench(ctx):
        for _ in range(limit):
            if traffic.done:
                return
            ld, mv, ready = traffic.offers()
            ctx.set(dut.ld_stream.valid, ld is not None)
            if ld is not None:
                ctx.set(
                    dut.ld_stream.payload,
                    {
                        "data": [int(v) for v in raw_lanes(cfg, ld.fmt, ld.data)],
                        "k": ld.k,
                        "last": ld.last,
                        **({"fmt": ld.fmt} if cfg.fmt_bits else {}),
                    },
                )
            ctx.set(dut.mv_stream.valid, mv is not None)
            if mv is not None:
                ctx.set(
                    dut.mv_stream.payload,
                    {
                        "data": [int(v) for v in raw_lanes(cfg, mv.fmt, mv.data)],
                        "load": mv.load,
                        "last": mv.last,
                        **({"fmt": mv.fmt} if cfg.fmt_bits else {}),
                    },
                )
            ctx.set(dut.res_stream.ready, ready)
            res = ctx.get(dut.res_stream.payload)
            status = ctx.get(dut.status)
            observed = Observed(
                ld_ready=bool(ctx.get(dut.ld_stream.ready)),
                mv_ready=bool(ctx.get(dut.mv_stream.ready)),
                res_valid=bool(ctx.get(dut.res_stream.valid)),
                res_last=bool(res.last),
                res_data=np.array([res.data[i] for i in range(cfg.cols)]),
                flags=int(status.flags),
                counts=tuple(int(status.counts[i]) for i in range(len(status.counts))),
            )
            traffic.update(board.check(ld, mv, ready, observed))
            await ctx.tick()
        raise AssertionError(f"engine made no progress in {limit} cycles (seed {seed})")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert board.results == stim.results
    return board


@pytest.mark.parametrize(
    "rows,cols", [(1, 1), (2, 3), (3, 2), (4, 4), (5, 1)], ids=lambda v: str(v)
)
@pytest.mark.parametrize(
    "patterns",
    [("always",) * 3, ("random",) * 3, ("3of4", "1of2", "1of4")],
    ids=lambda p: "-".join(p),
)
def test_engine_random(rows, cols, patterns, seed):
    cfg = EngineConfig(rows, cols)
    stim = random_stimulus(cfg, np.random.default_rng(seed), ops=6, max_n=8)
    run_engine(cfg, stim, seed, *patterns)


@pytest.mark.parametrize(
    "rows,cols,fmt,stages,decode",
    [
        (4, 4, "int8", 1, 1),
        (5, 1, "int8", 2, 1),
        (4, 4, "bf16", 1, 1),
        (4, 4, "bf16", 1, 2),
        (4, 3, "bf16", 3, 2),
        (3, 4, "all", 4, 1),
        (4, 2, "int8,fp32", 7, 2),
        (4, 4, "fp8_e4m3,fp8_e5m2,bf16", 10, 2),
        (3, 3, "fp32", 11, 2),
        (3, 3, "all", 11, 1),
        (3, 2, "bf16", 12, 2),
        (3, 3, "all", 13, 2),
    ],
    ids=lambda v: str(v),
)
def test_engine_at_each_stage_count(rows, cols, fmt, stages, decode, seed):
    """PEs of one stage and of several (the sum taking several cycles per row, the product
    ahead of it), operand decoders with and without their register: cycle for cycle the
    model's latency, bit for bit its values, with loads overlapping the previous op's moving
    stream under random patterns."""
    cfg = EngineConfig(rows, cols, fmt, pe_stages=stages, decode_stages=decode)
    stim = random_stimulus(cfg, np.random.default_rng(seed), ops=6, max_n=6)
    run_engine(cfg, stim, seed, "random", "random", "random")


def directed(cfg, misuse):
    """A stimulus with one kind of misuse before a good op (stationary 1s, moving 2s)."""
    from tlm.tensor.timing import LoadBeat, MovingBeat, Op
    from verif.tensor.stimulus import Stimulus

    stim = Stimulus()
    row = np.ones(cfg.cols, np.int64)
    if misuse == "no_stationary":
        stim.mv_beats += [MovingBeat(np.full(cfg.rows, 9), False, j == 2) for j in range(3)]
    elif misuse == "cut_short":
        stim.ld_beats += [LoadBeat(row * 7, cfg.rows, False), LoadBeat(row * 7, cfg.rows, True)]
    elif misuse == "overrun":
        stim.ld_beats += [LoadBeat(row * 7, 1, j == 2) for j in range(3)]
    elif misuse == "bad_k":
        stim.ld_beats += [LoadBeat(row * 7, 0, True), LoadBeat(row * 7, cfg.rows + 1, True)]
    op = Op(np.full((cfg.rows, 4), 2), np.ones((cfg.rows, cfg.cols), np.int64))
    stim.ops.append(op)
    stim.ld_beats += op.load_beats(cfg)
    stim.mv_beats += op.moving_beats(cfg)
    return stim


@pytest.mark.parametrize(
    "misuse,kind,count",
    [
        ("no_stationary", 0, 1),
        ("cut_short", 1, 1),
        ("overrun", 1, 1),
        ("bad_k", 2, 2),
    ],
)
@pytest.mark.parametrize("ready", ["always", "1of4"])
def test_engine_misuse_is_flagged_counted_and_recovers(misuse, kind, count, ready, seed):
    cfg = EngineConfig(4, 2)  # 3-bit K field: K = 5 (> rows) can reach the RTL
    stim = directed(cfg, misuse)
    board = run_engine(cfg, stim, seed, ready_pat=ready)
    # The scoreboard held the RTL's status to the model's every cycle; the model's final
    # status is therefore the RTL's too.
    status = board.model.step()
    assert status.counts[kind] == count and sum(status.counts) == count
    assert status.flags == 1 << kind


def test_engine_with_another_integer_format(seed):
    """The number format is a parameter of the design: a 12-bit operand, 32-bit sum engine."""
    from tlm.formats import IntFormat

    cfg = EngineConfig(3, 2, IntFormat("int12", bits=12, acc_bits=32))
    stim = random_stimulus(cfg, np.random.default_rng(seed), ops=5, max_n=6)
    run_engine(cfg, stim, seed, "random", "random", "random")


def test_status_counters_saturate_in_rtl(seed):
    """With 2-bit counters, five bad loads count 3 (saturated), in lockstep with the model."""
    from tlm.tensor.timing import LoadBeat
    from verif.tensor.stimulus import Stimulus

    cfg = EngineConfig(2, 2, status_bits=2)
    stim = Stimulus()
    stim.ld_beats = [LoadBeat(np.ones(2, np.int64), 0, True) for _ in range(5)]
    board = run_engine(cfg, stim, seed)
    for _ in range(2):  # let the last error reach the counter
        board.model.step()
    assert board.model.step().counts[2] == 3


@pytest.mark.parametrize(
    "fmt", ["bf16", "fp16", "fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2", "tf32", "fp32"]
)
def test_engine_with_a_floating_point_format(fmt, seed):
    """The engine elaborated for one floating-point format, in lockstep with the model:
    results bit for bit (the numerics contract), edge-biased operands, random patterns."""
    cfg = EngineConfig(3, 2, fmt)
    stim = random_stimulus(cfg, np.random.default_rng(seed), ops=4, max_n=5)
    run_engine(cfg, stim, seed, "random", "random", "random")


@pytest.mark.parametrize(
    "formats",
    ["all", "fp8_e4m3,fp8_e5m2,bf16", "int8,fp32", "bf16,fp16,tf32"],
)
def test_engine_with_formats_chosen_per_op(formats, seed):
    """One engine elaborated with a set of formats; each op picks its formats by code (FP8
    pairs mixed, FP32 at quarter rate, integers beside floats), misuse included (unknown
    codes, formats that do not mix), in lockstep with the model under random patterns."""
    cfg = EngineConfig(3, 2, formats)
    stim = random_stimulus(cfg, np.random.default_rng(seed), ops=8, max_n=5)
    run_engine(cfg, stim, seed, "random", "random", "random")


def test_engine_format_misuse_is_flagged_counted_and_recovers(seed):
    """A load with an unknown code, a moving op with an unknown code and one whose format
    does not mix with the stationary: each dropped and counted; a good op still works."""
    from tlm.tensor.config import ErrorKind
    from tlm.tensor.timing import LoadBeat, MovingBeat, Op
    from verif.tensor.stimulus import Stimulus

    cfg = EngineConfig(2, 2, "bf16,fp16,fp32")  # codes 0..2; code 3 names no format
    bf16, fp16 = np.dtype("bfloat16"), np.float16
    stim = Stimulus()
    stim.ld_beats += [LoadBeat(np.array([5, 6]), 2, j == 1, fmt=3) for j in range(2)]
    first = Op(np.ones((2, 2), bf16), np.ones((2, 2), bf16))
    stim.ops.append(first)
    stim.ld_beats += first.load_beats(cfg)
    stim.mv_beats += first.moving_beats(cfg)
    stim.mv_beats += [MovingBeat(np.array([1, 2]), False, j == 2, fmt=3) for j in range(3)]
    stim.mv_beats += [MovingBeat(np.ones(2, fp16), False, True, fmt=1)]
    again = Op(np.full((2, 3), 2, bf16))  # reuses the bf16 stationary
    stim.ops.append(again)
    stim.mv_beats += again.moving_beats(cfg)
    board = run_engine(cfg, stim, seed, ready_pat="1of4")
    status = board.model.step()
    kinds = (ErrorKind.LOAD_FORMAT, ErrorKind.MOVING_FORMAT, ErrorKind.FORMAT_MISMATCH)
    assert [status.counts[k] for k in kinds] == [1, 1, 1]
    assert status.flags == sum(1 << k for k in kinds)
