"""The inputs of a study on a chip preset: ``--preset`` and ``--choose``."""

from __future__ import annotations

import re
from functools import cached_property

from pydantic import Field

from ..presets import PRESETS, ChipSpec, PresetError, load_preset, mx_presets
from .protocol import InputError, Inputs

__all__ = ["PresetInputs"]

# "choose['tensor.freq_hz'] must name one of its alternatives (a, b), not 'c'"
_BAD_ALTERNATIVE = re.compile(
    r"choose\['(.+)'\] must name one of its alternatives \((.*)\), not '(.*)'"
)
_PRESET_ALLOWED = f"one of {', '.join(PRESETS)}, or a preset file path ending in .toml"


class PresetInputs(Inputs):
    """Inputs of a study on a chip preset: ``--preset`` and ``--choose``."""

    preset: str = Field(
        "trn2",
        description="chip preset: trn1, trn2, trn3, or a preset TOML file",
        json_schema_extra={"allowed": _PRESET_ALLOWED},
    )
    choose: dict[str, str] = Field(
        default_factory=dict,
        description="a named alternative for a preset figure, SECTION.FIGURE=ALTERNATIVE "
        "(repeatable), e.g. tensor.freq_hz=core_nki2",
        json_schema_extra={
            "allowed": "SECTION.FIGURE=ALTERNATIVE naming an alternative "
            "the preset lists (see tlm/presets/*.toml)"
        },
    )

    @cached_property
    def spec(self) -> ChipSpec:
        """The preset with the chosen alternatives."""
        if self.preset not in PRESETS and not self.preset.endswith(".toml"):
            raise InputError("preset", self.preset, _PRESET_ALLOWED)
        try:
            return load_preset(self.preset, self.choose)
        except PresetError as error:
            text = str(error)
            given = ",".join(f"{k}={v}" for k, v in self.choose.items())
            bad_alt = _BAD_ALTERNATIVE.match(text)
            if bad_alt:
                raise InputError(
                    "choose", f"{bad_alt[1]}={bad_alt[3]}", f"{bad_alt[1]}=one of {bad_alt[2]}"
                ) from None
            if text.startswith("choose names figures"):
                raise InputError(
                    "choose",
                    given,
                    "SECTION.FIGURE=ALTERNATIVE for a figure with alternatives in the preset",
                    f"names figures {self.preset} has no alternatives for "
                    f"({text.rpartition(': ')[2]})",
                ) from None
            raise InputError("preset", self.preset, _PRESET_ALLOWED, f"fails: {text}") from None
        except OSError as error:
            raise InputError(
                "preset", self.preset, _PRESET_ALLOWED, f"cannot be read ({error.strerror})"
            ) from None

    def check_format(self, fmt: str, field: str = "format", names=None) -> None:
        """Raise :class:`InputError` on ``field`` when the preset's tensor engine lacks
        ``fmt`` (an MX format on a chip without MX); ``names`` are the formats the input
        allows (default every format)."""
        from ..formats import FORMATS, get_format

        if get_format(fmt).kind != "mx" or self.spec.has_mx:
            return
        have = [n for n in (names or FORMATS) if get_format(n).kind != "mx"]
        raise InputError(
            field,
            fmt,
            f"one of {', '.join(sorted(have))} (MX formats are on {', '.join(mx_presets())})",
            f"is an MX format, which {self.spec.name}'s tensor engine does not have",
        )
