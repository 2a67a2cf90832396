"""Test helper: keyword arguments with their layout fields gathered into one Layout."""

from tlm.cluster.layout import LAYOUT_FIELDS, Layout

#: ZeRO-0, no sequence parallelism, no recomputation: the recipe of the memory tests.
MEMORY_RECIPE = {"zero": 0, "sp": False, "recompute": "none"}


def laid(defaults: dict | None = None, **kwargs) -> dict:
    """``kwargs`` with the fields of :class:`Layout` among them (over ``defaults``) as
    ``layout=Layout(...)``."""
    fields = dict(defaults or {})
    fields.update({k: kwargs.pop(k) for k in list(kwargs) if k in LAYOUT_FIELDS})
    return {**kwargs, "layout": Layout(**fields)}
