"""The studies' plain tables (tlm/studies/tables.py) against rich, character for character."""

import io
import random

import pytest
from rich.console import Console

from tlm.studies.cli import rich_table
from tlm.studies.tables import line, lines

#: Words of every kind a cell holds: numbers with units, names, paths, long sources.
WORDS = [
    "16",
    "2,048",
    "51.4 ms",
    "1.17 tokens/s",
    "llama3.1-405b",
    "(tlm/presets/trn2.toml",
    "chip.hbm_bandwidth_Bps);",
    "x",
    "",
    "-",
    "a" * 23,
    "NxD Inference's generated",
    "tlm/inference/data/fixed_costs.toml,",
    "b" * 61,
    "µs ×",
    "ASSUMED",
]


def _rich(title, header, rows, width) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, markup=False, emoji=False, color_system=None)
    console.print(rich_table(title, header, rows))
    return out.getvalue().split("\n")[:-1]


def _text(rng) -> str:
    words = rng.choices(WORDS, k=rng.choice([0, 1, 1, 2, 3, 8, 20]))
    return (" " * rng.choice([1, 1, 1, 2])).join(words)


def check_table(rng, width):
    columns = rng.choice([1, 2, 2, 3, 5, 9, 14])
    header = [
        rng.choice(["figure", "value", "time (s)", "", "kv cache (GiB)"]) for _ in range(columns)
    ]
    rows = [[_text(rng) for _ in range(columns)] for _ in range(rng.choice([0, 1, 3, 12]))]
    title = rng.choice(["inputs", "results", "", "series of " + "many words " * 30])
    drawn = lines(title, header, rows, width=width)
    if drawn is not None:
        assert drawn == _rich(title, header, rows, width), (title, header, rows, width)
    return drawn is not None


@pytest.mark.parametrize("width", [200, 120, 60, 30])
def test_tables_as_rich_draws_them(width):
    """Random tables of words, long words and empty cells, at several widths: the same
    lines as rich, wherever :func:`lines` draws them (most)."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    drawn = sum(check_table(rng, width) for _ in range(300))
    assert drawn > 150


def test_the_studies_tables():
    """A figures table with a source to wrap, as ``trnsim infer`` prints it to a pipe."""
    source = "chip TLM trn2, cached tlm/costs/data/trn2.json (2026-11-24T07:02Z): " * 6
    rows = [("ttft", "573 ms"), ("costs source", source), ("max batch", "148")]
    assert lines("results", ("figure", "value"), rows, width=200) == _rich(
        "results", ("figure", "value"), rows, 200
    )


def test_what_rich_must_draw():
    """Tabs, line breaks and wide characters go to rich: None."""
    assert lines("t", ("a",), [("x\ty",)], width=200) is None
    assert lines("t", ("a",), [("x\ny",)], width=200) is None
    assert lines("t", ("a",), [("≤ 3",)], width=200) is None
    assert lines("t", ("a",), [("漢字",)], width=200) is None
    assert line("trnsim infer: a title", 200) == ["trnsim infer: a title"]
    assert line("x" * 201, 200) is None
