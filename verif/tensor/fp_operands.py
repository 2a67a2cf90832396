"""Floating-point operands for benches and checks: raw bit patterns biased towards the edges."""

#: binary32's largest finite value: the accumulator's range.
F32_MAX = 3.4028234663852886e38


def stored_fraction_bits(fmt) -> int:
    """Fraction bits of ``fmt``'s storage (TF32 keeps FP32's 23, its low ones ignored)."""
    return 23 if fmt.ignored_low_bits else fmt.man_bits


def edge_operands(fmt, rng, count):
    """Raw operands with exponents and fractions drawn from the edges as often as not."""
    exp_bits = fmt.exp_bits
    frac_bits = stored_fraction_bits(fmt)
    top, full = (1 << exp_bits) - 1, (1 << frac_bits) - 1
    bias = (1 << (exp_bits - 1)) - 1
    exps = [0, 1, 2, top - 1, top, bias, bias - 1, bias + 1, bias // 2, bias + bias // 2]
    fracs = [0, 1, full, full - 1, 1 << (frac_bits - 1), (1 << (frac_bits - 1)) + 1]
    out = []
    for _ in range(count):
        e = int(rng.choice(exps)) if rng.random() < 0.6 else int(rng.integers(0, top + 1))
        f = int(rng.choice(fracs)) if rng.random() < 0.5 else int(rng.integers(0, full + 1))
        s = int(rng.integers(0, 2))
        out.append((s << (exp_bits + frac_bits)) | (e << frac_bits) | f)
    return out


def special_operands(fmt) -> list[int]:
    """The raw bits of ``fmt``'s special values, both signs, to draw from: infinity twice
    (where it has one), zero, and a NaN (all ones in the fraction: a NaN in every format,
    TF32 included, and the only one of float8_e4m3fn)."""
    exp_bits = fmt.exp_bits
    frac_bits = stored_fraction_bits(fmt)
    top, full = (1 << exp_bits) - 1, (1 << frac_bits) - 1
    inf = [top << frac_bits] * 2 if fmt.has_inf else []
    values = [*inf, 0, (top << frac_bits) | full]
    return [(s << (exp_bits + frac_bits)) | v for s in (0, 1) for v in values]


def edge_operand_array(fmt, rng, count):
    """:func:`edge_operands`' distribution drawn all at once (numpy arrays; not the same
    stream of draws): for checks of many operands, where a draw at a time is the cost."""
    import numpy as np

    exp_bits = fmt.exp_bits
    frac_bits = stored_fraction_bits(fmt)
    top, full = (1 << exp_bits) - 1, (1 << frac_bits) - 1
    bias = (1 << (exp_bits - 1)) - 1
    exps = np.array([0, 1, 2, top - 1, top, bias, bias - 1, bias + 1, bias // 2, bias + bias // 2])
    fracs = np.array([0, 1, full, full - 1, 1 << (frac_bits - 1), (1 << (frac_bits - 1)) + 1])
    e = np.where(
        rng.random(count) < 0.6, rng.choice(exps, count), rng.integers(0, top + 1, count)
    ).astype(np.uint64)
    f = np.where(
        rng.random(count) < 0.5, rng.choice(fracs, count), rng.integers(0, full + 1, count)
    ).astype(np.uint64)
    s = rng.integers(0, 2, count).astype(np.uint64)
    return (s << np.uint64(exp_bits + frac_bits)) | (e << np.uint64(frac_bits)) | f
