"""Data files of the models (chip, system and workload presets): TOML validated by a pydantic
schema, every error one line that names the file and the figure. The one reader of them all.
"""

from __future__ import annotations

import functools
import tomllib

from pydantic import BaseModel, ValidationError

__all__ = ["parse_data_file", "read_text"]


def read_text(path, error: type[Exception], where=None) -> str:
    """The UTF-8 text of the file ``path``.

    Raises
    ------
    error
        ``WHERE: cannot be read (why)`` or ``WHERE: is not UTF-8 text (byte 0xff at offset
        0)``: a folder, a missing file, a binary file - one line, never a codec's message.
    """
    where = path if where is None else where
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as problem:
        raise error(f"{where}: cannot be read ({problem.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as problem:
        byte = data[problem.start]
        raise error(
            f"{where}: is not UTF-8 text (byte 0x{byte:02x} at offset {problem.start})"
        ) from None


@functools.lru_cache(maxsize=64)
def parse_data_file(text: str, where, schema: type[BaseModel], error: type[Exception]):
    """``schema`` validated from the TOML ``text`` of the file ``where``: a frozen model, kept
    per text (one ``trnsim infer`` reads its chip preset for the hardware, the operator costs
    and the network; it is parsed and validated once).

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
