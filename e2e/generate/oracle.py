"""The oracle of generated programs: explainers that keep a campaign from crying wolf.

A generated program is nobody's intent, so a disagreement with torch is not yet a bug:

- `Float64Oracle`: a float result beyond the suite's tolerance is judged by distance from
  the same program run natively in float64 (every float dtype widened, casts included). A
  compiled result within tolerance of the float64 answer, or no further from it than
  torch's own, is torch's rounding, not a compiler bug: the pair is acquitted (it passes,
  with a note). Otherwise the note records both distances and the pair stays a wrong result.
- Narrow accumulation: a float16 or bfloat16 result further from float64 than torch's may
  come from a reduction accumulated in that dtype, which torch's CPU kernels do not do (they
  accumulate in float32) and a compiler or a runtime may (the StableHLO spec allows it
  where an op gives no accumulation type). The program is run natively again with every
  sum-like reduction of half-precision values (sum, mean, cumsum, mm, bmm, addmm,
  convolution; softmax, log_softmax and logsumexp decomposed around such a sum, as a
  compiler does) accumulated one term at a time in its own dtype
  (`NarrowAccumulationMode`); a compiled result no further from float64 than that is
  acquitted too.
- Rounding band: a compiler may round a half-precision program's values elsewhere than
  torch does (keep a fused intermediate in float32, sum in another order), and a result
  that is sensitive to its intermediates (a sine near a multiple of pi, a power) moves by
  more than the tolerance for one step of float16 or bfloat16 upstream. The program is run
  in float64 `BAND_RUNS` more times with every value an op computes in half precision
  (torch's dtype for it) perturbed by a random relative error of at most that dtype's unit
  roundoff (`PerturbedFloat64Mode`, seeded): a compiled result no further from float64 than
  `BAND_FACTOR` times the furthest of those runs is within rounding, and acquitted.
- `SpecRefusal`: a reference model that refuses an op its spec leaves undefined (the TOSA
  reference model on `pow` of a negative base) while torch's program is defined (finite
  golden outputs on inputs the generator kept in every op's domain) blames the lowering
  that emitted the op: the failure moves to stage `backend`.

Every note starts with `ORACLE_NOTE` and says, for people, which checks the verdict
passed; the check that ruled is the Explanation's `check` (the Result's `check` and
`check_turned_away`), from which a campaign counts how many verdicts each check turned away.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from e2e.framework.compare import compare_traces, compare_values, tolerance_for
from e2e.framework.judge import Explanation, Outcome
from e2e.framework.trace import Trace, TraceItem, clone_tree
from e2e.generate.ties import Settlement, TieJudge

ORACLE_NOTE = "oracle:"
# The checks a verdict passes, in the order they are made (the campaign's counters).
TOLERANCE, F64_DISTANCE, SPEC_REFUSAL = "tolerance", "float64 distance", "spec refusal"
NARROW_ACCUMULATION, ROUNDING_BAND = "narrow accumulation", "rounding band"
TIE_CONTRACT = "tie contract"
ORACLE_CHECKS = (TOLERANCE, TIE_CONTRACT, F64_DISTANCE, NARROW_ACCUMULATION, ROUNDING_BAND, SPEC_REFUSAL)
NARROW_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
HALF_FLOATS = (torch.float16, torch.bfloat16)


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


# The rounding band: runs with every half-precision value perturbed, and how far beyond the
# furthest of them a compiled result may be (two roundings where a run draws one).
BAND_RUNS, BAND_FACTOR = 16, 2.0
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
_NOMINAL = "_e2e_nominal_dtype"  # the dtype torch computes a float64 value in


_aten = torch.ops.aten
# Ops that move or select values without computing new ones: exact in any dtype, so not
# perturbed (`_to_copy` and `copy` are, when they change the dtype: a cast rounds).
EXACT_OPS = frozenset(
    {
        *(_aten.clone, _aten.copy, _aten._to_copy, _aten.cat, _aten.stack, _aten.index_select, _aten.gather),
        *(_aten.index, _aten.constant_pad_nd, _aten.flip, _aten.roll, _aten.repeat, _aten.where, _aten.masked_fill),
        *(_aten.amax, _aten.amin, _aten.max, _aten.min, _aten.maximum, _aten.minimum, _aten.relu, _aten.abs),
        *(_aten.neg, _aten.clamp, _aten.tril, _aten.triu, _aten.slice_scatter, _aten.select_scatter),
    }
)


def _computes(func, args, nominal: torch.dtype) -> bool:
    """Whether `func` computes values (a view or an op of `EXACT_OPS` only moves them; a
    cast to another dtype rounds them)."""
    if func.is_view:
        return False
    if func.overloadpacket in (_aten._to_copy, _aten.copy):  # copy(self, src) takes src's values
        source = args[1] if func.overloadpacket is _aten.copy else args[0]
        return _nominal(source) != nominal
    return func.overloadpacket not in EXACT_OPS


def _nominal(value: Any) -> Any:
    return getattr(value, _NOMINAL, value.dtype) if isinstance(value, torch.Tensor) else value


def _on_meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=_nominal(value), device="meta")
    return value


class PerturbedFloat64Mode(TorchDispatchMode):
    """`Float64Mode`, with every value an op computes in float16 or bfloat16 (the dtype the
    op's meta kernel gives for its operands' nominal dtypes) perturbed by a random relative
    error of at most that dtype's unit roundoff: one rounding of any size and either sign,
    where torch rounds and a compiler may round otherwise. Views and the ops that only move
    or select values (`EXACT_OPS`) are not perturbed; a value remembers its nominal dtype
    for the ops it feeds."""

    def __init__(self, generator: torch.Generator):
        super().__init__()
        self.generator = generator

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            meta_args, meta_kwargs = pytree.tree_map(_on_meta, (args, kwargs))
            nominal = pytree.tree_leaves(func(*meta_args, **meta_kwargs))
        except Exception:  # noqa: BLE001 - no meta kernel: the op's values are not perturbed
            nominal = None
        wide_args, wide_kwargs = pytree.tree_map(_widen, (args, kwargs))
        out = pytree.tree_map(_widen, func(*wide_args, **wide_kwargs))
        leaves, spec = pytree.tree_flatten(out)
        if nominal is None or len(nominal) != len(leaves):
            return out
        for index, (leaf, meta) in enumerate(zip(leaves, nominal)):
            if not isinstance(leaf, torch.Tensor) or not isinstance(meta, torch.Tensor):
                continue
            unit = UNIT_ROUNDOFF.get(meta.dtype)
            if unit is not None and leaf.dtype == torch.float64 and _computes(func, args, meta.dtype):
                noise = torch.rand(leaf.shape, dtype=torch.float64, generator=self.generator) * 2 - 1
                leaf = leaves[index] = leaf * (1 + unit * noise)
            setattr(leaf, _NOMINAL, meta.dtype)
        return pytree.tree_unflatten(leaves, spec)


def _widen_input(value: Any) -> Any:
    """An input in float64 that remembers its dtype (an input is given, never perturbed)."""
    wide = _widen(value)
    if wide is not value:
        setattr(wide, _NOMINAL, value.dtype)
    return wide


def run_perturbed(module: torch.nn.Module, item: TraceItem, seed: int) -> Any:
    """`item`'s call on a copy of `module` in float64, its half-precision values perturbed
    (`PerturbedFloat64Mode`). The inputs are widened first: a composite op checks its operands'
    dtypes before the mode sees them (`conv1d` of a float64 value with a bfloat16 bias)."""
    native, inputs = copy.deepcopy(module), pytree.tree_map(_widen_input, clone_tree(item.inputs))
    with torch.no_grad(), PerturbedFloat64Mode(torch.Generator().manual_seed(seed)):
        return getattr(native, item.method)(*inputs)


def _reduced_dims(x: torch.Tensor, dim) -> list[int]:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return list(range(x.dim()))
    return sorted({d % max(x.dim(), 1) for d in ([dim] if isinstance(dim, int) else dim)})


def _narrow_sum(x: torch.Tensor, dim=None, keepdim: bool = False) -> torch.Tensor:
    """`x` summed over `dim` one term at a time in its own dtype (each partial sum rounded)."""
    dims = _reduced_dims(x, dim)
    if x.dim() == 0:
        return x.clone()
    kept = [d for d in range(x.dim()) if d not in dims]
    terms = x.permute(*kept, *dims).reshape(*[x.shape[d] for d in kept], -1)
    total = torch.zeros(terms.shape[:-1], dtype=x.dtype)
    for index in range(terms.shape[-1]):
        total = total + terms[..., index]
    if keepdim:
        total = total.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
    return total


def _narrow_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(batched) a @ b with each product and partial sum rounded to the operands' dtype."""
    total = torch.zeros((*a.shape[:-1], b.shape[-1]), dtype=a.dtype)
    for k in range(a.shape[-1]):
        total = total + a[..., k : k + 1] * b[..., k : k + 1, :]
    return total


def _narrow_convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """A convolution as the sum of its terms (one input channel and kernel position each,
    computed exactly and rounded), accumulated in the input's dtype."""
    if transposed:
        return None
    total = None
    for position in itertools.product(*(range(size) for size in w.shape[1:])):
        selected = torch.zeros_like(w, dtype=torch.float64)
        selected[(slice(None), *position)] = w[(slice(None), *position)].to(torch.float64)
        term = torch.ops.aten.convolution.default(
            x.to(torch.float64), selected, None, stride, padding, dilation, False, output_padding, groups
        ).to(x.dtype)
        total = term if total is None else total + term
    return total if bias is None else total + bias.reshape(1, -1, *([1] * (total.dim() - 2)))


def _half(*tensors) -> bool:
    return all(isinstance(t, torch.Tensor) and t.dtype in HALF_FLOATS for t in tensors)


def _narrow(func, args, kwargs):
    """The narrow-accumulation answer of a reduction of half-precision values, or None (the op as it is)."""
    aten = torch.ops.aten
    x = args[0] if args else None
    if kwargs.get("dtype") not in (None, getattr(x, "dtype", None)) or not _half(x):
        return None
    if func in (aten.sum.default, aten.sum.dim_IntList):
        return _narrow_sum(x, args[1] if len(args) > 1 else kwargs.get("dim"), *args[2:3], **_keep(kwargs))
    if func in (aten.mean.default, aten.mean.dim):
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        count = 1
        for d in _reduced_dims(x, dim):
            count *= x.shape[d] if x.dim() else 1
        return _narrow_sum(x, dim, *args[2:3], **_keep(kwargs)) / count
    if func is aten.cumsum.default:
        dim = args[1] % max(x.dim(), 1)
        total, partial = torch.zeros_like(x.select(dim, 0)) if x.dim() else x.clone(), []
        for index in range(x.shape[dim] if x.dim() else 0):
            total = total + x.select(dim, index)
            partial.append(total)
        return torch.stack(partial, dim) if partial else x.clone()
    if func in (aten.mm.default, aten.bmm.default) and _half(args[1]):
        return _narrow_mm(x, args[1])
    if func is aten.addmm.default and _half(*args[1:3]):
        beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
        return beta * x + alpha * _narrow_mm(args[1], args[2])
    if func is aten.convolution.default and _half(args[1]) and (args[2] is None or _half(args[2])):
        return _narrow_convolution(*args)
    if func in (aten._softmax.default, aten._log_softmax.default) and not args[2]:  # not half_to_float
        dim = args[1]
        shifted = x - x.amax(dim, keepdim=True)
        exps = shifted.exp()
        total = _narrow_sum(exps, dim, keepdim=True)
        return exps / total if func is aten._softmax.default else shifted - total.log()
    if func is aten.logsumexp.default:
        dim, keepdim = args[1], (args[2] if len(args) > 2 else kwargs.get("keepdim", False))
        top = x.amax(dim, keepdim=True)
        total = (top + _narrow_sum((x - top).exp(), dim, keepdim=True).log()).to(x.dtype)
        return total if keepdim else total.squeeze(_reduced_dims(x, dim))
    return None


def _keep(kwargs) -> dict:
    return {"keepdim": kwargs["keepdim"]} if "keepdim" in kwargs else {}


class NarrowAccumulationMode(TorchDispatchMode):
    """Runs every op as torch does, except the sum-like reductions of float16 and bfloat16
    values, which accumulate one term at a time in their own dtype (`_narrow`). A reduction
    the emulation cannot take (an empty dim, an argument it does not know) runs as torch
    runs it: the narrow answer is then torch's own, which acquits nothing more."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            narrow = _narrow(func, args, kwargs)
        except (RuntimeError, IndexError, ValueError, TypeError):
            narrow = None
        return narrow if narrow is not None else func(*args, **kwargs)


def run_narrow_accumulation(module: torch.nn.Module, item: TraceItem) -> Any:
    """`item`'s call on a copy of `module`, half-precision reductions accumulated in half precision."""
    native = copy.deepcopy(module)
    with torch.no_grad(), NarrowAccumulationMode():
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
    narrow_distance: float | None = None  # the narrow-accumulation answer's, when one was computed
    band: float | None = None  # the furthest a perturbed float64 run got, when they ran

    @property
    def acquits(self) -> bool:
        return self.within_tolerance or self.compiled_distance <= self.torch_distance

    @property
    def narrow_acquits(self) -> bool:
        return self.acquits or (self.narrow_distance is not None and self.compiled_distance <= self.narrow_distance)

    @property
    def band_acquits(self) -> bool:
        return self.narrow_acquits or (self.band is not None and self.compiled_distance <= BAND_FACTOR * self.band)

    def __str__(self) -> str:
        narrow = "" if self.narrow_distance is None else f", accumulated in half precision {self.narrow_distance:.3g}"
        band = "" if self.band is None else f", rounding band {self.band:.3g} (x{BAND_FACTOR:g})"
        return (
            f"{self.where}: compiled {self.compiled_distance:.3g} from float64, torch {self.torch_distance:.3g}"
            f"{narrow}{band}" + (" (compiled within tolerance of float64)" if self.within_tolerance else "")
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
    """The explainer (`e2e.framework.judge`) of a generated program's wrong results: first
    its index outputs by their tie contracts (`ties`, `e2e.generate.ties`), then its float
    results by their distance from float64."""

    ties: TieJudge | None = None

    def settle(self, golden: Trace, trace: Trace) -> Settlement:
        """`trace` with every index answer a tie contract allows taken as torch's (`ties.Settles`)."""
        return self.ties.settle(golden, trace) if self.ties is not None else Settlement(trace)

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.mismatch is None or outcome.mismatch.kind not in ("values", "nan") or outcome.trace is None:
            return None
        tolerance = prepared.test.tolerance
        settlement = self.settle(prepared.golden, outcome.trace)
        if settlement.forbidden:
            return Explanation(
                [
                    f"{ORACLE_NOTE} {TOLERANCE} failed; {TIE_CONTRACT} failed: an index the contract does not "
                    f"allow, a wrong result ({'; '.join(settlement.forbidden)})"
                ],
                check=TIE_CONTRACT,
            )
        if settlement.allowed:
            shown = "; ".join(settlement.allowed)
            if compare_traces(prepared.golden, settlement.trace, tolerance) is None:
                return Explanation(
                    [
                        f"{ORACLE_NOTE} {TOLERANCE} failed; {TIE_CONTRACT} acquits: another index of equal values ({shown})"
                    ],
                    acquit=True,
                    check=TIE_CONTRACT,
                )
            explanation = self._judge_floats(prepared, settlement.trace, tolerance)
            explanation.notes = [
                note.replace(f"{TOLERANCE} failed;", f"{TOLERANCE} failed; {TIE_CONTRACT} allows {shown};", 1)
                for note in explanation.notes
            ]
            return explanation
        return self._judge_floats(prepared, outcome.trace, tolerance)

    def _judge_floats(self, prepared, trace: Trace, tolerance) -> Explanation:
        found: list[Judgement] = []
        exacts: dict[int, Any] = {}  # trace item -> its float64 outputs
        for number, (expected, actual) in enumerate(zip(prepared.golden, trace)):
            where = _output_spot(number, expected)
            if compare_values(expected.outputs, actual.outputs, where, tolerance) is None:
                continue
            exact = exacts[number] = run_float64(prepared.module, expected)
            judgements = judge_outputs(expected.outputs, actual.outputs, exact, where, tolerance)
            if judgements is None:
                return Explanation(
                    [f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} not applicable (not float values)"],
                    check=F64_DISTANCE,
                )
            found += judgements
        shown = "; ".join(map(str, found))
        if found and all(judgement.acquits for judgement in found):
            return Explanation(
                [f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} acquits: torch's rounding, not a bug ({shown})"],
                acquit=True,
                check=F64_DISTANCE,
            )
        found = self._narrow_judgements(prepared, exacts, found)
        shown = "; ".join(map(str, found))
        if found and all(judgement.narrow_acquits for judgement in found):
            return Explanation(
                [
                    f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} failed; {NARROW_ACCUMULATION} acquits: "
                    f"no further from float64 than accumulating the half-precision reductions in half precision, "
                    f"which a compiler may do ({shown})"
                ],
                acquit=True,
                check=NARROW_ACCUMULATION,
            )
        found = self._band_judgements(prepared, exacts, found)
        shown = "; ".join(map(str, found))
        checks = f"{ORACLE_NOTE} {TOLERANCE} failed; {F64_DISTANCE} failed; {NARROW_ACCUMULATION} failed"
        if found and all(judgement.band_acquits for judgement in found):
            return Explanation(
                [
                    f"{checks}; {ROUNDING_BAND} acquits: within rounding of its half-precision values, "
                    f"which a compiler may round elsewhere than torch ({shown})"
                ],
                acquit=True,
                check=ROUNDING_BAND,
            )
        return Explanation([f"{checks}; {ROUNDING_BAND} failed: a wrong result ({shown})"], check=ROUNDING_BAND)

    @staticmethod
    def _band_judgements(prepared, exacts: dict[int, Any], found: list[Judgement]) -> list[Judgement]:
        """`found` with each output's rounding band: the furthest from float64 (`exacts`, by
        trace item) that `BAND_RUNS` runs with perturbed half-precision values got."""
        band: dict[str, float] = {}
        for seed in range(BAND_RUNS):
            for where, far in _distances(prepared, exacts, functools.partial(run_perturbed, seed=seed)).items():
                band[where] = max(band.get(where, 0.0), far)
        return [dataclasses.replace(j, band=band.get(j.where)) for j in found]

    @staticmethod
    def _narrow_judgements(prepared, exacts: dict[int, Any], found: list[Judgement]) -> list[Judgement]:
        """`found` with each output's distance from float64 (`exacts`, by trace item) of the
        narrow-accumulation run."""
        narrow = _distances(prepared, exacts, run_narrow_accumulation)
        return [dataclasses.replace(j, narrow_distance=narrow.get(j.where)) for j in found]


def _output_spot(number: int, item: TraceItem) -> str:
    """Where a trace item's outputs are, in the judge's words (`Judgement.where` adds the leaf)."""
    return f"trace item #{number} ({item.method}) @ output"


def _distances(prepared, exacts: dict[int, Any], run) -> dict[str, float]:
    """Each output's distance from its float64 answer (`exacts`, by trace item) of
    `run(module, item)`, another native run of the trace item, by `Judgement.where`."""
    far: dict[str, float] = {}
    for number, exact in exacts.items():
        expected = prepared.golden[number]
        spot = _output_spot(number, expected)
        leaves = zip(pytree.tree_leaves(exact), pytree.tree_leaves(run(prepared.module, expected)))
        for index, (e, value) in enumerate(leaves):
            if isinstance(e, torch.Tensor) and isinstance(value, torch.Tensor) and e.shape == value.shape:
                far[f"{spot}[{index}]"] = distance(e, value)
    return far


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
                [f"{ORACLE_NOTE} {SPEC_REFUSAL}: torch's own answer is not finite: the runtime's to refuse"],
                check=SPEC_REFUSAL,
            )
        return Explanation(
            [f"{ORACLE_NOTE} {SPEC_REFUSAL}: torch's program is defined; the lowering emitted {refusal.op}"],
            stage="backend",
            check=SPEC_REFUSAL,
            error=(
                f"{refusal.lowering} emits {refusal.op}, which the spec leaves undefined, for a defined torch "
                f"program (the reference model refuses: {refusal.pattern.pattern})"
            ),
        )
