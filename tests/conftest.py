"""Shared pytest options: the seed of random tests, and of every Hypothesis test."""

import os
import random

import hypothesis
import pytest


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="seed for random tests (or SEED=)")


def given_seed(config):
    """--seed, else $SEED, else None."""
    value = config.getoption("--seed")
    if value is None and os.environ.get("SEED"):
        value = int(os.environ["SEED"])
    return value


@pytest.fixture
def seed(request):
    """The seed of a random test: --seed, else $SEED, else fresh; always printed, and a
    property of the test in the JUnit report (``make test``: build/reports/junit.xml)."""
    value = given_seed(request.config)
    if value is None:
        value = random.randrange(1 << 31)
    print(f"\nseed {value} (rerun with SEED={value})")
    request.node.user_properties.append(("seed", value))
    return value


def pytest_configure(config):
    """One seed for every Hypothesis test of the session: --seed, else $SEED, else fresh;
    pytest-xdist's workers take the controller's (see pytest_configure_node). The numpy
    SIMD features NPY_DISABLE_CPU_FEATURES names are checked off (make test-dispatch)."""
    config.dispatch_off = _dispatch_off()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "hypothesis_seed" in workerinput:
        config.hypothesis_seed = workerinput["hypothesis_seed"]
    else:
        value = given_seed(config)
        config.hypothesis_seed = random.randrange(1 << 31) if value is None else value


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist: each worker runs Hypothesis with the controller's seed."""
    node.workerinput["hypothesis_seed"] = node.config.hypothesis_seed


def _dispatch_off() -> str:
    """The numpy SIMD features NPY_DISABLE_CPU_FEATURES names, checked off: a name this
    numpy knows that is still on would let make test-dispatch pass without its point."""
    from numpy._core._multiarray_umath import __cpu_features__ as features

    names = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
    still_on = [n for n in names if features.get(n)]
    if still_on:
        raise pytest.UsageError(
            f"NPY_DISABLE_CPU_FEATURES names {' '.join(still_on)}, still on in this numpy"
        )
    unknown = [n for n in names if n not in features]
    known = [n for n in names if n in features]
    return (" ".join(known) or "none") + (
        f" (unknown here: {' '.join(unknown)})" if unknown else ""
    )


def pytest_report_header(config):
    seed = config.hypothesis_seed
    return [
        f"Hypothesis seed {seed} (rerun with SEED={seed})",
        f"numpy SIMD features off: {config.dispatch_off} (NPY_DISABLE_CPU_FEATURES)",
    ]


def pytest_collection_modifyitems(config, items):
    """Hypothesis draws from its own random source, not from SEED; ``hypothesis.seed`` makes
    it draw from the session's seed (and skip its example database, which would replay
    earlier failures first), so ``SEED=n make test`` reruns the same examples."""
    for item in items:
        if getattr(item.obj, "is_hypothesis_test", False):
            hypothesis.seed(config.hypothesis_seed)(item.obj)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing Hypothesis test names the seed that reruns it."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        seed = item.config.hypothesis_seed
        report.sections.append(("Hypothesis seed", f"{seed} (rerun with SEED={seed})"))
