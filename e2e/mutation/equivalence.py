"""Is a surviving mutant equivalent to the unmutated program, or did the inputs miss it?

A mutant that passes a test may compute the same function (`x > 0 ? x : 0` compiled as
`x >= 0 ? x : 0`) or a different one the test's inputs never showed. The check runs
both programs on the test's own inputs and on inputs made of boundary values
(`boundary_values`: ties, signed zeros, halfway cases, the program's own float constants
and their neighbours, and, in half of the samples, NaN and +-inf) in the test's shapes.

Both programs are judged by what they *mean*, not by what one CPU returns: each is
compiled twice with its undefined ops guarded (`e2e.mutation.undefined`), and an input on
which the two guarded versions differ is one where an undefined value reaches an output.

- the original undefined there: the input says nothing; it is left out (and counted);
- the mutant undefined there, the original defined: a witness that the mutation changes
  the program's meaning ("poison: arith.fptoui on i32 ... reaches output ..."); on the
  test's own inputs it means the test catches the mutant (verdict `undefined`): some CPU
  returns another value there;
- both defined and different: a witness with the mismatch.

No witness on any sample is reported as equivalent on the samples where both are defined.
A test without float inputs has its integer inputs redrawn from its own values (with
repeats, so ties and the test's extremes recur, and an index stays in range).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from e2e.configs.pipeline import run_programs
from e2e.framework.compare import EXACT, compare_traces
from e2e.framework.testutils import TestUtils
from e2e.framework.trace import TraceItem
from e2e.mutation.rewrites import walk
from e2e.mutation.undefined import ONES, ZERO, Fill

SAMPLES = 16
MAX_THRESHOLDS = 12
TESTS_OWN = "the test's inputs"


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
    label: str  # TESTS_OWN, or "sample 3"
    calls: list  # TraceItems without results
    expected: object  # what the unmutated program means on them; None: it is undefined there


class Meanings:
    """A test's programs (under a mutation, or none) compiled twice, their undefined ops guarded
    with each fill: what they mean on an input, where they mean anything."""

    def __init__(self, programs, backend: str, mutation):
        from e2e.mutation.mutant import compiled

        self.programs, self.backend, self.mutation = programs, backend, mutation
        self.zero_fill = Fill(ZERO)
        self.zero = compiled(programs, backend, mutation, self.zero_fill)
        self.ones = compiled(programs, backend, mutation, Fill(ONES))

    def on(self, calls: list):
        """(trace, None) where the programs are defined on `calls`, else (None, the traces
        with each fill) for `why_undefined`."""
        zero, ones = run_programs(self.zero, calls), run_programs(self.ones, calls)
        if compare_traces(zero, ones, EXACT) is None:
            return zero, None
        return None, (zero, ones)

    def why_undefined(self, calls: list, traces) -> str:
        """Which guarded op kind's undefined value reaches an output, and where, in words."""
        from e2e.mutation.mutant import compiled

        zero, ones = traces
        where = _first_difference(calls, zero, ones)
        guarded = self.zero_fill.guarded()
        for kind in guarded.kinds():
            alone = compiled(self.programs, self.backend, self.mutation, Fill(ONES, (kind,), ZERO))
            if compare_traces(zero, run_programs(alone, calls), EXACT) is not None:
                return f"{guarded.describe(kind)}; it reaches {where}"
        return f"an undefined value reaches {where}"


def _first_difference(calls: list, zero, ones) -> str:
    """Where the two fills' outputs first differ, and the input at that element when an input
    has the output's shape (an elementwise op's operand)."""
    for number, (call, a, b) in enumerate(zip(calls, zero, ones)):
        for index, (x, y) in enumerate(zip(pytree.tree_leaves(a.outputs), pytree.tree_leaves(b.outputs))):
            if not isinstance(x, torch.Tensor) or torch.equal(x, y):
                continue
            flat = (x.flatten() != y.flatten()).nonzero()
            element = int(flat[0]) if len(flat) else 0
            where = f"output {index} of call {number} at element {element}"
            same_shape = [t for t in pytree.tree_leaves(call.inputs) if _is_tensor(t) and t.shape == x.shape]
            if same_shape:
                where += f" (input there: {same_shape[0].flatten()[element].item()!r})"
            return where
    return "an output"


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor) and x.numel() > 0


def _is_float(x) -> bool:
    return _is_tensor(x) and x.dtype.is_floating_point


def _is_int(x) -> bool:
    return _is_tensor(x) and not x.dtype.is_floating_point and not x.is_complex()


def _boundary_inputs(inputs, tu: TestUtils, thresholds, special: bool, redraw_ints: bool, generator):
    def replace(x):
        if _is_float(x):
            return tu.boundary(*x.shape, dtype=x.dtype, thresholds=thresholds, nan=special, inf=special)
        if redraw_ints and _is_int(x):  # the test's own values, redrawn with repeats
            flat = x.flatten()
            return flat[torch.randint(flat.numel(), x.shape, generator=generator)]
        return x  # integer inputs beside float ones may be indices: kept as the test made them

    return pytree.tree_map(replace, inputs)


def boundary_samples(golden, original: Meanings, thresholds: list[float]) -> list[Sample]:
    """The test's own inputs and the boundary samples, with what the unmutated program means
    on each (boundary samples only when the test has float or integer inputs to vary)."""
    own = [TraceItem(item.method, item.inputs, None) for item in golden]
    drawn = [(TESTS_OWN, own)]
    leaves = [x for item in golden for x in pytree.tree_leaves(item.inputs)]
    has_floats = any(_is_float(x) for x in leaves)
    if has_floats or any(_is_int(x) for x in leaves):
        for number in range(SAMPLES):
            tu = TestUtils(seed=1000 + number)
            generator = torch.Generator().manual_seed(1000 + number)
            special = has_floats and number % 2 == 1
            calls = [
                TraceItem(
                    item.method,
                    _boundary_inputs(item.inputs, tu, thresholds, special, not has_floats, generator),
                    None,
                )
                for item in golden
            ]
            drawn.append((f"sample {number}", calls))
    samples = []
    for label, calls in drawn:
        try:
            meaning, _ = original.on(calls)
        except Exception:  # noqa: BLE001 - the unmutated program refuses this input: no evidence
            continue
        samples.append(Sample(label, calls, meaning))
    return samples


@dataclass(frozen=True)
class Judgement:
    verdict: str  # "undefined" (caught on the test's own inputs), "witness", "equivalent" or "unjudged"
    detail: str


def judge(samples: list[Sample], mutant: Meanings, tolerance) -> Judgement:
    """The mutant against the unmutated program on every sample where the latter is defined."""
    left_out = 0
    for sample in samples:
        if sample.expected is None:
            left_out += 1
            continue
        try:
            meaning, traces = mutant.on(sample.calls)
        except Exception as error:  # noqa: BLE001 - the mutant refuses what the program takes
            return Judgement("witness", f"{sample.label}: the mutant raised {type(error).__name__}")
        if meaning is None:
            why = mutant.why_undefined(sample.calls, traces)
            if sample.label == TESTS_OWN:
                return Judgement("undefined", f"the mutant is undefined on the test's own inputs: {why}")
            return Judgement("witness", f"{sample.label}: {why}")
        mismatch = compare_traces(sample.expected, meaning, tolerance)
        if mismatch is not None:
            return Judgement("witness", f"{sample.label}: {mismatch}")
    checked = len(samples) - left_out
    if checked == 0:  # nothing to claim equivalence on
        return Judgement(
            "unjudged", f"the unmutated program is undefined on all {left_out} inputs, the test's own included"
        )
    detail = f"no difference on {checked} inputs (the test's and boundary values) where both are defined"
    if left_out:
        detail += f"; {left_out} left out: the unmutated program is undefined there"
    return Judgement("equivalent", detail)
