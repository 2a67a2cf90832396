"""Study inputs as files: read a ``--config`` file, write a run's inputs or its whole contract.

A config file holds a study's inputs by field name, in TOML (top-level keys, or an
``[inputs]`` table) or JSON (a run's contract as ``--out`` wrote it, whose ``inputs`` are used,
or a plain object of inputs). ``trnsim STUDY --out run.toml`` writes the resolved inputs as
TOML, ``--out run.json`` the whole contract; either, given to ``--config``, reruns the study.

Examples
--------
>>> print(dumps_toml("noc", {"shape": "4x4", "rate": [0.1, 0.2], "seed": 0}), end="")
# trnsim noc: rerun with `trnsim noc --config FILE`
study = "noc"
[inputs]
shape = "4x4"
rate = [0.1, 0.2]
seed = 0
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

from ..datafile import read_text
from .protocol import InputError

__all__ = ["load_config", "dumps_toml", "write_output"]

_KINDS = "a .toml file of inputs, or a .json run contract (trnsim ... --out run.json)"


#: The keys of a saved run (:meth:`tlm.studies.protocol.Report.to_dict`).
_RUN_KEYS = {"study", "version", "inputs", "results", "series"}


def load_config(path: str, study: str) -> dict:
    """The inputs in config file ``path`` for ``study`` (field name -> value).

    Raises
    ------
    InputError
        On ``config``: unreadable, not TOML/JSON, or written for another study.
    """
    p = Path(path)
    try:
        text = read_text(p, ValueError, "")
    except ValueError as error:  # "cannot be read (...)" or "is not UTF-8 text (...)"
        raise InputError("config", path, _KINDS, str(error).removeprefix(": ")) from None
    try:
        data = json.loads(text) if p.suffix == ".json" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as error:
        kind = "JSON" if p.suffix == ".json" else "TOML"
        raise InputError("config", path, _KINDS, f"is not valid {kind} ({error})") from None
    if not isinstance(data, dict):
        raise InputError("config", path, _KINDS, "does not hold a table of inputs")
    named = data.get("study")
    if named is not None and named != study:
        raise InputError("config", path, f"a config of trnsim {study}", f"is for {named!r}")
    stray = sorted(set(data) - _RUN_KEYS) if named is not None else []
    if stray:  # a run (it names its study) keeps its inputs in its inputs table
        raise InputError(
            "config", path, f"a run's keys ({', '.join(sorted(_RUN_KEYS))})", f"has {stray[0]!r}"
        )
    inputs = data.get("inputs", data if named is None else {})
    if not isinstance(inputs, dict):
        raise InputError("config", path, _KINDS, "has an 'inputs' that is not a table")
    return {k: v for k, v in inputs.items() if v is not None}


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # the shortest text that reads back as the same float
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"cannot write {value!r} to TOML")


def dumps_toml(study: str, inputs: dict) -> str:
    """A study's inputs as a TOML config (inputs that are ``None`` are left out: unset)."""
    lines = [f"# trnsim {study}: rerun with `trnsim {study} --config FILE`", f'study = "{study}"']
    lines.append("[inputs]")
    lines += [f"{k} = {_toml_value(v)}" for k, v in inputs.items() if v is not None]
    return "\n".join(lines) + "\n"


def write_output(path: str, contract: dict) -> Path:
    """Write a run to ``path``: its inputs as TOML (``.toml``), else the whole JSON contract.

    Raises
    ------
    InputError
        On ``out`` when the file cannot be written.
    """
    p = Path(path)
    text = (
        dumps_toml(contract["study"], contract["inputs"])
        if p.suffix == ".toml"
        else json.dumps(contract, indent=1) + "\n"
    )
    try:
        p.write_text(text)
    except OSError as error:
        raise InputError(
            "out", path, "a file path this user may write", f"cannot be written ({error.strerror})"
        ) from None
    return p
