"""Data files of the models (chip, system and workload presets): TOML validated by a pydantic
schema, every error one line that names the file and the figure. The one reader of them all.
"""

from __future__ import annotations

import tomllib

from pydantic import BaseModel, ValidationError

__all__ = ["parse_data_file"]


def parse_data_file(text: str, where, schema: type[BaseModel], error: type[Exception]):
    """``schema`` validated from the TOML ``text`` of the file ``where``.

    Raises
    ------
    error
        ``WHERE: not valid TOML: ...`` or ``WHERE: FIELD.PATH: what is wrong`` (the first
        problem pydantic finds).
    """
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        raise error(f"{where}: not valid TOML: {problem}") from None
    try:
        return schema.model_validate(raw)
    except ValidationError as problem:
        first = problem.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise error(f"{where}: {loc}: {message}" if loc else f"{where}: {message}") from None
