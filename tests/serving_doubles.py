"""The serving tests' doubles: an engine with a linear iteration time that records its calls,
trace files, a workload, and the check every value's bad-argument cases share."""

import json

import pytest

from tlm.inference import InferenceInputError
from tlm.inference.serving import Trace, Workload


class Linear:
    """The test double of an engine: ``a + b tokens + c kv_tokens + d pairs`` seconds, and the
    calls it received (for checking the scheduler's arguments)."""

    def __init__(self, a=0.010, b=0.001, c=0.0, d=0.0, capacity=1 << 20, block=16, chips=1):
        self.a, self.b, self.c, self.d = a, b, c, d
        self.chips = chips
        self.kv_capacity_tokens = capacity
        self.block_tokens = block
        self.calls = []

    def iteration_s(self, tokens, sequences, kv_tokens, pairs):
        self.calls.append((tokens, sequences, kv_tokens, pairs))
        return self.a + self.b * tokens + self.c * kv_tokens + self.d * pairs


def write_trace(tmp_path, rows, name="trace.csv"):
    path = tmp_path / name
    if name.endswith(".csv"):
        lines = ["arrival_s,prompt,output"] + [f"{t},{p},{o}" for t, p, o in rows]
    else:
        lines = [json.dumps({"arrival_s": t, "prompt": p, "output": o}) for t, p, o in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def trace(tmp_path, rows, name="trace.csv"):
    """A :class:`Trace` load of ``rows`` (arrival_s, prompt, output)."""
    return Trace(write_trace(tmp_path, rows, name))


def workload(prompt=512, output=128, seed=0):
    return Workload(prompt, output, seed)


def check_bad_argument(make, args, field, message):
    """``make(**args)`` raises an InferenceInputError naming ``field`` whose message holds
    ``message`` (the field, the value and what is allowed)."""
    with pytest.raises(InferenceInputError) as info:
        make(**args)
    assert message in str(info.value)
    assert info.value.field == field
