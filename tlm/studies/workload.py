"""The ``--model`` input: a workload file (:mod:`tlm.workloads`), one meaning for every study
that takes a model (``model``, ``train``, ``cost``, ``infer``, ``infer-search``, ``serve``,
``compare``) - a shipped model's name or a model TOML file.

Examples
--------
>>> MODEL_ALLOWED.startswith("one of deepseek-v3, ")
True
>>> workload_input("llama3-8b").name
'llama3-8b'
"""

from __future__ import annotations

from pydantic import Field

from ..workloads import WorkloadError, load_model, model_names
from .protocol import loaded

__all__ = ["MODEL_ALLOWED", "served_model_field", "workload_input"]

#: What a ``--model`` input allows, in words.
MODEL_ALLOWED = "one of " + ", ".join(model_names()) + ", or a model file path ending in .toml"


def served_model_field(default: str = "llama3.1-405b"):
    """A ``model`` input of the inference studies: the model served, a name or a file."""
    return Field(
        default,
        description="the model served (tlm/workloads/models)",
        json_schema_extra={"allowed": MODEL_ALLOWED},
    )


def workload_input(name: str):
    """The model a ``--model`` input names (:func:`tlm.workloads.load_model`); errors name
    the input."""
    return loaded("model", name, load_model, WorkloadError, MODEL_ALLOWED)
