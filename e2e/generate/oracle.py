"""The oracle of generated programs: explainers that keep a campaign from crying wolf.

A generated program is nobody's intent, so a disagreement with torch is not yet a bug:

- `Float64Oracle`: a float result beyond the suite's tolerance is judged by distance from
  the same program run natively in float64 (every float dtype widened, casts included). A
  compiled result within tolerance of the float64 answer, or no further from it than
  torch's own, is torch's rounding, not a compiler bug: the pair is acquitted (it passes,
  with a note). Otherwise the note records both distances and the pair stays a wrong result.
- `SpecRefusal`: a reference model that refuses an op its spec leaves undefined (the TOSA
  reference model on `pow` of a negative base) while torch's program is defined (finite
  golden outputs on inputs the generator kept in every op's domain) blames the lowering
  that emitted the op: the failure moves to stage `backend`.

Every note starts with `ORACLE_NOTE` and says which checks the verdict passed, so a
campaign counts, from the results file alone, how many verdicts each check turned away.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from e2e.framework.compare import compare_values, tolerance_for
from e2e.framework.judge import Explanation, Outcome
from e2e.framework.trace import Trace, TraceItem, clone_tree

ORACLE_NOTE = "oracle:"
# The checks a verdict passes, in the order they are made (the campaign's counters).
TOLERANCE, F64_DISTANCE, SPEC_REFUSAL = "tolerance", "float64 distance", "spec refusal"
ORACLE_CHECKS = (TOLERANCE, F64_DISTANCE, SPEC_REFUSAL)
NARROW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _widen(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in NARROW_FLOATS:
        return value.to(torch.float64)
    if isinstance(value, torch.dtype) and value in NARROW_FLOATS:
        return torch.float64
    return value


class Float64Mode(TorchDispatchMode):
    """Runs every aten op in float64: narrow float tensors and dtypes (a cast's target, a
    reduction's accumulator, a factory's) are widened before the op, its results after."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        args, kwargs = pytree.tree_map(_widen, (args, kwargs or {}))
        return pytree.tree_map(_widen, func(*args, **kwargs))


def run_float64(module: torch.nn.Module, item: TraceItem) -> Any:
    """`item`'s call on a copy of `module`, every float computed in float64."""
    native = copy.deepcopy(module)
    with torch.no_grad(), Float64Mode():
        return getattr(native, item.method)(*clone_tree(item.inputs))


def distance(reference: torch.Tensor, value: torch.Tensor) -> float:
    """The largest elementwise distance from the float64 `reference` (NaN where both are
    NaN counts 0; where one is, infinity)."""
    r, v = reference.to(torch.float64), value.to(torch.float64)
    both_nan = torch.isnan(r) & torch.isnan(v)
    diff = torch.where(r == v, 0.0, (r - v).abs())  # equal infinities differ by 0, not NaN
    diff = torch.where(both_nan, 0.0, torch.nan_to_num(diff, nan=float("inf")))
    return float(diff.max()) if diff.numel() else 0.0


@dataclass(frozen=True)
class Judgement:
    """One float output's distances from its float64 answer."""

    where: str
    torch_distance: float
    compiled_distance: float
    within_tolerance: bool  # the compiled output is within the suite's tolerance of float64's

    @property
    def acquits(self) -> bool:
        return self.within_tolerance or self.compiled_distance <= self.torch_distance

    def __str__(self) -> str:
        return f"{self.where}: compiled {self.compiled_distance:.3g} from float64, torch {self.torch_distance:.3g}" + (
            " (compiled within tolerance of float64)" if self.within_tolerance else ""
        )


def judge_outputs(golden: Any, compiled: Any, exact: Any, where: str, tolerance) -> list[Judgement] | None:
    """The judgement of every float output where `compiled` and `golden` disagree; None when
    a disagreement is not one of float values (shape, dtype, an integer output): the
    float64 run has nothing to say about it."""
    judgements = []
    leaves = zip(pytree.tree_leaves(golden), pytree.tree_leaves(compiled), pytree.tree_leaves(exact))
    for number, (g, c, e) in enumerate(leaves):
        spot = f"{where}[{number}]"
        if not isinstance(g, torch.Tensor) or compare_values(g, c, spot, tolerance) is None:
            continue
        if not g.dtype.is_floating_point or not isinstance(c, torch.Tensor) or c.shape != g.shape:
            return None
        if not isinstance(e, torch.Tensor) or e.shape != g.shape:
            return None
        tol = tolerance_for(g.dtype, tolerance)
        within = bool(torch.isclose(c.to(torch.float64), e.to(torch.float64), tol.rtol, tol.atol, equal_nan=True).all())
        judgements.append(Judgement(spot, distance(e, g), distance(e, c), within))
    return judgements


@dataclass(frozen=True)
class Float64Oracle:
    """The explainer (`e2e.framework.judge`) of a generated program's wrong float results."""

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.mismatch is None or outcome.mismatch.kind not in ("values", "nan") or outcome.trace is None:
            return None
        tolerance = prepared.test.tolerance
        found: list[Judgement] = []
        for number, (expected, actual) in enumerate(zip(prepared.golden, outcome.trace)):
            where = f"trace item #{number} ({expected.method}) @ output"
            if compare_values(expected.outputs, actual.outputs, where, tolerance) is None:
                continue
            exact = run_float64(prepared.module, expected)
            judgements = judge_outputs(expected.outputs, actual.outputs, exact, where, tolerance)
            if judgements is None:
                return Explanation(
                    [f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} not applicable (not float values)"]
                )
            found += judgements
        shown = "; ".join(map(str, found))
        if found and all(judgement.acquits for judgement in found):
            return Explanation(
                [f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} acquits: torch's rounding, not a bug ({shown})"],
                acquit=True,
            )
        return Explanation([f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} failed: a wrong result ({shown})"])


@dataclass(frozen=True)
class Refusal:
    """What a reference model says when a program leaves its spec, and who emitted the op."""

    pattern: re.Pattern[str]
    op: str  # the op in the spec's words
    lowering: str  # the pass that emitted it for a defined torch program


REFUSALS = (
    Refusal(re.compile(r"OpPow: x is less than 0"), "tosa.pow of a negative base", "convert-torch-to-tosa"),
    Refusal(
        re.compile(r"OpPow: x is 0 and y is less than or equal to 0"),
        "tosa.pow of 0 to a power <= 0",
        "convert-torch-to-tosa",
    ),
)


def defined(golden: Trace) -> bool:
    """Whether torch's answers are all finite (the generator kept every input in its ops' domains)."""
    leaves = [leaf for item in golden for leaf in pytree.tree_leaves(item.outputs)]
    return all(
        bool(torch.isfinite(leaf).all())
        for leaf in leaves
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()
    )


@dataclass(frozen=True)
class SpecRefusal:
    """The explainer of a reference model's refusal of an op its spec leaves undefined."""

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.stage != "execute" or outcome.error is None:
            return None
        text = str(outcome.error)
        refusal = next((r for r in REFUSALS if r.pattern.search(text)), None)
        if refusal is None:
            return None
        if not defined(prepared.golden):
            return Explanation(
                [f"{ORACLE_NOTE} {SPEC_REFUSAL}: torch's own answer is not finite: the runtime's to refuse"]
            )
        return Explanation(
            [f"{ORACLE_NOTE} {SPEC_REFUSAL}: torch's program is defined; the lowering emitted {refusal.op}"],
            stage="backend",
            error=(
                f"{refusal.lowering} emits {refusal.op}, which the spec leaves undefined, for a defined torch "
                f"program (the reference model refuses: {refusal.pattern.pattern})"
            ),
        )


# What a generated test carries (`Test.explainers`), asked after its config's explainers.
GENERATED_EXPLAINERS = (SpecRefusal(), Float64Oracle())
