"""The registry of formal properties: a name, what it proves, and how it is checked."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tlm.link.config import LinkConfig

from .arbiter import ArbiterFairness
from .deadlock import dependency_graph, find_cycle
from .router import FORMAL_CONFIG, RouterCredits, RouterVcOrder
from .sby import Verdict, check
from .tensor import FORMAL_FORMATS, FORMAL_FP32, FORMAL_INT8, TensorEngineContract

__all__ = ["Property", "PROPERTIES"]


@dataclass(frozen=True)
class Property:
    """One property of the registry.

    Attributes
    ----------
    name : str
    proves : str
        One sentence: what a pass means.
    harness : callable or None
        Builds the Amaranth harness (SymbiYosys properties); ``None`` for a Python check.
    mode : str
        ``prove`` (k-induction), ``bmc`` or ``python`` (an exhaustive check in Python).
    depth : int
        Induction length or bound, in clock cycles.
    cover_depth : int
        Cycles within which every cover must be reached.
    python : callable or None
        For ``python`` properties: returns ``(ok, note)``.
    default : bool
        Checked by ``make formal``; ``False`` for one too slow for its budget, checked only
        when named (``--property NAME``).
    cover_cut : tuple of str
        Yosys selections cut (made free values) while the covers are searched, each trace
        found then replayed on the whole design (:func:`verif.formal.sby.check`).
    """

    name: str
    proves: str
    harness: Callable | None = None
    mode: str = "prove"
    depth: int = 10
    cover_depth: int = 10
    python: Callable | None = None
    default: bool = True
    cover_cut: tuple[str, ...] = ()

    def run(self, workdir, depth: int | None = None) -> Verdict:
        """Check it; ``depth`` overrides the registry's depth (the cover depth too)."""
        if self.python is not None:
            start = time.monotonic()
            ok, covers = self.python()
            return Verdict(ok, ok, 0, covers, time.monotonic() - start)
        d = depth or self.depth
        return check(
            self.harness(),
            workdir,
            mode=self.mode,
            depth=d,
            cover_depth=max(d, self.cover_depth) if depth is None else d,
            cover_cut=self.cover_cut,
        )


def _acyclic(shape: str):
    """Every VC count the router takes: no cycle with the dateline (the property), and a cycle
    without it (the cover: the check can fail)."""

    def run():
        ok, found = True, 0
        for vcs in (2, 4, 8):
            cfg = LinkConfig(shape, vcs=vcs)
            ok &= find_cycle(dependency_graph(cfg)) is None
            found += find_cycle(dependency_graph(cfg, dateline=False)) is not None
        return ok, (found, 3)

    return run


def _tensor(cfg, what, **options):
    return lambda: TensorEngineContract(cfg, what, **options)


_LAT8 = FORMAL_INT8.latency
_LATF = FORMAL_FORMATS.latency
_SHAPE = f"{FORMAL_INT8.rows}x{FORMAL_INT8.cols}"

_R4 = LinkConfig((4, 4)).requesters
_R444 = LinkConfig((4, 4, 4)).requesters

#: Every property ``make formal`` checks, fastest first.
PROPERTIES = {
    p.name: p
    for p in (
        Property(
            "torus_acyclic_4x4",
            "the channel dependency graph of dimension-order routing with the dateline VCs "
            "has no cycle on the 4x4 torus, for 2, 4 and 8 VCs (no deadlock)",
            mode="python",
            depth=0,
            python=_acyclic("4x4"),
        ),
        Property(
            "torus_acyclic_4x4x4",
            "the same on the 4x4x4 torus",
            mode="python",
            depth=0,
            python=_acyclic("4x4x4"),
        ),
        Property(
            "arbiter_fairness_4x4",
            f"a request that stays up is granted within {_R4} cycles by the output arbiter of "
            f"a 4x4 router ({_R4} requesters); a cover shows {_R4 - 1} is not enough",
            harness=lambda: ArbiterFairness(_R4, _R4),
            depth=_R4 + 1,
        ),
        Property(
            "arbiter_fairness_4x4x4",
            f"the same for a 4x4x4 router ({_R444} requesters, within {_R444} cycles)",
            harness=lambda: ArbiterFairness(_R444, _R444),
            depth=_R444 + 1,
        ),
        Property(
            "router_credits",
            f"every output credit counter of a {FORMAL_CONFIG.torus.name} router (any position)"
            f" stays in 0..{FORMAL_CONFIG.depth}, its has_credit flag says whether it is 0 and"
            " it still holds the credit its registered grant spent; on a link whose both ends"
            " are the RTL, credits + flit on the wire + flits buffered = depth (a returning"
            " credit's flit is still buffered), and no misuse is counted; the ejection queue's"
            " credits + flits = its 2 slots",
            harness=RouterCredits,
            depth=2,
            cover_depth=8,
        ),
        Property(
            "router_vc_order",
            "each flit a link input VC takes in leaves its buffer exactly once, in order, "
            "unchanged (its kind only closed by a NO_CREDIT drop); nothing leaves that did not "
            "come in",
            harness=RouterVcOrder,
            depth=3,
            cover_depth=8,  # two flits through the router and back: grant, traverse, link
        ),
        Property(
            "tensor_handshake_int8",
            f"a {_SHAPE} int8 engine (2 PE stages) holds a result offered until it is taken "
            "(valid, last, data); gives results only for beats of ops not dropped, each once, in "
            f"order, each in the result queue exactly {_LAT8} ticks (its latency) after its beat",
            harness=_tensor(FORMAL_INT8, "handshake", data=True),
            depth=_LAT8 + 2,
            cover_depth=12,
        ),
        Property(
            "tensor_misuse_int8",
            "each status counter of the int8 engine counts its ErrorKind once per offending op "
            "and saturates, each flag is set exactly when its kind has occurred, nothing else "
            "moves them; only a good completed load is switched to",
            harness=_tensor(FORMAL_INT8, "misuse"),
            depth=6,
            cover_depth=12,
        ),
        Property(
            "tensor_liveness_int8",
            "on every tick the int8 engine takes a moving beat that needs no new stationary, "
            "one with load when a completed load waits, a load beat when none waits (ready "
            "again within 1 tick of any op, misused or not); a cycle after the consumer is ready "
            "it ticks",
            harness=_tensor(FORMAL_INT8, "liveness"),
            depth=6,
            cover_depth=12,
        ),
        Property(
            "tensor_misuse_formats",
            f"the same counters on a {_SHAPE} engine of int8, fp8_e4m3fn and fp8_e5m2, with "
            "the format misuses (a code naming no format, int8 against FP8)",
            harness=_tensor(FORMAL_FORMATS, "misuse"),
            depth=6,
            cover_depth=12,
        ),
        Property(
            "tensor_liveness_formats",
            f"the same liveness on that three-format engine ({FORMAL_FORMATS.pe_stages} PE "
            f"stages, {FORMAL_FORMATS.decode_stages} decoder stages)",
            harness=_tensor(FORMAL_FORMATS, "liveness"),
            depth=6,
            cover_depth=_LATF + 8,  # the queue fills: results a latency after their beats
        ),
        Property(
            "tensor_liveness_fp32",
            f"on a {_SHAPE} engine of bf16 and fp32, the same liveness within 4 ticks: a moving "
            "beat waits 3 ticks after an FP32 beat (quarter rate); a cover shows 3 is not enough",
            harness=_tensor(FORMAL_FP32, "liveness"),
            depth=8,  # k-induction, with the RTL's FP32 wait counter (`hold`) tied
            cover_depth=FORMAL_FP32.latency + 8,
        ),
        Property(
            "tensor_handshake_formats",
            f"the handshake on that three-format engine (latency {_LATF}; data not held: the "
            "floating-point datapath is in the model through the result queue anyway); its "
            "covers searched with the PEs cut, each trace replayed on the whole engine",
            harness=_tensor(FORMAL_FORMATS, "handshake"),
            depth=4,
            cover_depth=_LATF + 8,  # a result offered and taken after the pipeline's latency
            # z3 did not reach the covers through the PEs' datapath in 600 s; the handshake's
            # covers name only control (valid, last, the queue), which no PE output drives
            cover_cut=("top.dut.array.col*.pe*",),
        ),
    )
}
