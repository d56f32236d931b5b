"""Is a surviving mutant equivalent to the unmutated program, or did the inputs miss it?

A mutant that passes a test may compute the same function (`x > 0 ? x : 0` compiled as
`x >= 0 ? x : 0`) or a different one the test's inputs never showed. The check runs
both programs on inputs made of boundary values (`boundary_values`: ties, signed zeros,
halfway cases, the program's own float constants and their neighbours, and, in half of
the samples, NaN and +-inf) in the test's shapes, and compares them with each other.
A difference is a witness: the mutation changes the program's meaning and the test did
not catch it. No difference on every sample is reported as equivalent on those samples.

A test without float inputs has its integer inputs redrawn from its own values (with
repeats, so ties and the test's extremes recur, and an index stays in range). A mutation
of an op that is undefined on NaN and inf (a float-to-int cast: torch and LLVM leave its
result on them undefined) is judged on the finite samples only (`Mutation.domain`).
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Sample:
    calls: list  # TraceItems without results
    expected: object  # the unmutated program's trace on them
    finite: bool  # no NaN or inf drawn


def _is_float(x) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype.is_floating_point and x.numel() > 0


def _is_int(x) -> bool:
    return isinstance(x, torch.Tensor) and not x.dtype.is_floating_point and not x.is_complex() and x.numel() > 0


def _boundary_inputs(inputs, tu: TestUtils, thresholds, special: bool, redraw_ints: bool, generator):
    def replace(x):
        if _is_float(x):
            return tu.boundary(*x.shape, dtype=x.dtype, thresholds=thresholds, nan=special, inf=special)
        if redraw_ints and _is_int(x):  # the test's own values, redrawn with repeats
            flat = x.flatten()
            return flat[torch.randint(flat.numel(), x.shape, generator=generator)]
        return x  # integer inputs beside float ones may be indices: kept as the test made them

    return pytree.tree_map(replace, inputs)


def boundary_samples(golden, unmutated, thresholds: list[float]) -> list[Sample]:
    """The samples and the unmutated program's trace on each; none when the test has
    neither float nor integer inputs to vary."""
    leaves = [x for item in golden for x in pytree.tree_leaves(item.inputs)]
    has_floats = any(_is_float(x) for x in leaves)
    if not has_floats and not any(_is_int(x) for x in leaves):
        return []
    samples = []
    for sample in range(SAMPLES):
        tu = TestUtils(seed=1000 + sample)
        generator = torch.Generator().manual_seed(1000 + sample)
        special = has_floats and sample % 2 == 1
        calls = [
            TraceItem(
                item.method, _boundary_inputs(item.inputs, tu, thresholds, special, not has_floats, generator), None
            )
            for item in golden
        ]
        try:
            samples.append(Sample(calls, run_programs(unmutated, calls), finite=not special))
        except Exception:  # noqa: BLE001 - the unmutated program refuses this input: no evidence
            continue
    return samples


def judged(samples: list[Sample], domain: str) -> list[Sample]:
    """The samples a mutation of `domain` ("any" or "finite") is judged on."""
    return [s for s in samples if s.finite] if domain == "finite" else samples


def witness(samples: list[Sample], mutated, tolerance) -> str | None:
    """The first sample on which the mutant differs from the unmutated program, described."""
    for number, sample in enumerate(samples):
        calls, expected = sample.calls, sample.expected
        try:
            actual = run_programs(mutated, calls)
        except Exception as error:  # noqa: BLE001
            return f"sample {number}: the mutant raised {type(error).__name__}"
        mismatch = compare_traces(expected, actual, tolerance)
        if mismatch is not None:
            return f"sample {number}: {mismatch}"
    return None
