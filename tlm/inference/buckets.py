"""Shape buckets: the sequence lengths a serving stack compiles its graphs for, and the padding
they cost.

Neuron compiles every graph for fixed shapes. NxD Inference compiles a context-encoding graph
per bucket of prompt length and a token-generation graph per bucket of sequence length, and
pads to the smallest bucket that holds the input: a 10,000-token prompt in a 12,288 bucket is
encoded as 12,288 tokens (GEMMs, causal attention), and a decode step at position 10,001 in a
12,800 bucket reads and attends 12,800 keys of KV, the unused ones masked. Without a list of
buckets NxD Inference generates them (``autobucketing.generate_buckets``): the powers of two
from 128 below ``2**round(log2(max))``, then the maximum - the prompt's for context encoding,
the whole sequence's for token generation. GPU stacks (TensorRT-LLM, vLLM on CUDA) read each
sequence's own KV pages: no length buckets.

Which stack a hardware file runs is ``shape_buckets`` in ``tlm/inference/data/fixed_costs.toml``
(``nxd`` or ``none``, with its source). :class:`ShapeBuckets` holds one deployment's lists;
:meth:`ShapeBuckets.for_stack` the stack's default for requests of a prompt and output length.

Examples
--------
>>> b = ShapeBuckets.nxd(prompt=10000, sequence=11500)
>>> b.context[-3:], b.token[-3:]
((2048, 4096, 10000), (2048, 4096, 11500))
>>> int(b.padded_context(3000)), int(b.padded_token(10001))
(4096, 11500)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from math import log2

import numpy as np

from .errors import InferenceInputError

__all__ = ["MIN_BUCKET", "STACKS", "ShapeBuckets", "autobuckets", "stack_buckets"]

#: NxD Inference's smallest generated bucket (``autobucketing``: ``min_length`` 128).
MIN_BUCKET = 128
#: The stacks a hardware file may name and what they pad.
STACKS = {"nxd": "NxD Inference's buckets", "none": "no length buckets (each sequence's own KV)"}


def autobuckets(maximum: int) -> tuple[int, ...]:
    """NxD Inference's generated buckets up to ``maximum``: ``2**i`` for ``i`` from
    ``log2(128)`` below ``round(log2(maximum))``, then ``maximum``."""
    if maximum <= MIN_BUCKET:
        return (int(maximum),)
    top = round(log2(maximum))
    return tuple(2**i for i in range(int(log2(MIN_BUCKET)), top) if 2**i < maximum) + (
        int(maximum),
    )


def _lengths(name: str, values) -> tuple[int, ...]:
    items = tuple(values)
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise InferenceInputError(name, v, "sequence lengths: integers >= 1")
    if list(items) != sorted(set(items)):
        raise InferenceInputError(name, list(items), "lengths in increasing order, each once")
    return tuple(int(v) for v in items)


@dataclass(frozen=True)
class ShapeBuckets:
    """A deployment's compiled lengths: ``context`` (prompt) and ``token`` (sequence) buckets,
    increasing; an empty tuple pads nothing in that phase.

    Raises
    ------
    InferenceInputError
        A length below 1, not an integer, or the lengths out of order (naming
        ``context_buckets`` or ``token_buckets``).
    """

    context: tuple[int, ...] = ()
    token: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "context", _lengths("context_buckets", self.context))
        object.__setattr__(self, "token", _lengths("token_buckets", self.token))

    @classmethod
    def nxd(cls, prompt: int, sequence: int) -> ShapeBuckets:
        """NxD Inference's generated buckets for prompts up to ``prompt`` tokens and sequences
        up to ``sequence`` (``--max-context-length``, ``--seq-len``)."""
        return cls(autobuckets(prompt), autobuckets(sequence))

    @classmethod
    def for_stack(cls, stack: str, prompt: int, output: int) -> ShapeBuckets:
        """The default of ``stack`` (:data:`STACKS`) for requests of ``prompt`` + ``output``
        tokens: NxD's generated buckets for those maxima, or none."""
        return cls.resolved(stack, stack, prompt, prompt + output)

    def _padded(self, name: str, buckets: tuple[int, ...], lengths):
        n = np.asarray(lengths)
        if not buckets or n.size == 0:
            return n
        if np.max(n) > buckets[-1]:
            raise InferenceInputError(
                name,
                list(buckets),
                f"buckets up to at least {int(np.max(n))} tokens (the longest "
                f"{'prompt' if name == 'context_buckets' else 'sequence'})",
            )
        return np.asarray(buckets)[np.searchsorted(buckets, n)]

    @classmethod
    def resolved(cls, context, token, prompt: int, sequence: int) -> ShapeBuckets:
        """Each phase's buckets from its spec - ``"none"``, ``"nxd"`` (NxD's generated ones up
        to the longest ``prompt``, or ``sequence``) or the lengths themselves.

        Raises
        ------
        InferenceInputError
            A spec that is none of those, naming ``context_buckets`` or ``token_buckets``.
        """

        def one(name, spec, longest):
            if isinstance(spec, str):
                if spec not in STACKS:
                    raise InferenceInputError(name, spec, f"one of {', '.join(STACKS)}, or lengths")
                return autobuckets(longest) if spec == "nxd" else ()
            return spec

        return cls(one("context_buckets", context, prompt), one("token_buckets", token, sequence))

    def padded_context(self, prompt):
        """Each prompt length (an array or a number) padded to its context-encoding bucket."""
        return self._padded("context_buckets", self.context, prompt)

    def padded_token(self, keys):
        """Each decode step's key count (an array or a number) padded to its token-generation
        bucket."""
        return self._padded("token_buckets", self.token, keys)

    def check(self, prompt: int, output: int) -> None:
        """Raise :class:`InferenceInputError` when the largest bucket of a phase is shorter than
        the requests' prompt or whole sequence."""
        self.padded_context(prompt)
        self.padded_token(prompt + output)

    def to_dict(self) -> dict:
        return {"context": list(self.context), "token": list(self.token)}


@cache
def stack_buckets(hardware_name: str) -> tuple[str, str]:
    """The stack a hardware file runs (``shape_buckets`` of its section of
    ``tlm/inference/data/fixed_costs.toml``, else ``default``'s) and that figure's source."""
    text = resources.files(__package__).joinpath("data/fixed_costs.toml").read_text()
    data = tomllib.loads(text)
    section = hardware_name if hardware_name in data else "default"
    figure = data[section]["shape_buckets"]
    if figure["value"] not in STACKS or figure["source"] not in data["sources"]:
        raise ValueError(f"fixed_costs.toml [{section}] shape_buckets: bad value or source")
    return figure["value"], figure["source"]
