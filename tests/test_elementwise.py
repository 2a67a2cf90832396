"""tlm/elementwise.py: each function on scalars gives what numpy gives on arrays (the
single estimate's path against the vectorised one), and keeps arrays as numpy does."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tlm import elementwise as ew

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SEED = int(os.environ.get("SEED", "20261124"))


def _values(rng, n):
    """Floats of several magnitudes, integer-valued ones and exact halves among them."""
    x = rng.uniform(-1e6, 1e6, n)
    x[::3] = np.round(x[::3])
    x[1::5] = np.round(x[1::5]) + 0.5
    x[2::7] = rng.uniform(-3, 3, len(x[2::7]))
    return x


@pytest.mark.parametrize(
    "name, reference",
    [
        ("maximum", np.maximum),
        ("minimum", np.minimum),
        ("where", None),
        ("clip", None),
        ("ceil", np.ceil),
        ("floor", np.floor),
        ("isfinite", np.isfinite),
    ],
)
def test_scalars_give_the_arrays_figures(name, reference):
    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    a, b, c = (_values(rng, 400) for _ in range(3))
    cond = rng.random(400) < 0.5
    fn = getattr(ew, name)
    if name == "where":
        many, one = fn(cond, a, b), lambda i: fn(bool(cond[i]), float(a[i]), float(b[i]))
    elif name == "clip":
        low, high = np.minimum(b, c), np.maximum(b, c)
        many = fn(a, low, high)
        one = lambda i: fn(float(a[i]), float(low[i]), float(high[i]))  # noqa: E731
    elif reference in (np.maximum, np.minimum):
        many, one = fn(a, b), lambda i: fn(float(a[i]), float(b[i]))
    else:
        many, one = fn(a), lambda i: fn(float(a[i]))
    if reference is not None:
        ref = reference(a, b) if reference in (np.maximum, np.minimum) else reference(a)
        np.testing.assert_array_equal(many, ref)
    for i in range(len(a)):
        got = one(i)
        assert not isinstance(got, np.ndarray), (name, i)
        assert got == many[i], (name, i, got, many[i])


@pytest.mark.parametrize("name", ["log2", "exp", "power"])
def test_transcendental_scalars_give_the_arrays_bits(name):
    """numpy's loops on one scalar and on an array's element: the same bits (the engines'
    one-row path relies on it), over the magnitudes the cost models use."""
    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    n = 20000
    if name == "log2":
        args = (np.exp(rng.uniform(-10, 40, n)),)
    elif name == "exp":
        args = (rng.uniform(-30, 5, n),)
    else:  # (1 - k / E) ** tokens, as the routed experts' activity
        args = (rng.uniform(0.5, 1.0, n), np.round(rng.uniform(1, 1e5, n)))
    many = getattr(np, name)(*args)
    fn = getattr(ew, name)
    for i in range(n):
        got = fn(*(float(a[i]) for a in args))
        assert type(got) is float, (name, i)
        assert got == many[i], (name, i, got, many[i])
    np.testing.assert_array_equal(fn(*args), many)


def test_booleans_reductions_and_shapes():
    assert ew.logical_not(True) is False and ew.logical_not(np.bool_(False))
    assert ew.logical_not(np.array([True, False])).tolist() == [False, True]
    assert ew.any_(np.array([False, True])) and not ew.any_(False)
    assert ew.all_(np.array([True, True])) and not ew.all_(np.array([True, False]))
    assert ew.zeros_like(3.0) == 0.0 and ew.zeros_like(np.arange(3)).dtype == float
    assert ew.ones_like(np.arange(2)).tolist() == [1.0, 1.0]
    assert ew.as_float(np.arange(2)).dtype == float and type(ew.as_float(np.int64(2))) is float
    assert ew.as_int(np.array([1.0])).dtype == np.int64 and ew.as_int(True) == 1
    assert ew.number(3) == 3.0 and ew.number([1, 2]).dtype == float
    assert ew.number(True).shape == ()  # a bool is an array, as np.asarray makes it
    assert ew.first(np.array([[4.0, 5.0]])) == 4.0 and ew.first(7) == 7
    assert ew.shaped(2.0, ()).shape == () and ew.shaped(2.0, (1, 1)).tolist() == [[2.0]]
    assert ew.shaped(2, (3,), np.int64).tolist() == [2, 2, 2]
    column = np.arange(3.0)
    assert ew.shaped(column, (3,)) is column
    assert ew.shaped(np.array(1.5), (2,)).tolist() == [1.5, 1.5]
    assert ew.ceil(float("inf")) == float("inf") and np.isnan(ew.floor(float("nan")))
    assert ew.broadcast_shape(1.0, np.float64(2.0)) == ()
    assert ew.broadcast_shape(np.zeros((2, 1)), 1.0, np.zeros(3)) == (2, 3)
