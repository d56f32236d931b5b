"""Is a surviving mutant equivalent to the unmutated program, or did the inputs miss it?

A mutant that passes a test may compute the same function (`x > 0 ? x : 0` compiled as
`x >= 0 ? x : 0`) or a different one the test's inputs never showed. The check runs
both programs on inputs made of boundary values (`boundary_values`: ties, signed zeros,
halfway cases, the program's own float constants and their neighbours, and, in half of
the samples, NaN and +-inf) in the test's shapes, and compares them with each other.
A difference is a witness: the mutation changes the program's meaning and the test did
not catch it. No difference on every sample is reported as equivalent on those samples.
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from e2e.configs.fx import run_programs
from e2e.framework.compare import compare_traces
from e2e.framework.testutils import TestUtils
from e2e.framework.trace import TraceItem
from e2e.mutation.rewrites import walk

SAMPLES = 16
MAX_THRESHOLDS = 12


def program_thresholds(ir_texts: list[str]) -> list[float]:
    """The scalar float constants of the programs (their comparison thresholds, bounds)."""
    from torch_mlir import ir

    from compiler.stages import new_context, parse_module

    found: list[float] = []
    for text in ir_texts:
        module = parse_module(text, new_context())
        with module.context:
            for op in walk(module):
                if op.name == "arith.constant" and isinstance(op.attributes["value"], ir.FloatAttr):
                    value = op.attributes["value"].value
                    if abs(value) < 1e30 and value not in found:
                        found.append(value)
    return found[:MAX_THRESHOLDS]


def _boundary_inputs(inputs, tu: TestUtils, thresholds, special: bool):
    def replace(x):
        if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and x.numel():
            return tu.boundary(*x.shape, dtype=x.dtype, thresholds=thresholds, nan=special, inf=special)
        return x  # integer inputs may be indices: kept as the test made them

    return pytree.tree_map(replace, inputs)


def boundary_samples(golden, unmutated, thresholds: list[float]) -> list[tuple[list, object]]:
    """(calls, the unmutated program's trace on them) per sample; none when the test has
    no float inputs to vary."""
    if not any(
        isinstance(x, torch.Tensor) and x.dtype.is_floating_point
        for item in golden
        for x in pytree.tree_leaves(item.inputs)
    ):
        return []
    samples = []
    for sample in range(SAMPLES):
        tu = TestUtils(seed=1000 + sample)
        calls = [
            TraceItem(item.method, _boundary_inputs(item.inputs, tu, thresholds, sample % 2 == 1), None)
            for item in golden
        ]
        try:
            samples.append((calls, run_programs(unmutated, calls)))
        except Exception:  # noqa: BLE001 - the unmutated program refuses this input: no evidence
            continue
    return samples


def witness(samples: list[tuple[list, object]], mutated, tolerance) -> str | None:
    """The first sample on which the mutant differs from the unmutated program, described."""
    for number, (calls, expected) in enumerate(samples):
        try:
            actual = run_programs(mutated, calls)
        except Exception as error:  # noqa: BLE001
            return f"sample {number}: the mutant raised {type(error).__name__}"
        mismatch = compare_traces(expected, actual, tolerance)
        if mismatch is not None:
            return f"sample {number}: {mismatch}"
    return None
