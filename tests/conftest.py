"""Shared pytest options: the seed of random tests."""

import os
import random

import pytest


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="seed for random tests (or SEED=)")


@pytest.fixture
def seed(request):
    """The seed of a random test: --seed, else $SEED, else fresh; always printed."""
    value = request.config.getoption("--seed")
    if value is None and os.environ.get("SEED"):
        value = int(os.environ["SEED"])
    if value is None:
        value = random.randrange(1 << 31)
    print(f"\nseed {value} (rerun with SEED={value})")
    return value
