"""tests/golden.py: golden floats match within a stated tolerance, everything else exactly."""

import pytest
from golden import REL, assert_matches, mismatches


def test_a_float_within_the_tolerance_matches_and_one_beyond_it_does_not():
    golden = {"a": {"t_s": 1.9106157550182175, "n": [1.0, 2.5]}}
    ulps = {"a": {"t_s": 1.9106157550182177, "n": [1.0, 2.5 * (1 + REL / 2)]}}
    assert mismatches(ulps, golden) == []
    moved = {"a": {"t_s": 1.9106157550182175 * (1 + 2 * REL), "n": [1.0, 2.5]}}
    assert mismatches(moved, golden) == [
        f".a.t_s: {1.9106157550182175 * (1 + 2 * REL)!r} against golden 1.9106157550182175 "
        f"(rel {REL:g})"
    ]


def test_integers_text_and_shapes_match_exactly():
    assert mismatches({"k": 689169}, {"k": 689168}) == [".k: 689169 against golden 689168 (exact)"]
    assert mismatches({"k": "rdh"}, {"k": "ring"}) == [".k: 'rdh' against golden 'ring' (exact)"]
    assert mismatches({"k": [1.0]}, {"k": [1.0, 2.0]}) == [".k: [1.0] is not a list of 2"]
    assert mismatches({"a": 1.0, "b": 2.0}, {"a": 1.0, "c": 2.0}) == [".: keys differ: ['b', 'c']"]
    assert mismatches({"k": True}, {"k": 1.0}) != []


def test_assert_matches_lists_every_mismatch():
    with pytest.raises(AssertionError, match="2 figures differ") as caught:
        assert_matches({"a": 1.0, "b": 3}, {"a": 1.1, "b": 2})
    assert ".a: 1.0 against golden 1.1" in str(caught.value)
    assert ".b: 3 against golden 2 (exact)" in str(caught.value)
