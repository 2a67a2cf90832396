"""The highest Poisson rate a replica sustains within a TTFT SLO: its batch slots as the
servers of an M/M/c queue (Erlang C).

A replica running ``slots`` requests at a time, each holding its slot for ``busy_s`` (its
prefill and decode), serves Poisson arrivals at ``rate`` with offered load ``a = rate x busy_s``
erlangs. An arrival that finds every slot taken waits; Erlang's formula gives the chance it
waits, ``C(slots, a)``, and the chance it waits longer than ``t``, ``C x exp(-(slots - a) t /
busy_s)``. The highest rate within the SLO is the one at which that chance, at ``t`` the TTFT
SLO less the request's own prefill, is ``1 - attainment`` - the rule ``trnsim serve
--find-max-rate`` bisects by simulation (:func:`tlm.inference.serving.max_rate`, attainment
0.9). Little's law (``slots / busy_s``) is the bound it approaches as the wait allowed grows.

Examples
--------
>>> round(float(max_rate_within(8, 6.7, 1.8)), 3)   # 8 slots, 6.7 s each, 1.8 s of slack
0.785
>>> bool(max_rate_within(8, 6.7, 1e3) > 0.99 * 8 / 6.7)  # a long wait allowed: Little's law
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["ATTAINMENT", "max_rate_within"]

#: The share of requests that must meet the SLO, as ``trnsim serve --find-max-rate``'s default
#: rule (attainment 0.9).
ATTAINMENT = 0.9
#: Bisection steps on the offered load: the rate to ``2**-40`` of Little's law.
_STEPS = 40


def _miss(slots: np.ndarray, load: np.ndarray, busy_s: np.ndarray, wait_s: np.ndarray):
    """P(wait > wait_s) in an M/M/``slots`` queue at ``load`` erlangs, per row (Erlang B by the
    Poisson terms in log space, padded to the largest ``slots``, then Erlang C)."""
    k = np.arange(int(slots.max()) + 1)
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(k[1:]))])
    log_terms = k * np.log(load)[:, None] - log_fact
    log_terms = np.where(k <= slots[:, None], log_terms, -np.inf)
    top = log_terms.max(axis=1, keepdims=True)
    terms = np.exp(log_terms - top)
    blocking = terms[np.arange(len(slots)), slots] / terms.sum(axis=1)
    waiting = blocking / (1 - load / slots * (1 - blocking))
    return waiting * np.exp(-(slots - load) * wait_s / busy_s)


def max_rate_within(slots, busy_s, wait_s, attainment: float = ATTAINMENT):
    """Requests per second a replica of ``slots`` slots, each request holding one ``busy_s``,
    sustains with at most ``1 - attainment`` of arrivals waiting longer than ``wait_s``
    (arrays broadcast; 0 where ``wait_s`` < 0: the request's own prefill misses the SLO).

    Parameters
    ----------
    slots : int or array
        Requests in flight at once (the batch), >= 1.
    busy_s, wait_s : float or array
        Seconds a request holds its slot; seconds it may wait for one (the TTFT SLO less its
        own prefill).
    attainment : float
        Share of arrivals that must wait at most ``wait_s``, in (0, 1).
    """
    slots, busy, wait = np.broadcast_arrays(
        np.asarray(slots, dtype=np.int64), np.asarray(busy_s, float), np.asarray(wait_s, float)
    )
    shape = slots.shape
    c, s, w = slots.ravel(), busy.ravel(), np.maximum(wait.ravel(), 0.0)
    allowed = 1.0 - attainment
    lo, hi = np.zeros(c.shape), c.astype(float)
    for _ in range(_STEPS):  # every row's bisection at once
        load = 0.5 * (lo + hi)
        ok = _miss(c, load, s, w) <= allowed
        lo, hi = np.where(ok, load, lo), np.where(ok, hi, load)
    out = np.where(wait.ravel() < 0, 0.0, lo / s).reshape(shape)
    return out if out.ndim else float(out)
