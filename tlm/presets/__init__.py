"""Chip presets: TOML data files (``trn1``, ``trn2``, ``trn3``) validated on load.

Examples
--------
>>> from tlm.presets import load_preset
>>> spec = load_preset("trn2")
>>> spec.chip.cores, spec.core.sbuf_partitions, spec.core.sbuf_partition_bytes // 1024
(8, 128, 224)
>>> spec.peak_flops("bf16") == 667e12          # the published chip figure, exactly
True
>>> load_preset("trn2", choose={"tensor.freq_hz": "core_nki2"}).tensor.freq_hz
2400000000.0
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import SimpleNamespace

from ..datafile import parse_data_file, read_text
from ..formats import MX_BLOCK
from .schema import OPTIONAL_SECTIONS, SECTIONS, PresetFile

__all__ = ["PRESETS", "ChipSpec", "load_preset", "PresetError", "mx_presets"]

#: Presets shipped with the package.
PRESETS = ("trn1", "trn2", "trn3")


class PresetError(ValueError):
    """A preset file or a choice of alternatives that does not validate."""


@dataclass(frozen=True)
class ChipSpec:
    """A preset with one value picked per figure: plain numbers, units in the names.

    ``chip``, ``core``, ``tensor``, ``vector``, ``scalar``, ``gpsimd`` and ``published`` are
    namespaces of numbers (``spec.core.dma_engines``); ``cost`` (chip power and price, for the
    cluster cost model) and ``collectives`` (the Neuron runtime's collective costs,
    :mod:`tlm.collectives.runtime`) are too, or None when the preset has no such section;
    ``sources`` maps each figure's dotted name to its source keys, ``choices`` the figures set
    to a named alternative.
    """

    name: str
    description: str
    chip: SimpleNamespace
    core: SimpleNamespace
    tensor: SimpleNamespace
    vector: SimpleNamespace
    scalar: SimpleNamespace
    gpsimd: SimpleNamespace
    published: SimpleNamespace
    sources: dict
    choices: dict
    cost: SimpleNamespace | None = None
    collectives: SimpleNamespace | None = None

    @property
    def cores_per_hbm_stack(self) -> int:
        return self.chip.cores // self.chip.hbm_stacks

    @property
    def hbm_capacity_bytes(self) -> int:
        """HBM of one chip in bytes: stacks x stack capacity (96 GiB on trn2)."""
        return self.chip.hbm_stacks * self.chip.hbm_stack_capacity_bytes

    def fp8_rows_per_pe(self) -> int:
        """FP8 rows each PE takes per cycle (2 in Trainium2's double-row mode)."""
        return self.tensor.fp8_max_k // self.tensor.rows

    @property
    def has_mx(self) -> bool:
        """Whether the tensor engine takes MX operands (``tensor.mx_max_k`` is given)."""
        return self.tensor.mx_max_k is not None

    def check_format(self, fmt) -> None:
        """Raise :class:`PresetError` when the chip's tensor engine lacks ``fmt`` (MX formats
        on a chip without MX), naming the format and the presets that have it."""
        from tlm.formats import get_format

        fmt = get_format(fmt)
        if fmt.kind == "mx" and not self.has_mx:
            have = ", ".join(mx_presets()) or "none"
            raise PresetError(
                f"format {fmt.name} is an MX format, which {self.name}'s tensor engine does not "
                f"have; presets with MX formats: {have}"
            )

    def rows_per_pe(self, fmt) -> int:
        """Elements of K each PE takes per cycle in ``fmt``: 1, FP8's
        :meth:`fp8_rows_per_pe`, or MX's ``tensor.mx_max_k / tensor.rows`` (4 on trn3: the
        rate of FP8's four rows per PE; MX elements are FP8 or narrower).

        Raises
        ------
        PresetError
            For an MX format on a chip without MX.
        """
        from tlm.formats import get_format

        fmt = get_format(fmt)
        self.check_format(fmt)
        if fmt.kind == "mx":
            return self.tensor.mx_max_k // self.tensor.rows
        return self.fp8_rows_per_pe() if getattr(fmt, "is_fp8", False) else 1

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak of the chip in FLOP/s for one operand format: cores x rows x cols x 2 x
        clock, times the rows per PE (:meth:`rows_per_pe`: FP8, MX), divided by the cost
        factor ``matmul_cycles`` gives the format (so FP32's lower rate follows the tensor
        engine's op cost).

        Raises
        ------
        PresetError
            For an MX format on a chip without MX.
        """
        from tlm.formats import get_format
        from tlm.tensor import EngineConfig, matmul_cycles

        fmt = get_format(dtype)
        t = self.tensor
        factor = self.rows_per_pe(fmt)
        cfg = EngineConfig(t.rows, t.cols, fmt)
        n = 512
        factor *= n / matmul_cycles(t.rows, t.cols, n, cfg=cfg, mode="reuse")
        return self.chip.cores * t.rows * t.cols * 2 * t.freq_hz * factor


def _resolve(data: PresetFile, choose: dict) -> ChipSpec:
    unused = dict(choose)
    blocks, sources, choices = {}, {}, {}
    for section in (*SECTIONS, *OPTIONAL_SECTIONS):
        block = getattr(data, section)
        if block is None:
            continue
        values = {}
        for name in type(block).model_fields:
            figure = getattr(block, name)
            if figure is None:  # an optional figure the preset does not give
                values[name] = None
                continue
            key = f"{section}.{name}"
            if figure is None:  # an optional figure left out
                values[name] = None
                continue
            option = figure
            if key in unused:
                alt = unused.pop(key)
                if alt not in figure.alternatives:
                    allowed = ", ".join(sorted(figure.alternatives)) or "none"
                    raise PresetError(
                        f"choose[{key!r}] must name one of its alternatives ({allowed}), "
                        f"not {alt!r}"
                    )
                option = figure.alternatives[alt]
                choices[key] = alt
            value = option.value
            if name in block._integers:
                value = int(value)
            values[name] = value
            sources[key] = option.source
        blocks[section] = SimpleNamespace(**values)
    if unused:
        raise PresetError(
            f"choose names figures the preset does not have: {', '.join(sorted(unused))}"
        )
    spec = ChipSpec(
        name=data.name,
        description=data.description,
        sources=sources,
        choices=choices,
        **blocks,
    )
    if spec.chip.cores % spec.chip.hbm_stacks:
        raise PresetError(
            f"chip.cores ({spec.chip.cores}) must be a multiple of chip.hbm_stacks "
            f"({spec.chip.hbm_stacks})"
        )
    if spec.core.psum_partition_bytes % spec.core.psum_banks:
        raise PresetError("core.psum_partition_bytes must divide into core.psum_banks banks")
    if spec.tensor.fp8_max_k % spec.tensor.rows:
        raise PresetError("tensor.fp8_max_k must be a multiple of tensor.rows")
    mx = spec.tensor.mx_max_k
    if mx is not None and (mx % spec.tensor.rows or mx % MX_BLOCK):
        raise PresetError(
            f"tensor.mx_max_k must be a multiple of tensor.rows ({spec.tensor.rows}) and of the "
            f"MX block ({MX_BLOCK}), not {mx}"
        )
    return spec


def load_preset(name: str | Path, choose: dict | None = None) -> ChipSpec:
    """Load and validate a preset by name (``"trn2"``) or from a TOML file path.

    Parameters
    ----------
    name : str or Path
        One of :data:`PRESETS`, or the path of a preset file.
    choose : dict, optional
        ``{"section.figure": "alternative"}``: figures to set to a named alternative.

    Raises
    ------
    PresetError
        Naming the file and what does not validate.
    """
    choose = dict(choose or {})
    if isinstance(name, Path) or str(name).endswith(".toml"):
        path = Path(name)
        text = read_text(path, PresetError)
    elif name in PRESETS:
        path = f"tlm/presets/{name}.toml"
        text = resources.files(__package__).joinpath(f"{name}.toml").read_text()
    else:
        raise PresetError(
            f"preset must be one of {', '.join(PRESETS)} or a .toml path, not {name!r}"
        )
    data = parse_data_file(text, path, PresetFile, PresetError)
    return _resolve(data, choose)


@functools.cache
def mx_presets() -> tuple[str, ...]:
    """The shipped presets whose tensor engine has MX formats."""
    return tuple(name for name in PRESETS if load_preset(name).has_mx)


def figures(spec: ChipSpec) -> dict:
    """All figures of a spec as ``{"section.name": value}``."""
    out = {}
    for section in SECTIONS:
        ns = getattr(spec, section)
        for key, value in vars(ns).items():
            out[f"{section}.{key}"] = value
    return out
