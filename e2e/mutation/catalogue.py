"""The mutations: compiler bugs as data, and how users add their own.

A `Mutation` is a name, the stage boundary where it rewrites the IR, and the rewrite
(`e2e.mutation.rewrites`). Boundaries, in the order the compiler reaches them:

| boundary | the IR it rewrites |
|---|---|
| `torch-backend` | the torch backend contract (`torch.aten.*`), input of the `backend` stage |
| `backend` | the backend's own IR (linalg-on-tensors, TOSA or StableHLO), output of `backend` |
| `linalg` | linalg-on-tensors after the backend's conversion to linalg, input of the RefBackend lowering |

Add a mutation with `register(Mutation(...))` in a module named by `--mutations
module` (or `module:attribute` for one Mutation or a list of them).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from e2e.mutation.rewrites import (
    Rewrite,
    float_constant,
    highest,
    int_constant,
    lowest,
    predicate,
    rename,
    swap_operands,
)

BOUNDARIES = ("torch-backend", "backend", "linalg")


@dataclass(frozen=True)
class Mutation:
    name: str
    boundary: str  # one of BOUNDARIES
    family: str  # the kind of bug, and the test family expected to catch it
    description: str
    rewrite: Rewrite

    def __post_init__(self):
        if self.boundary not in BOUNDARIES:
            raise ValueError(
                f"mutation {self.name}: unknown boundary {self.boundary!r}; known: {', '.join(BOUNDARIES)}"
            )

    def fingerprint(self) -> str:
        """What decides this mutation's effect: its name, boundary and the rewrite's source."""
        try:
            source = inspect.getsource(inspect.getmodule(self.rewrite) or self.rewrite)
        except (OSError, TypeError):
            source = repr(self.rewrite)
        return "\0".join((self.name, self.boundary, source))


def _cmpf(old: str, new: str, family: str = "comparisons") -> Mutation:
    return Mutation(
        f"cmpf_{old}_to_{new}",
        "linalg",
        family,
        f"arith.cmpf {old} compiled as {new}",
        predicate("arith.cmpf", old, new),
    )


def _cmpi(old: str, new: str) -> Mutation:
    return Mutation(
        f"cmpi_{old}_to_{new}",
        "linalg",
        "comparisons",
        f"arith.cmpi {old} compiled as {new} (not on index values)",
        predicate("arith.cmpi", old, new),
    )


def _rename(old: str, new: str, family: str, boundary: str = "linalg") -> Mutation:
    short = lambda name: name.split(".", 1)[1].replace(".", "_")  # noqa: E731
    return Mutation(f"{short(old)}_to_{short(new)}", boundary, family, f"{old} lowered as {new}", rename(old, new))


def _swap(op: str, family: str, first: int = 0, second: int = 1) -> Mutation:
    return Mutation(
        f"swap_{op.split('.')[1]}",
        "linalg",
        family,
        f"operands {first} and {second} of {op} swapped",
        swap_operands(op, first, second),
    )


CATALOGUE: tuple[Mutation, ...] = (
    # comparison strictness: ties and values at thresholds
    _cmpf("ogt", "oge"),
    _cmpf("oge", "ogt"),
    _cmpf("olt", "ole"),
    _cmpf("ole", "olt"),
    _cmpf("ugt", "uge"),
    _cmpf("ult", "ule"),
    _cmpf("ogt", "ugt", "nan"),
    _cmpf("olt", "ult", "nan"),
    _cmpf("une", "one", "nan"),
    _cmpi("slt", "sle"),
    _cmpi("sgt", "sge"),
    _cmpi("sge", "sgt"),
    _cmpi("sle", "slt"),
    _cmpi("eq", "ne"),
    # swapped operands
    _swap("arith.subf", "arithmetic"),
    _swap("arith.divf", "arithmetic"),
    _swap("arith.subi", "integer"),
    _swap("arith.cmpf", "comparisons"),
    _swap("arith.cmpi", "comparisons"),
    _swap("arith.select", "comparisons", 1, 2),
    # NaN propagation, min/max
    _rename("arith.maximumf", "arith.maxnumf", "nan"),
    _rename("arith.minimumf", "arith.minnumf", "nan"),
    _rename("arith.maxsi", "arith.maxui", "integer"),
    _rename("arith.minsi", "arith.minui", "integer"),
    # rounding and casts
    _rename("math.roundeven", "math.round", "rounding"),
    _rename("math.floor", "math.ceil", "rounding"),
    _rename("arith.extsi", "arith.extui", "casts"),
    _rename("arith.sitofp", "arith.uitofp", "casts"),
    _rename("arith.fptosi", "arith.fptoui", "casts"),
    # integer division and wrap
    _rename("arith.divsi", "arith.divui", "integer"),
    _rename("arith.floordivsi", "arith.divsi", "integer"),
    _rename("arith.remsi", "arith.remui", "integer"),
    _rename("arith.shrsi", "arith.shrui", "integer"),
    # off by one, and wrong reduction init
    Mutation(
        "int_constant_plus_one",
        "linalg",
        "integer",
        "scalar integer constants (not index) off by one",
        int_constant(+1),
    ),
    Mutation(
        "max_init_to_zero",
        "linalg",
        "reductions",
        "a max reduction's init (-inf or lowest) is 0",
        float_constant(lowest, 0.0),
    ),
    Mutation(
        "min_init_to_zero",
        "linalg",
        "reductions",
        "a min reduction's init (+inf or highest) is 0",
        float_constant(highest, 0.0),
    ),
    # an aten op lowered as its neighbour
    _rename("torch.aten.gt.Scalar", "torch.aten.ge.Scalar", "comparisons", "torch-backend"),
    _rename("torch.aten.gt.Tensor", "torch.aten.ge.Tensor", "comparisons", "torch-backend"),
    _rename("torch.aten.lt.Scalar", "torch.aten.le.Scalar", "comparisons", "torch-backend"),
    _rename("torch.aten.lt.Tensor", "torch.aten.le.Tensor", "comparisons", "torch-backend"),
    _rename("torch.aten.maximum", "torch.aten.fmax", "nan", "torch-backend"),
    _rename("torch.aten.round", "torch.aten.trunc", "rounding", "torch-backend"),
    _rename("torch.aten.argmax", "torch.aten.argmin", "reductions", "torch-backend"),
    _rename("torch.aten.sub.Tensor", "torch.aten.add.Tensor", "arithmetic", "torch-backend"),
    # the TOSA backend's own IR
    _rename("tosa.greater", "tosa.greater_equal", "comparisons", "backend"),
    _rename("tosa.maximum", "tosa.minimum", "min/max", "backend"),
)

_REGISTRY: dict[str, Mutation] = {}


def register(mutation: Mutation) -> Mutation:
    """Add a mutation to the catalogue (a name may be registered once)."""
    if mutation.name in _REGISTRY and _REGISTRY[mutation.name] is not mutation:
        raise ValueError(f"duplicate mutation name {mutation.name!r}")
    _REGISTRY[mutation.name] = mutation
    return mutation


for _mutation in CATALOGUE:
    register(_mutation)


def load(spec: str) -> list[Mutation]:
    """Mutations from `module` (everything it `register`s) or `module:attribute`."""
    module_name, _, attribute = spec.partition(":")
    before = set(_REGISTRY)
    try:
        module = importlib.import_module(module_name)
        value = getattr(module, attribute) if attribute else None
    except (ImportError, AttributeError) as error:
        raise ValueError(f"mutations {spec!r} could not be loaded: {error}") from error
    if not attribute:
        return [_REGISTRY[name] for name in _REGISTRY if name not in before]
    values = [value] if isinstance(value, Mutation) else list(value)
    if not all(isinstance(v, Mutation) for v in values):
        raise ValueError(f"{spec!r} is not a Mutation or a list of them")
    return [register(v) for v in values]


def mutations() -> list[Mutation]:
    """Every registered mutation, the built-in catalogue first."""
    return list(_REGISTRY.values())
