"""Golden traces: what a test's invoker did on native torch.

A trace is the list of calls the invoker made (method, inputs, outputs). The golden
trace runs on a deep copy of the module with cloned inputs, so neither a module that
updates its buffers nor an op that writes into its inputs can change what the
configs later compile and run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from e2e.framework.registry import Test
from e2e.framework.testutils import seed_for


@dataclass
class TraceItem:
    method: str
    inputs: list[Any]
    outputs: Any


Trace = list[TraceItem]


def call_key(inputs: list[Any]) -> tuple:
    """What a static capture specializes on: tensor dtypes and shapes, other values."""
    return tuple(
        (x.dtype, tuple(x.shape)) if isinstance(x, torch.Tensor) else (type(x), repr(x))
        for x in pytree.tree_leaves(list(inputs))
    )


def clone_tree(value: Any) -> Any:
    return pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, value)


class _Recorder:
    """Stands for the module in an invoker: `module.forward(...)` calls and records."""

    def __init__(self, call: Callable[[str, list[Any]], Any]):
        self._call = call
        self.trace: Trace = []

    def __getattr__(self, method: str):
        if method.startswith("_"):
            raise AttributeError(method)

        def record(*inputs: Any) -> Any:
            inputs = list(inputs)
            outputs = self._call(method, clone_tree(inputs))
            self.trace.append(TraceItem(method, clone_tree(inputs), outputs))
            return outputs

        return record


def record_trace(test: Test, call: Callable[[str, list[Any]], Any]) -> Trace:
    """Run the test's invoker with seeded inputs, answering each call with `call`."""
    recorder = _Recorder(call)
    with torch.no_grad():
        test.program_invoker(recorder, test.test_utils(seed_for(test.name)))
    return recorder.trace


def golden_trace(test: Test, module: torch.nn.Module) -> Trace:
    """The trace of the test on native torch (on a deep copy of `module`)."""
    native = copy.deepcopy(module)
    return record_trace(test, lambda method, inputs: getattr(native, method)(*inputs))
