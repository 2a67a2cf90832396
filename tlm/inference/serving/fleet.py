"""The fleet: replicas of a model behind a router, colocated or in disaggregated prefill and
decode pools joined by a KV transfer.

Frozen values, checked when made: :class:`Colocated` (``replicas`` replicas of ``engine``, each
prefilling and decoding) and :class:`Disaggregated` (DistServe; Splitwise: a prefill pool whose
finished prompts move their KV to a decode pool in ``kv_transfer_s(prompt)`` seconds - a
:class:`KvLink` or any callable - the first token travelling with the KV). An engine is a duck
type (:class:`tlm.inference.Engine` or a stand-in): ``chips``, ``kv_capacity_tokens``,
``block_tokens``, ``iteration_s(tokens, sequences, kv_tokens, pairs)`` and optionally
``request_fixed_s``. Each pool's router is named in :data:`ROUTER_POLICIES`; at run time
:class:`Pools` holds the replicas, routes, rejects requests whose KV can never fit (by reason)
and moves the KV. The rules in full: docs/serving.md.

Examples
--------
>>> class Stub:
...     chips, kv_capacity_tokens, block_tokens = 16, 4_000_000, 16
...     def iteration_s(self, tokens, sequences, kv_tokens, pairs):
...         return 0.01
>>> Colocated(Stub(), replicas=4).chips
64
>>> link = KvLink(bytes_per_token=320e3, bandwidth_Bps=32e9, latency_s=0.002)
>>> round(link(1000), 6)                       # seconds for a prompt of 1,000 tokens
0.012
>>> Disaggregated(Stub(), prefill_replicas=2, decode_replicas=4, kv_transfer_s=link).chips
96
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from ..errors import InferenceInputError
from .checks import Registry, check_int, check_positive
from .replica import Replica

__all__ = [
    "ROUTERS",
    "ROUTER_POLICIES",
    "Colocated",
    "Disaggregated",
    "Fleet",
    "KvLink",
    "LeastLoaded",
    "Pools",
    "RoundRobin",
    "Router",
    "check_engine",
]

#: The routers by name.
ROUTER_POLICIES = Registry("router")


class Router(abc.ABC):
    """Which replica of a pool takes a request (one router per pool and simulation)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def pick(self, pool: list[Replica]) -> Replica: ...


@ROUTER_POLICIES.register("least_loaded")
class LeastLoaded(Router):
    """The replica with the fewest requests queued or running; ties to the lowest index."""

    def pick(self, pool):
        return min(pool, key=Replica.load)  # min keeps the first of ties


@ROUTER_POLICIES.register("round_robin")
class RoundRobin(Router):
    """The replicas in turn."""

    def __init__(self):
        self.next = 0

    def pick(self, pool):
        i = self.next
        self.next = (i + 1) % len(pool)
        return pool[i]


#: The routers' names.
ROUTERS = ROUTER_POLICIES.names


def check_engine(name: str, engine) -> None:
    """Raise unless ``engine`` has the members of a replica (see the module), valid."""
    for attr in ("chips", "kv_capacity_tokens", "block_tokens", "iteration_s"):
        if not hasattr(engine, attr):
            raise InferenceInputError(
                name,
                engine,
                "a model replica",
                f"{name} must have chips, kv_capacity_tokens, block_tokens and iteration_s; "
                f"{engine!r} has no {attr!r}",
            )
    if not callable(engine.iteration_s):
        raise InferenceInputError(f"{name}.iteration_s", engine.iteration_s, "callable")
    check_int(f"{name}.chips", engine.chips, 1)
    check_positive(f"{name}.request_fixed_s", getattr(engine, "request_fixed_s", 0.0), True)
    block = check_int(f"{name}.block_tokens", engine.block_tokens, 1)
    capacity = check_int(f"{name}.kv_capacity_tokens", engine.kv_capacity_tokens, 1)
    if capacity < block:
        raise InferenceInputError(
            f"{name}.kv_capacity_tokens",
            capacity,
            f"at least one block of {name}.block_tokens={block} tokens",
            f"{name}.kv_capacity_tokens must hold at least one block of "
            f"{name}.block_tokens={block} tokens, not {capacity}",
        )


@dataclass(frozen=True)
class KvLink:
    """A KV transfer over a link: ``latency_s + tokens * bytes_per_token / bandwidth_Bps``
    seconds for the KV of ``tokens`` tokens (call it with the tokens).

    Parameters
    ----------
    bytes_per_token : float
        KV bytes of one token (all layers), > 0.
    bandwidth_Bps : float
        Bytes per second, > 0.
    latency_s : float
        Seconds per transfer, >= 0.
    """

    bytes_per_token: float
    bandwidth_Bps: float
    latency_s: float = 0.0

    def __post_init__(self):
        per_token = check_positive("bytes_per_token", self.bytes_per_token)
        bandwidth = check_positive("bandwidth_Bps", self.bandwidth_Bps)
        latency = check_positive("latency_s", self.latency_s, allow_zero=True)
        object.__setattr__(self, "bytes_per_token", per_token)
        object.__setattr__(self, "bandwidth_Bps", bandwidth)
        object.__setattr__(self, "latency_s", latency)

    def __call__(self, tokens: int) -> float:
        return self.latency_s + tokens * self.bytes_per_token / self.bandwidth_Bps


class Fleet(abc.ABC):
    """Replicas of a model behind a router: :meth:`pools` gives their engines."""

    engine: object
    router: str

    @abc.abstractmethod
    def pools(self) -> tuple[list, list]:
        """The engines of the front pool (colocated replicas, or the prefill pool), then those
        of the decode pool (empty when colocated), one per replica."""

    @property
    def chips(self) -> int:
        """Chips of every replica of every pool."""
        front, back = self.pools()
        return int(sum(e.chips for e in front + back))

    @property
    def request_fixed_s(self) -> float:
        """The serving stack's time before a request reaches a scheduler: the front engine's."""
        return float(getattr(self.engine, "request_fixed_s", 0.0))

    def _check(self) -> None:
        ROUTER_POLICIES.named(self.router)
        check_engine("engine", self.engine)


@dataclass(frozen=True)
class Colocated(Fleet):
    """``replicas`` replicas of ``engine``, each prefilling and decoding.

    Parameters
    ----------
    engine
        One model replica (see the module).
    replicas : int
        >= 1.
    router : str
        One of :data:`ROUTERS`.
    """

    engine: object
    replicas: int = 1
    router: str = "least_loaded"

    def __post_init__(self):
        self._check()
        object.__setattr__(self, "replicas", check_int("replicas", self.replicas, 1))

    def pools(self):
        return [self.engine] * self.replicas, []


@dataclass(frozen=True)
class Disaggregated(Fleet):
    """Prefill and decode on separate pools, the KV moved between them.

    Parameters
    ----------
    engine
        The prefill pool's replica (see the module).
    prefill_replicas, decode_replicas : int
        Replicas of each pool, >= 1.
    kv_transfer_s : callable
        Seconds to move the KV of a prompt of so many tokens (a :class:`KvLink`, or any
        callable ``tokens -> seconds >= 0``).
    decode_engine
        The decode pool's replica (default ``engine``).
    router : str
        One of :data:`ROUTERS`, for each pool.
    """

    engine: object
    prefill_replicas: int
    decode_replicas: int
    kv_transfer_s: Callable[[int], float]
    decode_engine: object = None
    router: str = "least_loaded"

    def __post_init__(self):
        self._check()
        prefill = check_int("prefill_replicas", self.prefill_replicas, 1)
        decode = check_int("decode_replicas", self.decode_replicas, 1)
        if self.decode_engine is None:
            object.__setattr__(self, "decode_engine", self.engine)
        check_engine("decode_engine", self.decode_engine)
        if not callable(self.kv_transfer_s):
            raise InferenceInputError(
                "kv_transfer_s", self.kv_transfer_s, "a callable (prompt tokens -> seconds)"
            )
        object.__setattr__(self, "prefill_replicas", prefill)
        object.__setattr__(self, "decode_replicas", decode)

    def pools(self):
        return [self.engine] * self.prefill_replicas, [self.decode_engine] * self.decode_replicas


class Pools:
    """A fleet at run time: its replicas (the front pool's, then the decode pool's, numbered
    in that order), a router per pool, rejection at arrival and the KV hand-off.

    Parameters
    ----------
    fleet : Fleet
    env : simpy.Environment
    policy, admission
        The replicas' prefill policy and admission rule
        (:mod:`~tlm.inference.serving.scheduling`).
    ledger
        The simulation (see :class:`~tlm.inference.serving.replica.Replica`).
    timeline : list, optional
        Where the replicas append a row per iteration.
    """

    def __init__(self, fleet: Fleet, env, policy, admission, ledger, timeline=None):
        front, back = fleet.pools()
        self.env = env
        self.ledger = ledger
        self.admission = admission
        self.transfer = getattr(fleet, "kv_transfer_s", None)
        hand_off = self.hand_off if back else None
        self.replicas = [
            Replica(env, i, e, policy, admission, ledger, timeline, hand_off)
            for i, e in enumerate(front)
        ]
        self.replicas += [
            Replica(env, len(front) + i, e, policy, admission, ledger, timeline)
            for i, e in enumerate(back)
        ]
        self.front = self.replicas[: len(front)]
        self.back = self.replicas[len(front) :]
        router = ROUTER_POLICIES.named(fleet.router)
        self.front_router, self.back_router = router(), router()

    def rejection(self, prompt: int, output: int) -> str | None:
        """Why a request of these lengths can never be served (its KV needs more blocks than
        a replica has, :meth:`Admission.kv_tokens`), or None."""
        whole = self.admission.kv_tokens(prompt, output)
        if not self.back:
            r = self.front[0]
            return "kv_capacity" if -(-whole // r.B) > r.total else None
        f, b = self.front[0], self.back[0]
        if -(-prompt // f.B) > f.total:
            return "prefill_kv_capacity"
        if -(-whole // b.B) > b.total:
            return "decode_kv_capacity"
        return None

    def route(self, seq) -> Replica:
        """A replica of the front pool queues ``seq``; returns it."""
        replica = self.front_router.pick(self.front)
        replica.enqueue(seq)
        return replica

    def hand_off(self, replica: Replica, seq) -> None:
        """``seq`` ended its prefill on ``replica`` (prefill pool): move its KV, then decode."""
        tokens = seq.prompt
        delay = self.transfer(tokens)
        if not (isinstance(delay, numbers.Real) and 0 <= delay < math.inf):
            raise ValueError(f"kv_transfer_s({tokens}) must return seconds >= 0, not {delay!r}")

        def arrived(_event):
            replica.kv_mark()
            replica.used -= seq.blocks
            self.admission.release(replica, seq)
            replica.wake()
            self.ledger.first_token(seq)
            if seq.generated == seq.output:
                self.ledger.finish(seq)
                return
            seq.blocks = 0  # its KV waits outside the decode replica's paged cache
            self.back_router.pick(self.back).enqueue(seq)

        self.env.timeout(delay).callbacks.append(arrived)
