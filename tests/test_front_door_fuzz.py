"""A fuzz of the front door: every study's every typed input given values its declared type and
bounds refuse, on the command line, in process. Each must end with exit 2 and one stderr line
``trnsim STUDY: error: ...`` naming the flag, no traceback, no warning, nothing on stdout.

The bad values come from each field's annotation (pydantic ``FieldInfo``): numbers below or
above their bounds, not-numbers, NaN and infinities, words a ``Literal``
does not list, empty and malformed lists. Free-text fields (names, paths) are left to the
studies' own tests. Hypothesis draws (study, field, bad value) with the session's seed
(tests/conftest.py prints it; ``SEED=... pytest`` reruns it): ``FAST`` examples in the fast
tier; the slow tier runs every case.
"""

from __future__ import annotations

import contextlib
import io
import json
import typing
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tlm.studies import STUDIES
from tlm.studies.catalogue import CATALOGUE
from tlm.studies.cli import flag, main
from tlm.studies.protocol import bare, without_none

FAST = 150


def _bounds(field) -> tuple:
    low = high = None
    for meta in field.metadata:
        for name in ("ge", "gt"):
            if getattr(meta, name, None) is not None:
                low = (name, getattr(meta, name))
        for name in ("le", "lt"):
            if getattr(meta, name, None) is not None:
                high = (name, getattr(meta, name))
    return low, high


def _bad_numbers(kind, field) -> list[str]:
    low, high = _bounds(field)
    out = ["abc", "", "1,5" if kind is int else "1..5"]
    if kind is int:
        out += ["1.5", "nan", "inf"]
    else:
        out += ["nan", "inf", "-inf", "1e999"]
    if low is not None:
        op, value = low
        below = value - 1 if kind is int else (value - 1.0 if op == "ge" else value)
        if op == "gt" and kind is int:
            below = value
        out.append(str(below))
    if high is not None:
        op, value = high
        above = value + 1 if (kind is int or op == "le") else value
        out.append(str(above))
    return out


def bad_values(field) -> list[str]:
    """Texts the field's declared type or bounds refuse ([] for free text)."""
    ann = bare(without_none(field.annotation))
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return ["zzz-not-a-choice", ""]
    if origin is list:
        (item,) = typing.get_args(ann)
        item = bare(item)
        if typing.get_origin(item) is typing.Literal:
            return ["zzz-not-a-choice", ",", ""]
        if item in (int, float):  # one bad item among good ones, or no item at all
            bad = [v for v in _bad_numbers(item, field) if "," not in v]
            return [f"1,{v}" if v else "," for v in bad]
        return []
    if ann in (int, float):
        return _bad_numbers(ann, field)
    return []


def _cases():
    out = []
    for name in sorted(CATALOGUE):
        study = STUDIES[name]
        for field_name, field in study.inputs.model_fields.items():
            for text in bad_values(field):
                out.append((name, field_name, text))
    return out


CASES = _cases()


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error")  # a warning is a failure, not a line before the error
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check(case) -> None:
    name, field_name, text = case
    argv = [name, f"{flag(field_name)}={text}"]
    code, out, err = run_cli(argv)
    where = f"trnsim {' '.join(argv)!r}"
    assert code == 2, f"{where}: exit {code}, stderr {err!r}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"{where}: {len(lines)} stderr lines: {err!r}"
    assert lines[0].startswith(f"trnsim {name}: error: "), f"{where}: {err!r}"
    assert flag(field_name) in lines[0] or field_name in lines[0], f"{where}: {err!r}"
    assert "Traceback" not in err and out == "", f"{where}: {out!r} {err!r}"


#: Studies whose every input is free text (names, paths, range texts): their bad inputs are
#: tests/test_studies.py's, not this fuzz's.
FREE_TEXT = {"system"}


def test_the_fuzz_covers_every_study():
    """Every study with typed inputs is in the fuzz, and the cases are many."""
    assert {c[0] for c in CASES} == set(CATALOGUE) - FREE_TEXT
    for name in FREE_TEXT:
        assert not any(bad_values(f) for f in STUDIES[name].inputs.model_fields.values())
    assert len(CASES) > 300


@settings(max_examples=FAST, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CASES))
def test_bad_inputs_end_in_one_clear_line(case):
    check(case)


@pytest.mark.slow
def test_every_bad_input_of_every_study_ends_in_one_clear_line():
    """The deep tier: every case, not a sample."""
    problems = []
    for case in CASES:
        try:
            check(case)
        except AssertionError as error:
            problems.append(str(error).splitlines()[0])
    assert not problems, f"{len(problems)} of {len(CASES)}:\n" + "\n".join(problems[:40])


@pytest.mark.slow
def test_the_fuzz_from_outside_finds_nothing(seed, tmp_path):
    """A sample of tools/fuzz_outside.py's cases (bad values read off each study's --help, each
    run in a fresh trnsim process, as a user runs them); ``make fuzz-outside`` runs all."""
    from tools.fuzz_outside import main as fuzz

    print(f"seed {seed}")
    assert fuzz(["--sample", "60", "--seed", str(seed), "--out", str(tmp_path / "f.json")]) == 0


# ------------------------------------------------------------------ bad files of every kind

#: Inputs naming a file, by the suffix a file of theirs has (config: every study's).
FILE_INPUTS = {"preset": ".toml", "model": ".toml", "hardware": ".toml", "arrivals": ".csv"}
#: Kinds of bad file: name -> what to put at the path (None: a folder; "missing": nothing).
BAD_FILES = {
    "binary": b"\xff\xfe\x00\x01 not text",
    "empty": b"",
    "truncated": b"name = [",
    "wrong table": b'name = "x"\nzzz = 1\n',
    "folder": None,
    "missing": "missing",
}


def _file_cases():
    out = []
    for name in sorted(CATALOGUE):
        fields = STUDIES[name].inputs.model_fields
        inputs = [("config", s) for s in (".toml", ".json")]
        inputs += [(f, s) for f, s in FILE_INPUTS.items() if f in fields]
        if name in ("collective", "tp-step"):  # a system file (elsewhere a kind of system)
            inputs.append(("system", ".toml"))
        out += [(name, field, suffix, kind) for field, suffix in inputs for kind in BAD_FILES]
    return out


@pytest.mark.parametrize("name,field,suffix,kind", _file_cases())
def test_bad_files_end_in_one_clear_line(name, field, suffix, kind, tmp_path):
    """A file input given a binary, empty, truncated, foreign, folder or missing file: one
    line naming the input, exit 2 - never a codec's message or a traceback."""
    path = tmp_path / f"bad{suffix}"
    content = BAD_FILES[kind]
    if content is None:
        path.mkdir()
    elif content != "missing":
        path.write_bytes(content)
    if kind == "empty" and field == "config":  # an empty config is no inputs: the defaults
        return
    argv = [name, flag(field), str(path)]
    code, out, err = run_cli(argv)
    where = f"trnsim {' '.join(argv)!r} ({kind})"
    assert code == 2, f"{where}: exit {code}, stderr {err!r}"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trnsim {name}: error: "), f"{where}: {err!r}"
    # a config's foreign key is named as the input it is not (--name: 'x' is not an input)
    named = "--name" if (field, kind, suffix) == ("config", "wrong table", ".toml") else flag(field)
    assert named in lines[0], f"{where}: {err!r}"
    assert "codec" not in lines[0] and out == "", f"{where}: {err!r}"


@pytest.mark.parametrize(
    "argv, field, value",
    [
        (["cost", "--chips", "1M"], "chips", 1_000_000),
        (["cost", "--chips", "16k"], "chips", 16_000),
        (["serve", "--requests", "2K"], "requests", 2_000),
    ],
)
def test_whole_numbers_take_thousands_and_millions(argv, field, value):
    """Any whole-number input may be written with k or M (decimal), as chip counts are."""
    code, out, err = run_cli([*argv, "--json"])
    assert code == 0, err
    assert json.loads(out)["inputs"][field] == value


@pytest.mark.parametrize("text", ["1.5k", "k", "1kk", "1 G", "-1k"])
def test_a_count_with_a_bad_suffix_is_one_line(text):
    code, _out, err = run_cli(["cost", f"--chips={text}"])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trnsim cost: error: --chips")


@pytest.mark.parametrize("text", ["-1k", "-5", "-inf", "-NaN", "-.5", "-2e9"])
def test_a_negative_value_after_its_flag_reaches_the_flags_check(text):
    """'--chips -1k' (a separate word that starts with '-') is the value of --chips, so the
    error names the flag and what it allows, not argparse's "expected one argument"."""
    code, _out, err = run_cli(["cost", "--chips", text])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("trnsim cost: error: --chips: "), err
    assert "expected one argument" not in err
