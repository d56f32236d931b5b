"""The op catalogue: each aten op the generator uses, as data (as PyTorch's OpInfo).

An `OpSpec` says which dtypes and ranks its first operand takes (`dtypes`, `ranks`), how
its attributes and further operands are drawn (`draw`, which returns None when the op
does not apply to that operand), how its output type follows (`infer`), the domain its
first operand must lie in (`domain`, a function of the attributes: `log` wants x > 0),
what else a result must satisfy to mean the same on every backend (`check`: away from a
discontinuity, a cast in range), and the torch call itself as a `template`: a Python
expression over `{0}`, `{1}`... (the operands) and `{attribute}`s. The template is both
what runs natively and what `Program.to_python()` prints, so the two cannot disagree.

Further operands come from `Draw.operand(shape, dtype, domain)`: the grower hands it an
existing value of that type inside that domain, or a new program input drawn inside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from random import Random
from typing import Any, Callable

import torch

from e2e.generate.boundary import ACCUMULATES, MOVES, ROUNDS_ONCE
from e2e.generate.types import ALL, FLOATS, FREE, INTS, NAN, NUMERIC, Domain, TensorType, is_float, is_int

Attrs = dict[str, Any]

# What an op does with a NaN operand, where its contract says (`OpSpec.nan`), so a boundary
# program may hand it one (`Domain.nan`) and the compiled program must do the same.
COMPARES = "compares"  # IEEE 754: every ordered comparison with a NaN is false; `ne` is true
PROPAGATES = "propagates"  # "If one of the elements being compared is a NaN, then that element is returned."
NAN_CONTRACTS = (COMPARES, PROPAGATES)


class Draw:
    """What an op's `draw` sees: the random stream, its first operand's type, and a way to
    ask for more operands. This base makes every further operand a new input (the grower's
    subclass may reuse a value)."""

    def __init__(self, rng: Random, x: TensorType):
        self.rng = rng
        self.x = x
        self.operands: list[tuple[TensorType, Domain]] = []

    def operand(self, shape: tuple[int, ...], dtype: str, domain: Domain = FREE) -> TensorType:
        kind = TensorType(tuple(shape), dtype)
        self.operands.append((kind, domain))
        return kind


@dataclass(frozen=True)
class OpSpec:
    name: str
    template: str
    dtypes: tuple[str, ...]
    infer: Callable[[list[TensorType], Attrs], TensorType]
    ranks: tuple[int, int] = (0, 4)
    draw: Callable[[Draw], Attrs | None] = lambda d: {}
    domain: Callable[[Attrs, str], Domain] = lambda attrs, dtype: FREE
    # (operands, attributes, result) -> the name of the validity check the result fails, or None.
    check: Callable[[list[torch.Tensor], Attrs, torch.Tensor], str | None] | None = None
    # Integer results equal the same template over float64 operands unless something overflowed.
    exact_in_f64: bool = False
    # How a float result stays exact when its operands are (`e2e.generate.boundary`: MOVES,
    # ROUNDS_ONCE, ACCUMULATES; None: never), so that a tie on it is a tie on every compiler.
    exact: str | None = None
    # What the op's contract says it does with a NaN operand (`NAN_CONTRACTS`), or None: no op
    # without one reads a value that holds NaN, and no input drawn for it holds one.
    nan: str | None = None
    # Why a program never hands this op a NaN although its contract says what it does with one:
    # a known bug on some config that every such program would fail on, catching nothing else.
    nan_withheld: str = ""
    # Values of its first operand where the op's rule alone decides the result (`round`'s
    # halves with an even integer part: to even, not away from zero; `sign`'s zeros: neither
    # `>` nor `<`). A boundary palette of an input the op reads holds one (`boundary.draw`):
    # a palette of 2-4 of the halves misses them.
    points: tuple[float, ...] = ()
    family: str = ""
    tags: tuple[str, ...] = field(default=())

    @property
    def takes_nan(self) -> bool:
        """Whether a program may hand this op a NaN: its contract says what it does, and no known
        bug withholds it."""
        return self.nan is not None and not self.nan_withheld

    def render(self, operands: list[str], attrs: Attrs) -> str:
        """The torch expression of this op on the named operands."""
        return self.template.format(*operands, **{k: _literal(v) for k, v in attrs.items()})


def _literal(value: Any) -> str:
    # Strings are code (a dtype's name, an index expression); everything else its repr.
    return value if isinstance(value, str) else repr(value)


# --- shape and dtype rules -------------------------------------------------------------------


def same(types: list[TensorType], attrs: Attrs) -> TensorType:
    return types[0]


def as_dtype(dtype: str) -> Callable[[list[TensorType], Attrs], TensorType]:
    return lambda types, attrs: TensorType(types[0].shape, dtype)


def float_of(types: list[TensorType], attrs: Attrs) -> TensorType:
    """Integer operands promote to the default float (true division, mean of ints...)."""
    dtype = types[0].dtype
    return TensorType(types[0].shape, dtype if is_float(dtype) else "float32")


def broadcast(types: list[TensorType], attrs: Attrs, dtype: str | None = None) -> TensorType:
    shape = tuple(torch.broadcast_shapes(*(t.shape for t in types)))
    return TensorType(shape, dtype or types[-1].dtype)


def broadcast_as(dtype: str) -> Callable[[list[TensorType], Attrs], TensorType]:
    return lambda types, attrs: broadcast(types, attrs, dtype)


def broadcast_float(types: list[TensorType], attrs: Attrs) -> TensorType:
    out = broadcast(types, attrs)
    return TensorType(out.shape, out.dtype if is_float(out.dtype) else "float32")


def reduced(types: list[TensorType], attrs: Attrs, dtype: str | None = None) -> TensorType:
    x = types[0]
    dims = attrs["dim"] if isinstance(attrs["dim"], tuple) else (attrs["dim"],)
    dims = {d % x.rank for d in dims}
    if attrs.get("keepdim"):
        shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
    else:
        shape = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    return TensorType(shape, dtype or x.dtype)


def widened(dtype: str) -> str:
    """sum/prod/cumsum of integers and bools accumulate in int64."""
    return "int64" if dtype in INTS + ("bool",) else dtype


# --- validity checks on concrete values --------------------------------------------------------

TIE = {"float32": 1e-3, "float16": 2e-2, "bfloat16": 5e-2}  # relative distance a float must keep from a discontinuity


def _tol(value: torch.Tensor) -> float:
    return TIE.get(str(value.dtype).removeprefix("torch."), 0.0)


def _near_integer(value: torch.Tensor, offset: float = 0.0) -> bool:
    """Some element is within the dtype's tie distance of an integer (+ offset): floor,
    trunc, casts to int and round (offset 0.5) would round it differently after a rounding error."""
    if not value.is_floating_point() or value.numel() == 0:
        return False
    v = value.double() - offset
    return bool(((v - v.round()).abs() < _tol(value) * (1 + v.abs())).any())


def _near_zero(value: torch.Tensor) -> bool:
    if not value.is_floating_point() or value.numel() == 0:
        return False
    return bool((value.double().abs() < _tol(value)).any())


def stable_rounding(offset: float = 0.0):
    def check(operands, attrs, out):
        return "stable" if _near_integer(operands[0], offset) else None

    return check


def stable_sign(operands, attrs, out):
    return "stable" if any(_near_zero(o) for o in operands) else None


def stable_comparison(operands, attrs, out):
    a, b = operands[0], operands[1]
    if not (a.is_floating_point() or b.is_floating_point()):
        return None
    a, b = torch.broadcast_tensors(a.double(), b.double())
    tol = max(_tol(operands[0]), _tol(operands[1]))
    return "stable" if bool(((a - b).abs() < tol * (1 + a.abs())).any()) else None


def stable_quotient(operands, attrs, out):
    """remainder, fmod, floor_divide of floats jump where x / y is an integer."""
    a, b = operands[0], operands[1]
    if not a.is_floating_point():
        return None
    return "stable" if _near_integer(a.double() / b.double()) or _near_integer(a / b) else None


def stable_extremum(operands, attrs, out):
    """argmax/argmin of floats: the best and second best along the dim differ clearly."""
    x = operands[0]
    if not x.is_floating_point() or x.shape[attrs["dim"]] < 2:
        return None
    top = x.double().sort(dim=attrs["dim"], descending=True).values
    gap = (top.narrow(attrs["dim"], 0, 1) - top.narrow(attrs["dim"], 1, 1)).abs()
    low = (top.narrow(attrs["dim"], -1, 1) - top.narrow(attrs["dim"], -2, 1)).abs()
    return "stable" if bool((torch.minimum(gap, low) < _tol(x) * (1 + top.abs().amax())).any()) else None


def stable_order(operands, attrs, out):
    """sort, topk, max/min/median/kthvalue along a dim of floats: no two values of a row
    within a rounding error of each other (which would order them either way)."""
    x, dim = operands[0], attrs["dim"]
    if not x.is_floating_point() or x.dim() == 0 or x.shape[dim] < 2:
        return None
    s = x.double().sort(dim=dim).values
    n = x.shape[dim]
    gaps = s.narrow(dim, 1, n - 1) - s.narrow(dim, 0, n - 1)
    return "stable" if bool((gaps < _tol(x) * (1 + s.abs().amax())).any()) else None


def defined_division(operands, attrs, out):
    """remainder and fmod of integers: INT_MIN by -1 is undefined in LLVM's srem (x86's idiv traps)."""
    a, b = operands[0], operands[1]
    if a.is_floating_point() or a.dtype == torch.bool:
        return None
    info = torch.iinfo(a.dtype)
    a, b = torch.broadcast_tensors(a, b)
    return "no_overflow" if bool(((a == info.min) & (b == -1)).any()) else None


def both(*checks):
    def check(operands, attrs, out):
        return next((f for f in (c(operands, attrs, out) for c in checks) if f is not None), None)

    return check


def cast_check(operands, attrs, out):
    """A float to int cast: in range of the target (else undefined: fptosi poison) and
    away from the truncation's jumps; a narrowing int cast: in range (no wrap-around);
    a float to bool cast: away from zero."""
    x, target = operands[0], attrs["dtype"]
    if target == "bool":
        return "stable" if _near_zero(x) else None
    if target not in INTS or x.dtype == torch.bool or x.numel() == 0:
        return None
    info = torch.iinfo(getattr(torch, target))
    truncated = x.double().trunc()
    if bool((truncated < info.min).any() or (truncated > info.max).any()):
        return "cast_in_range"
    return "stable" if _near_integer(x) else None


def truthiness(operands, attrs, out):
    """Logical ops, any/all of floats: a float's truth is whether it is 0."""
    return "stable" if any(_near_zero(o) for o in operands) else None


# --- attribute draws ---------------------------------------------------------------------------


def small(rng: Random, low: int = 1, high: int = 6) -> int:
    return rng.randint(low, high)


def some_dim(d: Draw) -> int:
    return d.rng.randrange(d.x.rank)


def broadcast_partner(rng: Random, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts with `shape`: dims kept, made 1, or grown where `shape` has 1;
    sometimes without leading dims."""
    out = []
    for size in shape:
        roll = rng.random()
        if size == 1 and roll < 0.3:
            out.append(rng.randint(2, 4))
        elif roll < 0.2:
            out.append(1)
        else:
            out.append(size)
    if out and rng.random() < 0.2:
        out = out[rng.randint(1, len(out)) :]
    return tuple(out)


def binary_draw(domain: Domain = FREE):
    def draw(d: Draw) -> Attrs:
        d.operand(broadcast_partner(d.rng, d.x.shape), d.x.dtype, domain)
        return {}

    return draw


def divisor(dtype: str) -> Domain:
    return Domain(min_abs=1.0) if dtype in INTS else Domain(min_abs=0.25)


def divisor_draw(d: Draw) -> Attrs:
    d.operand(broadcast_partner(d.rng, d.x.shape), d.x.dtype, divisor(d.x.dtype))
    return {}


def reduce_draw(multi: bool = True, keepdim: bool = True):
    def draw(d: Draw) -> Attrs | None:
        if d.x.rank == 0:
            return None
        if multi and d.rng.random() < 0.4 and d.x.rank > 1:
            dims = tuple(sorted(d.rng.sample(range(d.x.rank), d.rng.randint(1, d.x.rank))))
            if d.rng.random() < 0.3:
                dims = tuple(dim - d.x.rank for dim in dims)  # negative dims
            dim: Any = dims
        else:
            dim = some_dim(d)
        return {"dim": dim, "keepdim": d.rng.random() < 0.5} if keepdim else {"dim": dim}

    return draw


def variance_draw(d: Draw) -> Attrs | None:
    attrs = reduce_draw()(d)
    if attrs is None:
        return None
    dims = attrs["dim"] if isinstance(attrs["dim"], tuple) else (attrs["dim"],)
    count = math.prod(d.x.shape[dim] for dim in dims)
    return {**attrs, "correction": d.rng.choice((0, 1)) if count > 1 else 0}


def dim_draw(d: Draw) -> Attrs | None:
    return None if d.x.rank == 0 else {"dim": some_dim(d)}


def clamp_draw(d: Draw) -> Attrs:
    if is_int(d.x.dtype):
        low = d.rng.randint(-5, 2)
        return {"min": low, "max": low + d.rng.randint(1, 8)}
    # Halves: a boundary program's inputs hit its bounds exactly (`boundary.HALVES`).
    low = d.rng.choice((-1.5, -1.0, -0.5, 0.0, 0.5))
    return {"min": low, "max": low + d.rng.choice((0.5, 1.0, 1.5, 2.0))}


def scalar_draw(choices_float: tuple[float, ...], choices_int: tuple[int, ...]):
    def draw(d: Draw) -> Attrs:
        return {"c": d.rng.choice(choices_int if is_int(d.x.dtype) else choices_float)}

    return draw


# --- catalogue families --------------------------------------------------------------------------

CATALOGUE: dict[str, OpSpec] = {}


def _add(spec: OpSpec) -> None:
    assert spec.name not in CATALOGUE, spec.name
    CATALOGUE[spec.name] = spec


def domain_rule(domain: Domain | Callable[[Attrs, str], Domain]) -> Callable[[Attrs, str], Domain]:
    return domain if callable(domain) else lambda attrs, dtype: domain


def _unary(name: str, template: str, dtypes=FLOATS, domain: Domain | Callable = FREE, **kwargs) -> None:
    kwargs.setdefault("infer", same)
    _add(OpSpec(name, template, dtypes, domain=domain_rule(domain), family="unary", **kwargs))


for _name, _fn, _domain in [
    ("sin", "torch.sin", FREE),
    ("cos", "torch.cos", FREE),
    ("tan", "torch.tan", Domain(-1.2, 1.2)),
    ("tanh", "torch.tanh", FREE),
    ("exp", "torch.exp", Domain(high=8.0)),
    ("exp2", "torch.exp2", Domain(high=10.0)),
    ("expm1", "torch.expm1", Domain(high=8.0)),
    ("log", "torch.log", Domain(low=0.05)),
    ("log2", "torch.log2", Domain(low=0.05)),
    ("log10", "torch.log10", Domain(low=0.05)),
    ("log1p", "torch.log1p", Domain(low=-0.9)),
    ("sqrt", "torch.sqrt", Domain(low=0.0)),
    ("rsqrt", "torch.rsqrt", Domain(low=0.05)),
    ("reciprocal", "torch.reciprocal", Domain(min_abs=0.05)),
    ("sigmoid", "torch.sigmoid", FREE),
    ("gelu", "F.gelu", FREE),
    ("silu", "F.silu", FREE),
    ("mish", "F.mish", FREE),
    ("elu", "F.elu", FREE),
    ("selu", "F.selu", FREE),
    ("softplus", "F.softplus", FREE),
    ("logsigmoid", "F.logsigmoid", FREE),
    ("hardsigmoid", "F.hardsigmoid", FREE),
    ("hardswish", "F.hardswish", FREE),
    ("erf", "torch.erf", FREE),
    ("asin", "torch.asin", Domain(-0.95, 0.95)),
    ("acos", "torch.acos", Domain(-0.95, 0.95)),
    ("atan", "torch.atan", FREE),
    ("asinh", "torch.asinh", FREE),
    ("acosh", "torch.acosh", Domain(low=1.05)),
    ("atanh", "torch.atanh", Domain(-0.9, 0.9)),
    ("sinh", "torch.sinh", Domain(-8.0, 8.0)),
    ("cosh", "torch.cosh", Domain(-8.0, 8.0)),
]:
    _unary(_name, _fn + "({0})", domain=_domain)

_unary("leaky_relu", "F.leaky_relu({0}, {slope})", draw=lambda d: {"slope": d.rng.choice((0.01, 0.1, 0.2))})
_unary("hardtanh", "F.hardtanh({0}, {min}, {max})", draw=clamp_draw, exact=MOVES)
for _name, _offset in [("floor", 0.0), ("ceil", 0.0), ("trunc", 0.0), ("frac", 0.0), ("round", 0.5)]:
    _unary(
        _name,
        f"torch.{_name}({{0}})",
        check=stable_rounding(_offset),
        exact=ROUNDS_ONCE if _name == "frac" else MOVES,
        points=(0.5, -0.5, 2.5, -2.5) if _name == "round" else (),
    )
_unary("sign", "torch.sign({0})", NUMERIC, check=stable_sign, exact=MOVES, points=(0.0, -0.0))
_unary("abs", "torch.abs({0})", NUMERIC, exact_in_f64=True, exact=MOVES)
_unary("neg", "torch.neg({0})", NUMERIC, exact_in_f64=True, exact=MOVES)
_unary("square", "torch.square({0})", NUMERIC, exact_in_f64=True, exact=ROUNDS_ONCE)
_unary("relu", "torch.relu({0})", NUMERIC, exact=MOVES)
_unary("clamp", "torch.clamp({0}, min={min}, max={max})", NUMERIC, draw=clamp_draw, exact=MOVES)
_unary("bitwise_not", "torch.bitwise_not({0})", INTS + ("bool",))
_unary("logical_not", "torch.logical_not({0})", ALL, infer=as_dtype("bool"), check=truthiness)
_unary(
    "add_scalar",
    "torch.add({0}, {c})",
    NUMERIC,
    draw=scalar_draw((0.5, -1.0, 2.0), (1, -3, 7)),
    exact_in_f64=True,
    exact=ROUNDS_ONCE,
)
_unary(
    "mul_scalar",
    "torch.mul({0}, {c})",
    NUMERIC,
    draw=scalar_draw((0.5, -2.0, 3.0), (2, -1, 3)),
    exact_in_f64=True,
    exact=ROUNDS_ONCE,
)
_unary(  # a non-integer or negative exponent wants a positive base
    "pow_scalar",
    "torch.pow({0}, {c})",
    NUMERIC,
    draw=scalar_draw((2.0, 3.0, 0.5, -1.0, 1.5), (2, 3)),
    domain=lambda attrs, dtype: FREE if attrs["c"] in (2, 3) else Domain(0.1, 4.0),
    exact_in_f64=True,
)


def _binary(name: str, template: str, dtypes=NUMERIC, infer=broadcast, draw=None, domain=FREE, **kwargs) -> None:
    draw = draw or binary_draw()
    _add(OpSpec(name, template, dtypes, infer, draw=draw, domain=domain_rule(domain), family="binary", **kwargs))


_binary("add", "torch.add({0}, {1})", exact_in_f64=True, exact=ROUNDS_ONCE)
_binary("sub", "torch.sub({0}, {1})", exact_in_f64=True, exact=ROUNDS_ONCE)
_binary("mul", "torch.mul({0}, {1})", exact_in_f64=True, exact=ROUNDS_ONCE)
# maximum/minimum propagate a NaN by their docstrings, but torch-mlir lowers them to `cmpf ogt`/`olt`
# + `select`, which loses it, on linalg, torchscript and eager: a program that hands them one fails
# there on that known bug and catches nothing else. amax/amin, their reductions, take NaN instead
# (on linalg they reach `arith.maximumf`/`minimumf`, which the NaN mutations change).
for _name, _test in (("maximum", "NanInfPair_Maximum"), ("minimum", "NanInfPair_Minimum")):
    _binary(
        _name,
        f"torch.{_name}({{0}}, {{1}})",
        exact=MOVES,
        nan=PROPAGATES,
        nan_withheld=f"known bug: NaN lost by torch-mlir's aten.{_name} lowering (xfail {_test} on linalg)",
    )
_binary("div", "torch.div({0}, {1})", infer=broadcast_float, draw=divisor_draw)
for _name in ("remainder", "fmod"):
    _binary(
        _name,
        f"torch.{_name}({{0}}, {{1}})",
        draw=divisor_draw,
        check=both(defined_division, stable_quotient),
        exact_in_f64=True,
    )
_binary(  # INT_MIN // -1 overflows: checked against float64
    "floor_divide", "torch.floor_divide({0}, {1})", draw=divisor_draw, check=stable_quotient, exact_in_f64=True
)
_binary("atan2", "torch.atan2({0}, {1})", FLOATS, check=stable_sign)
_binary("pow", "torch.pow({0}, {1})", FLOATS, draw=binary_draw(Domain(-2.0, 2.0)), domain=Domain(0.1, 4.0))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    _binary(_name, f"torch.{_name}({{0}}, {{1}})", INTS + ("bool",))
for _name in ("logical_and", "logical_or", "logical_xor"):
    _binary(_name, f"torch.{_name}({{0}}, {{1}})", ALL, infer=broadcast_as("bool"), check=truthiness)
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _binary(
        _name,
        f"torch.{_name}({{0}}, {{1}})",
        NUMERIC,
        infer=broadcast_as("bool"),
        draw=binary_draw(NAN),
        domain=NAN,
        check=stable_comparison,
        nan=COMPARES,
    )


def shift_draw(d: Draw) -> Attrs:
    d.operand(broadcast_partner(d.rng, d.x.shape), d.x.dtype, shift_amount(d.x.dtype))
    return {}


def shift_amount(dtype: str) -> Domain:
    """torch: "if the value of the right operand is negative or is greater or equal to the
    number of bits in the promoted left operand, the behavior is undefined" (LLVM's shift: poison)."""
    return Domain(0, torch.iinfo(getattr(torch, dtype)).bits - 1)


def defined_shift(operands, attrs, out):
    amount, bits = operands[1], torch.iinfo(operands[0].dtype).bits
    return "no_shift" if bool(((amount < 0) | (amount >= bits)).any()) else None


_binary("bitwise_right_shift", "torch.bitwise_right_shift({0}, {1})", INTS, draw=shift_draw, check=defined_shift)


def where_draw(d: Draw) -> Attrs:
    dtype = d.rng.choice(("float32", "float32", "float16", "int64", "int32"))
    d.operand(broadcast_partner(d.rng, d.x.shape), dtype)
    d.operand(broadcast_partner(d.rng, d.x.shape), dtype)
    return {}


_add(OpSpec("where", "torch.where({0}, {1}, {2})", ("bool",), broadcast, draw=where_draw, exact=MOVES, family="select"))


def cast_draw(d: Draw) -> Attrs:
    return {"dtype": d.rng.choice([t for t in ALL if t != d.x.dtype])}


_add(
    OpSpec(
        "to",
        "{0}.to(torch.{dtype})",
        ALL,
        lambda types, attrs: TensorType(types[0].shape, attrs["dtype"]),
        draw=cast_draw,
        check=cast_check,
        exact=ROUNDS_ONCE,
        family="cast",
    )
)

# --- reductions ----------------------------------------------------------------------------------


def _reduction(name: str, template: str, dtypes, infer=reduced, draw=None, domain=FREE, **kwargs) -> None:
    draw = draw or reduce_draw()
    _add(OpSpec(name, template, dtypes, infer, (1, 4), draw, domain_rule(domain), family="reduction", **kwargs))


def _widening(types: list[TensorType], attrs: Attrs) -> TensorType:
    return reduced(types, attrs, widened(types[0].dtype))


_reduction("sum", "torch.sum({0}, dim={dim}, keepdim={keepdim})", ALL, _widening, exact_in_f64=True, exact=ACCUMULATES)
_reduction("mean", "torch.mean({0}, dim={dim}, keepdim={keepdim})", FLOATS)
# amax/amin: "the maximum value of each slice", maximum's reduction (its NaN rule: PROPAGATES).
_reduction("amax", "torch.amax({0}, dim={dim}, keepdim={keepdim})", NUMERIC, domain=NAN, exact=MOVES, nan=PROPAGATES)
_reduction("amin", "torch.amin({0}, dim={dim}, keepdim={keepdim})", NUMERIC, domain=NAN, exact=MOVES, nan=PROPAGATES)
_reduction(
    "prod",
    "torch.prod({0}, dim={dim}, keepdim={keepdim})",
    NUMERIC,
    _widening,
    reduce_draw(multi=False),
    Domain(-2.0, 2.0),
    exact_in_f64=True,
)
for _name in ("argmax", "argmin"):
    _reduction(
        _name,
        f"torch.{_name}({{0}}, dim={{dim}}, keepdim={{keepdim}})",
        NUMERIC,
        lambda t, a: reduced(t, a, "int64"),
        reduce_draw(multi=False),
        check=stable_extremum,
    )
for _name in ("any", "all"):
    _reduction(
        _name,
        f"torch.{_name}({{0}}, dim={{dim}}, keepdim={{keepdim}})",
        ALL,
        lambda t, a: reduced(t, a, "bool"),
        check=truthiness,
    )
for _name in ("var", "std"):
    _reduction(
        _name,
        f"torch.{_name}({{0}}, dim={{dim}}, keepdim={{keepdim}}, correction={{correction}})",
        FLOATS,
        draw=variance_draw,
    )
_reduction("logsumexp", "torch.logsumexp({0}, dim={dim}, keepdim={keepdim})", FLOATS)


def cumulative(types: list[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(types[0].shape, widened(types[0].dtype))


_reduction(
    "cumsum", "torch.cumsum({0}, dim={dim})", NUMERIC, cumulative, dim_draw, exact_in_f64=True, exact=ACCUMULATES
)
_reduction(
    "cumprod", "torch.cumprod({0}, dim={dim})", NUMERIC, cumulative, dim_draw, Domain(-2.0, 2.0), exact_in_f64=True
)

# Indices along a dim: which of equal values each op returns is its tie contract
# (`e2e.generate.ties`): the first (max, min, a stable sort), or any (sort, topk, median,
# kthvalue). An op whose contract leaves it open is read by no later op.


def order_draw(d: Draw) -> Attrs | None:
    return None if d.x.rank == 0 else {"dim": some_dim(d), "descending": d.rng.random() < 0.5}


def k_draw(keepdim: bool):
    def draw(d: Draw) -> Attrs | None:
        if d.x.rank == 0:
            return None
        dim = some_dim(d)
        attrs = {"dim": dim, "k": d.rng.randint(1, d.x.shape[dim])}
        return {**attrs, "keepdim": d.rng.random() < 0.5} if keepdim else {**attrs, "largest": d.rng.random() < 0.5}

    return draw


def topk_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["dim"]] = attrs["k"]
    return TensorType(tuple(shape), "int64")


INDEXED = ("float32", "int64", "int32")
for _name, _fn in (("max_dim_indices", "max"), ("min_dim_indices", "min"), ("median_indices", "median")):
    _reduction(
        _name,
        f"torch.{_fn}({{0}}, dim={{dim}}, keepdim={{keepdim}}).indices",
        INDEXED,
        lambda t, a: reduced(t, a, "int64"),
        reduce_draw(multi=False),
        check=stable_order,
    )
_reduction(
    "kthvalue_indices",
    "torch.kthvalue({0}, {k}, dim={dim}, keepdim={keepdim}).indices",
    INDEXED,
    lambda t, a: reduced(t, a, "int64"),
    k_draw(keepdim=True),
    check=stable_order,
)
_reduction(
    "sort_values", "torch.sort({0}, dim={dim}, descending={descending}).values", INDEXED, same, order_draw, exact=MOVES
)
_reduction(
    "sort_indices",
    "torch.sort({0}, dim={dim}, descending={descending}).indices",
    INDEXED,
    as_dtype("int64"),
    order_draw,
    check=stable_order,
)
_reduction(
    "sort_stable_indices",
    "torch.sort({0}, dim={dim}, descending={descending}, stable=True).indices",
    INDEXED,
    as_dtype("int64"),
    order_draw,
    check=stable_order,
)
_reduction(
    "topk_indices",
    "torch.topk({0}, {k}, dim={dim}, largest={largest}).indices",
    INDEXED,
    topk_infer,
    k_draw(keepdim=False),
    check=stable_order,
)

# --- softmax, norms ---------------------------------------------------------------------------

_add(OpSpec("softmax", "torch.softmax({0}, dim={dim})", FLOATS, same, (1, 4), dim_draw, family="norm"))
_add(OpSpec("log_softmax", "torch.log_softmax({0}, dim={dim})", FLOATS, same, (1, 4), dim_draw, family="norm"))


def layer_norm_draw(d: Draw) -> Attrs:
    normalized = d.x.shape[-d.rng.randint(1, min(2, d.x.rank)) :]
    d.operand(normalized, d.x.dtype)
    d.operand(normalized, d.x.dtype)
    return {"shape": tuple(normalized), "eps": 1e-5}


def group_norm_draw(d: Draw) -> Attrs | None:
    channels = d.x.shape[1]
    groups = d.rng.choice([g for g in range(1, channels + 1) if channels % g == 0])
    if math.prod(d.x.shape[2:]) * channels // groups < 2:
        return None  # one element a group: variance 0, the normalized value 0/0
    d.operand((channels,), d.x.dtype)
    d.operand((channels,), d.x.dtype)
    return {"groups": groups, "eps": 1e-5}


_add(
    OpSpec(
        "layer_norm",
        "F.layer_norm({0}, {shape}, {1}, {2}, eps={eps})",
        FLOATS,
        same,
        (1, 4),
        layer_norm_draw,
        family="norm",
    )
)
_add(
    OpSpec(
        "group_norm",
        "F.group_norm({0}, {groups}, {1}, {2}, eps={eps})",
        FLOATS,
        same,
        (3, 4),
        group_norm_draw,
        family="norm",
    )
)
_add(OpSpec("normalize", "F.normalize({0}, dim={dim})", FLOATS, same, (1, 4), dim_draw, family="norm"))

# --- matmul, linear, convolution, pooling -------------------------------------------------------


def matmul_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    a, b = types[0].shape, types[1].shape
    if len(a) == 1 and len(b) == 1:
        shape: tuple[int, ...] = ()
    elif len(b) == 1:
        shape = a[:-1]
    elif len(a) == 1:
        shape = b[:-2] + b[-1:]
    else:
        batch = tuple(torch.broadcast_shapes(a[:-2], b[:-2]))
        shape = batch + (a[-2], b[-1])
    return TensorType(shape, types[0].dtype)


def matmul_draw(d: Draw) -> Attrs:
    k = d.x.shape[-1]
    roll = d.rng.random()
    if roll < 0.15:
        d.operand((k,), d.x.dtype)
    elif d.x.rank >= 3 and roll < 0.6:
        d.operand(d.x.shape[:-2] + (k, small(d.rng)), d.x.dtype)
    else:
        d.operand((k, small(d.rng)), d.x.dtype)
    return {}


def mm_draw(d: Draw) -> Attrs:
    d.operand(d.x.shape[:-2] + (d.x.shape[-1], small(d.rng)), d.x.dtype)
    return {}


def linear_draw(d: Draw) -> Attrs:
    out = small(d.rng)
    d.operand((out, d.x.shape[-1]), d.x.dtype)
    d.operand((out,), d.x.dtype)
    return {}


_add(
    OpSpec(
        "matmul",
        "torch.matmul({0}, {1})",
        FLOATS,
        matmul_infer,
        (1, 4),
        matmul_draw,
        exact=ACCUMULATES,
        family="linalg",
    )
)
_add(
    OpSpec(
        "mm",
        "torch.mm({0}, {1})",
        FLOATS + ("int64",),
        matmul_infer,
        (2, 2),
        mm_draw,
        exact_in_f64=True,
        exact=ACCUMULATES,
        family="linalg",
    )
)
_add(OpSpec("bmm", "torch.bmm({0}, {1})", FLOATS, matmul_infer, (3, 3), mm_draw, exact=ACCUMULATES, family="linalg"))
_add(
    OpSpec(
        "linear",
        "F.linear({0}, {1}, {2})",
        FLOATS,
        lambda t, a: TensorType(t[0].shape[:-1] + (t[1].shape[0],), t[0].dtype),
        (1, 3),
        linear_draw,
        exact=ACCUMULATES,
        family="linalg",
    )
)


def window_out(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv_draw(spatial: int):
    def draw(d: Draw) -> Attrs | None:
        channels = d.x.shape[1]
        groups = d.rng.choice([g for g in (1, 2, channels) if channels % g == 0])
        kernel, stride = d.rng.randint(1, 3), d.rng.randint(1, 2)
        padding, dilation = d.rng.randint(0, kernel // 2 + 1), d.rng.choice((1, 1, 2))
        if any(window_out(s, kernel, stride, padding, dilation) < 1 for s in d.x.shape[2:]):
            return None
        out = groups * d.rng.randint(1, 3)
        d.operand((out, channels // groups) + (kernel,) * spatial, d.x.dtype)
        d.operand((out,), d.x.dtype)
        return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}

    return draw


def conv_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    x, w = types[0], types[1]
    sizes = tuple(
        window_out(s, k, attrs["stride"], attrs["padding"], attrs["dilation"]) for s, k in zip(x.shape[2:], w.shape[2:])
    )
    return TensorType((x.shape[0], w.shape[0]) + sizes, x.dtype)


for _n in (1, 2):
    _add(
        OpSpec(
            f"conv{_n}d",
            f"F.conv{_n}d({{0}}, {{1}}, {{2}}, stride={{stride}}, padding={{padding}}, dilation={{dilation}}, groups={{groups}})",
            FLOATS,
            conv_infer,
            (_n + 2, _n + 2),
            conv_draw(_n),
            exact=ACCUMULATES,
            family="linalg",
        )
    )


def pool_draw(spatial: int, average: bool):
    def draw(d: Draw) -> Attrs | None:
        if d.x.rank == spatial + 1 and d.rng.random() < 0.8:
            return None  # unbatched: rarely (torch-mlir lowers few; one such op fails the whole program)
        kernel, stride = d.rng.randint(1, 3), d.rng.randint(1, 2)
        padding = d.rng.randint(0, kernel // 2)
        if any(window_out(s, kernel, stride, padding) < 1 for s in d.x.shape[-spatial:]):
            return None
        attrs = {"kernel": kernel, "stride": stride, "padding": padding}
        return {**attrs, "count_include_pad": d.rng.random() < 0.5} if average else attrs

    return draw


def pool_infer(spatial: int):
    def infer(types: list[TensorType], attrs: Attrs) -> TensorType:
        x = types[0]
        sizes = tuple(window_out(s, attrs["kernel"], attrs["stride"], attrs["padding"]) for s in x.shape[-spatial:])
        return TensorType(x.shape[:-spatial] + sizes, x.dtype)

    return infer


for _n in (1, 2):
    _add(
        OpSpec(
            f"max_pool{_n}d",
            f"F.max_pool{_n}d({{0}}, {{kernel}}, stride={{stride}}, padding={{padding}})",
            FLOATS,
            pool_infer(_n),
            (_n + 1, _n + 2),
            pool_draw(_n, False),
            exact=MOVES,
            family="linalg",
        )
    )
    _add(
        OpSpec(
            f"avg_pool{_n}d",
            f"F.avg_pool{_n}d({{0}}, {{kernel}}, stride={{stride}}, padding={{padding}}, "
            "count_include_pad={count_include_pad})",
            FLOATS,
            pool_infer(_n),
            (_n + 1, _n + 2),
            pool_draw(_n, True),
            family="linalg",
        )
    )


def adaptive_draw(d: Draw) -> Attrs:
    return {"size": tuple(d.rng.randint(1, s) for s in d.x.shape[-2:])}


_add(
    OpSpec(
        "adaptive_avg_pool2d",
        "F.adaptive_avg_pool2d({0}, {size})",
        FLOATS,
        lambda t, a: TensorType(t[0].shape[:-2] + tuple(a["size"]), t[0].dtype),
        (3, 4),
        adaptive_draw,
        family="linalg",
    )
)

# --- views and data movement ---------------------------------------------------------------------


def factorization(rng: Random, numel: int, rank: int) -> tuple[int, ...]:
    """A shape of `rank` dims holding `numel` elements: its prime factors dealt to dims."""
    factors, n, p = [], numel, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    dims = [1] * rank
    for f in factors:
        dims[rng.randrange(rank)] *= f
    return tuple(dims)


def reshape_draw(d: Draw) -> Attrs | None:
    rank = d.rng.randint(1, 4)
    shape = list(factorization(d.rng, d.x.numel, rank))
    if d.rng.random() < 0.3:
        shape[d.rng.randrange(rank)] = -1
    return {"shape": tuple(shape)}


def reshape_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(attrs["shape"])
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = types[0].numel // known
    return TensorType(tuple(shape), types[0].dtype)


def permute_draw(d: Draw) -> Attrs | None:
    order = list(range(d.x.rank))
    d.rng.shuffle(order)
    return {"dims": tuple(order)}


def transpose_draw(d: Draw) -> Attrs | None:
    return {"a": some_dim(d), "b": some_dim(d)}


def transposed(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["a"]], shape[attrs["b"]] = shape[attrs["b"]], shape[attrs["a"]]
    return TensorType(tuple(shape), types[0].dtype)


def slice_draw(d: Draw) -> Attrs | None:
    dim = some_dim(d)
    size = d.x.shape[dim]
    start = d.rng.randint(0, size - 1)
    end = d.rng.randint(start + 1, size)
    step = d.rng.choice((1, 1, 2))
    index = ", ".join([":"] * dim + [f"{start}:{end}" + (f":{step}" if step > 1 else "")])
    return {"dim": dim, "start": start, "end": end, "step": step, "index": index}


def slice_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["dim"]] = len(range(attrs["start"], attrs["end"], attrs["step"]))
    return TensorType(tuple(shape), types[0].dtype)


def narrow_draw(d: Draw) -> Attrs | None:
    dim = some_dim(d)
    start = d.rng.randint(0, d.x.shape[dim] - 1)
    return {"dim": dim, "start": start, "length": d.rng.randint(1, d.x.shape[dim] - start)}


def narrow_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["dim"]] = attrs["length"]
    return TensorType(tuple(shape), types[0].dtype)


def cat_draw(d: Draw) -> Attrs | None:
    dim = some_dim(d)
    shape = list(d.x.shape)
    shape[dim] = small(d.rng, 1, 4)
    d.operand(tuple(shape), d.x.dtype)
    return {"dim": dim}


def cat_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["dim"]] = sum(t.shape[attrs["dim"]] for t in types)
    return TensorType(tuple(shape), types[0].dtype)


def stack_draw(d: Draw) -> Attrs:
    d.operand(d.x.shape, d.x.dtype)
    return {"dim": d.rng.randint(0, d.x.rank)}


def stack_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape.insert(attrs["dim"], len(types))
    return TensorType(tuple(shape), types[0].dtype)


def expand_draw(d: Draw) -> Attrs | None:
    sizes = [
        d.rng.randint(2, 4) if s == 1 and d.rng.random() < 0.7 else (-1 if d.rng.random() < 0.3 else s)
        for s in d.x.shape
    ]
    if d.rng.random() < 0.3:
        sizes.insert(0, d.rng.randint(1, 3))
    return {"sizes": tuple(sizes)}


def expand_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    sizes, shape = list(attrs["sizes"]), types[0].shape
    lead = len(sizes) - len(shape)
    return TensorType(tuple(s if s != -1 else shape[i - lead] for i, s in enumerate(sizes)), types[0].dtype)


def squeeze_draw(d: Draw) -> Attrs | None:
    ones = [i for i, s in enumerate(d.x.shape) if s == 1]
    return {"dim": d.rng.choice(ones)} if ones else None


def squeeze_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    del shape[attrs["dim"]]
    return TensorType(tuple(shape), types[0].dtype)


def unsqueeze_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape.insert(attrs["dim"], 1)
    return TensorType(tuple(shape), types[0].dtype)


def flatten_draw(d: Draw) -> Attrs | None:
    start = d.rng.randrange(d.x.rank)
    return {"start": start, "end": d.rng.randint(start, d.x.rank - 1)}


def flatten_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape, s, e = types[0].shape, attrs["start"], attrs["end"]
    return TensorType(shape[:s] + (math.prod(shape[s : e + 1]),) + shape[e + 1 :], types[0].dtype)


def repeat_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    reps, shape = attrs["reps"], types[0].shape
    shape = (1,) * (len(reps) - len(shape)) + shape
    return TensorType(tuple(s * r for s, r in zip(shape, reps)), types[0].dtype)


def pad_draw(d: Draw) -> Attrs | None:
    pads = tuple(d.rng.randint(0, 2) for _ in range(2 * d.rng.randint(1, min(3, d.x.rank))))
    value = d.rng.choice((0, 1, -2)) if not is_float(d.x.dtype) else d.rng.choice((0.0, 1.5, -2.0))
    return {"pad": pads, "value": value}


def pad_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape, pads = list(types[0].shape), attrs["pad"]
    for i in range(len(pads) // 2):
        shape[-1 - i] += pads[2 * i] + pads[2 * i + 1]
    return TensorType(tuple(shape), types[0].dtype)


def gather_draw(d: Draw) -> Attrs | None:
    dim = some_dim(d)
    shape = tuple(d.rng.randint(1, s) if i != dim else d.rng.randint(1, 4) for i, s in enumerate(d.x.shape))
    d.operand(shape, "int64", Domain(0, d.x.shape[dim] - 1))
    return {"dim": dim}


def index_select_draw(d: Draw) -> Attrs | None:
    dim = some_dim(d)
    d.operand((d.rng.randint(1, 5),), "int64", Domain(0, d.x.shape[dim] - 1))
    return {"dim": dim}


def index_select_infer(types: list[TensorType], attrs: Attrs) -> TensorType:
    shape = list(types[0].shape)
    shape[attrs["dim"]] = types[1].shape[0]
    return TensorType(tuple(shape), types[0].dtype)


def _movement(name, template, infer, ranks=(1, 4), draw=lambda d: {}, dtypes=ALL) -> None:
    _add(OpSpec(name, template, dtypes, infer, ranks, draw, exact=MOVES, family="movement"))


_movement("reshape", "torch.reshape({0}, {shape})", reshape_infer, (0, 4), reshape_draw)
_movement("view", "{0}.view({shape})", reshape_infer, (0, 4), reshape_draw)
_movement(
    "permute",
    "{0}.permute({dims})",
    lambda t, a: TensorType(tuple(t[0].shape[i] for i in a["dims"]), t[0].dtype),
    draw=permute_draw,
)
_movement("transpose", "torch.transpose({0}, {a}, {b})", transposed, draw=transpose_draw)
_movement("slice", "{0}[{index}]", slice_infer, draw=slice_draw)
_movement("narrow", "torch.narrow({0}, {dim}, {start}, {length})", narrow_infer, draw=narrow_draw)
_movement("cat", "torch.cat([{0}, {1}], dim={dim})", cat_infer, draw=cat_draw)
_movement("stack", "torch.stack([{0}, {1}], dim={dim})", stack_infer, (0, 3), stack_draw)
_movement("expand", "{0}.expand({sizes})", expand_infer, (0, 3), expand_draw)
_movement("squeeze", "torch.squeeze({0}, {dim})", squeeze_infer, draw=squeeze_draw)
_movement(
    "unsqueeze", "torch.unsqueeze({0}, {dim})", unsqueeze_infer, (0, 3), lambda d: {"dim": d.rng.randint(0, d.x.rank)}
)
_movement("flatten", "torch.flatten({0}, {start}, {end})", flatten_infer, draw=flatten_draw)
_movement("flip", "torch.flip({0}, {dims})", same, draw=lambda d: {"dims": (some_dim(d),)})
_movement(
    "repeat",
    "{0}.repeat({reps})",
    repeat_infer,
    (1, 3),
    lambda d: {"reps": tuple(d.rng.randint(1, 2) for _ in range(d.x.rank + d.rng.randint(0, 1)))},
)
_movement("tril", "torch.tril({0}, {k})", same, (2, 4), lambda d: {"k": d.rng.randint(-1, 1)})
_movement("triu", "torch.triu({0}, {k})", same, (2, 4), lambda d: {"k": d.rng.randint(-1, 1)})
_movement("pad", "F.pad({0}, {pad}, value={value})", pad_infer, draw=pad_draw, dtypes=NUMERIC)
_movement("gather", "torch.gather({0}, {dim}, {1})", lambda t, a: TensorType(t[1].shape, t[0].dtype), draw=gather_draw)
_movement("index_select", "torch.index_select({0}, {dim}, {1})", index_select_infer, draw=index_select_draw)


def spec(name: str) -> OpSpec:
    """The catalogue's spec of `name` (a KeyError names the unknown op)."""
    return CATALOGUE[name]
