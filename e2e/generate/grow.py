"""`generate(seed)`: a valid program grown one op at a time, rebuilt exactly from its seed.

Each step picks an op of the catalogue (a family first, so the ~50 unary ops do not
crowd out the rest), a first operand of a type it takes (the latest value more often,
for depth; sometimes a new input, for breadth), and lets the op draw its attributes and
further operands (existing values of the exact type asked for, or new inputs). Shapes
follow by construction from each op's `infer`.

Validity is checked on concrete values as the program grows: the inputs are drawn, in
order, from the `TestUtils` the suite will hand the test (`seed_for(name)`), and each new
op is run natively on the values so far. The op stays only if its result has the type
its spec inferred (else the spec is wrong: an error) and passes every check of
`program.CHECKS`: a float result finite and inside `FLOAT_LIMIT`; every operand inside
the op's domain (an intermediate outside it is first clamped into it by a guard node,
an input is drawn inside it); an integer result equal to the same op over float64 (no
overflow); a float to int cast in range; no shift ops (the catalogue has none, so
none shifts past the width); no result within a rounding error of a discontinuity
(comparisons, floor, argmax, casts). A rejected op is undone, the `TestUtils` stream
included. If no op could be added, the next attempt (a new stream, same seed) starts over.

A boundary program (`boundary`: a share of the seeds) is the seed's uniform program, the
same ops and attributes, with its inputs drawn again at the boundaries (`boundary_twin`):
each input where the program stays valid on it, the rest as before. Boundary draws then
change values only, never the structure a campaign covers: a seed finds every structural
bug it would find uniformly, and a boundary program's failure whose uniform twin passes
is one of the values.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from random import Random

import torch

from compiler.replay_runtime.compare import TOLERANCES
from e2e.framework.testutils import TestUtils, seed_for
from e2e.generate import boundary
from e2e.generate.ops import CATALOGUE, Draw, OpSpec
from e2e.generate.program import NAMESPACE, Checks, InputSpec, Node, Program, attrs_of, program_name, widened_attrs
from e2e.generate.ties import is_open
from e2e.generate.types import (
    FLOAT_LIMIT,
    FREE,
    MAX_ELEMENTS,
    Domain,
    TensorType,
    has_nan,
    is_float,
    is_int,
    torch_dtype,
)

ATTEMPTS = 20
# How often each family is drawn (then an op of it, uniformly): `where` and the cast are one
# op each, the unary family fifty.
FAMILY_WEIGHTS = {
    "unary": 3,
    "binary": 3,
    "movement": 3,
    "reduction": 2,
    "linalg": 2,
    "norm": 1,
    "cast": 1,
    "select": 1,
}
FAMILIES = sorted(FAMILY_WEIGHTS)
BY_FAMILY = {f: sorted(n for n, s in CATALOGUE.items() if s.family == f) for f in FAMILIES}
INPUT_DTYPES = (
    ("float32", 55),
    ("float16", 10),
    ("bfloat16", 10),
    ("int64", 10),
    ("int32", 7),
    ("int8", 4),
    ("bool", 4),
)
RANKS = ((0, 1), (1, 2), (2, 4), (3, 4), (4, 2))


def size_weights(max_ops: int) -> list[float]:
    """How often a program aims at 1, 2, ... `max_ops` ops: in proportion to 1/n (mean 5.5 ops
    of at most 20, 63% at most 5, 5% over 15). Small programs are cheap (a 1-4 op program's pair
    took 138 ms, a 17-20 op one's 332 ms, in a block of seeds 300000..300127 on the six built-in
    configs) and fail more often only for what they hold: a program of 17-20 ops passed on 47% of
    its pairs, so a failure of one op hid what its other ops would have shown. NNSmith grows
    5-node graphs by default; the long tail keeps the combinations only a deep program reaches."""
    return [1 / n for n in range(1, max_ops + 1)]


class GenerationError(RuntimeError):
    pass


class SpecError(AssertionError):
    """An op's spec disagrees with torch (its inferred type is not the result's)."""


def generate(seed: int, *, max_ops: int = 20, boundary_share: float | None = None) -> Program:
    """The program of `seed`: 1 to `max_ops` ops, valid on its inputs (see the module doc);
    its inputs drawn at the boundaries when the seed falls in `boundary_share` (default
    `boundary.boundary_share()`: `$E2E_GENERATE_BOUNDARY_SHARE`, else `BOUNDARY_SHARE`)."""
    share = boundary.boundary_share() if boundary_share is None else boundary_share
    for attempt in range(ATTEMPTS):
        grower = Grower(seed, Random(f"e2e.generate/{seed}/{attempt}"), max_ops)
        program = grower.grow()
        if program is not None:
            return boundary_twin(program, grower.domains) if boundary.is_boundary(seed, share) else program
    raise GenerationError(f"seed {seed}: no valid program in {ATTEMPTS} attempts")


def boundary_twin(program: Program, domains: dict[str, tuple[Domain, ...]]) -> Program:
    """`program` with its inputs drawn at the boundaries, each one whose draw keeps the
    program valid (`invalid`, and every operand inside the domain its op asked for:
    `Grower.domains`): all at first; where a node fails its checks, the latest
    boundary input it reads (through other nodes too) is drawn uniformly again, until none
    fails. One input's draw moves the `TestUtils` stream of every later one, so the search
    replays the whole program each time: at most one replay an input, a few ms each; all
    inputs uniform is the program itself, valid by construction."""
    readers = _inputs_read(program)
    drawn = [boundary.BOUNDARY] * len(program.inputs)
    while boundary.BOUNDARY in drawn:
        candidate = replace(program, inputs=tuple(replace(i, values=v) for i, v in zip(program.inputs, drawn)))
        failed = _first_failure(candidate, domains)
        if failed is None:
            return candidate
        reads = [k for k in readers.get(failed[1], ()) if drawn[k] == boundary.BOUNDARY] or [
            k for k, v in enumerate(drawn) if v == boundary.BOUNDARY
        ]  # a node that failed on no boundary input: an earlier input's draw moved its stream
        drawn[max(reads)] = boundary.UNIFORM
    return program


def _inputs_read(program: Program) -> dict[str, list[int]]:
    """The inputs (by index) each node reads, directly or through other nodes."""
    index = {spec.name: {k} for k, spec in enumerate(program.inputs)}
    for node in program.nodes:
        index[node.name] = set().union(*(index[name] for name in node.inputs))
    return {name: sorted(found) for name, found in index.items()}


@dataclass
class Value:
    name: str
    type: TensorType
    tensor: torch.Tensor
    is_input: bool
    wide: torch.Tensor  # the value in the float64 program (`Program.widened`)
    precision: str | None  # the least precise float dtype it was computed through (None: none)
    exact: bool = True  # equal to its mathematical value on every correct compiler (`boundary`)
    readable: bool = True  # False: an index an open tie contract chose (`ties.is_open`): no op reads it
    # May hold NaN in the boundary twin (`boundary_twin`): an input whose domain allows NaN, or a
    # float result of one by an op that propagates it. Only an op that takes NaN reads it.
    nan: bool = False


class Grower:
    def __init__(self, seed: int, rng: Random, max_ops: int):
        self.seed, self.rng, self.max_ops = seed, rng, max_ops
        self.tu = TestUtils(seed_for(program_name(seed)))
        self.values: list[Value] = []
        self.inputs: list[InputSpec] = []
        self.nodes: list[Node] = []
        self.turned_away: Counter[str] = Counter()
        self.repairs = 0
        # The domain each node's further operands were drawn in (`GrowDraw.operand`): its
        # boundary twin keeps them (`boundary_twin`). By node name (a node undone is never recorded).
        self.domains: dict[str, tuple[Domain, ...]] = {}

    def grow(self) -> Program | None:
        target = self.rng.choices(range(1, self.max_ops + 1), size_weights(self.max_ops))[0]
        self.new_input(self.random_type(), FREE)
        tries = 0
        while len(self.nodes) < target and tries < 10 * target:
            tries += 1
            family = self.rng.choices(FAMILIES, [FAMILY_WEIGHTS[f] for f in FAMILIES])[0]
            self.try_op(CATALOGUE[self.rng.choice(BY_FAMILY[family])])
        if not self.nodes:
            return None
        used = {name for node in self.nodes for name in node.inputs}
        outputs = tuple(n.name for n in self.nodes if n.name not in used)
        inputs = [i for i in self.inputs if i.name in used]
        if len(inputs) != len(self.inputs):
            return None  # an input no op reads (never happens: inputs are made for an op)
        if self.rng.random() < 1 / 3:
            inputs = self.declare_dynamic(inputs)
        return Program(
            self.seed,
            tuple(inputs),
            tuple(self.nodes),
            outputs,
            Checks(turned_away=tuple(sorted(self.turned_away.items())), repairs=self.repairs),
        )

    # --- values ---

    def random_type(self, dtypes: tuple[str, ...] | None = None, ranks: tuple[int, int] = (0, 4)) -> TensorType:
        weights = [(d, w) for d, w in INPUT_DTYPES if dtypes is None or d in dtypes] or [(d, 1) for d in dtypes]
        dtype = self.rng.choices([d for d, _ in weights], [w for _, w in weights])[0]
        ranked = [(r, w) for r, w in RANKS if ranks[0] <= r <= ranks[1]]
        rank = self.rng.choices([r for r, _ in ranked], [w for _, w in ranked])[0]
        high = 6 if rank <= 2 else 4
        return TensorType(tuple(self.rng.randint(1, high) for _ in range(rank)), dtype)

    def new_input(self, kind: TensorType, domain: Domain) -> Value:
        spec = InputSpec(f"x{len(self.inputs)}", kind, domain)
        self.inputs.append(spec)
        tensor = spec.draw(self.tu)
        wide = tensor.double() if tensor.is_floating_point() else tensor
        precision = kind.dtype if is_float(kind.dtype) else None
        value = Value(spec.name, kind, tensor, True, wide, precision, nan=domain.nan and is_float(kind.dtype))
        self.values.append(value)
        return value

    def operand(self, kind: TensorType, domain: Domain) -> Value:
        """An existing value of exactly `kind` inside `domain`, or a new input."""
        fits = [
            v
            for v in self.values
            if v.readable and v.type == kind and domain.holds(v.tensor) and (domain.nan or not v.nan)
        ]
        if fits and self.rng.random() < 0.6:
            return self.rng.choice(fits)
        return self.new_input(kind, domain)

    def declare_dynamic(self, inputs: list[InputSpec]) -> list[InputSpec]:
        # Never a dim of size 1: torch-mlir assumes a dynamic dim does not broadcast (the
        # suite's convention, as upstream's, annotates such a dim 1), and compiled code
        # asserts it at run time; torch.export specializes it anyway.
        out = []
        for spec in inputs:
            dims = tuple(d for d, size in enumerate(spec.type.shape) if size > 1 and self.rng.random() < 0.5)
            out.append(replace(spec, dynamic=dims))
        if not any(s.dynamic for s in out):
            wide = [(i, d) for i, s in enumerate(out) for d, size in enumerate(s.type.shape) if size > 1]
            if wide:
                i, d = wide[0]
                out[i] = replace(out[i], dynamic=(d,))
        return out

    # --- one step ---

    def try_op(self, spec: OpSpec) -> None:
        mark = (len(self.values), len(self.inputs), len(self.nodes), self.tu.generator.get_state(), self.repairs)
        failed = self.add_op(spec)
        if failed is not None:
            self.turned_away[failed] += 1
            values, inputs, nodes, state, repairs = mark
            del self.values[values:], self.inputs[inputs:], self.nodes[nodes:]
            self.tu.generator.set_state(state)
            self.repairs = repairs

    def add_op(self, spec: OpSpec) -> str | None:
        """Add one `spec` node; None, or why not (the check that failed, or `applies`)."""
        takes = lambda t: t.dtype in spec.dtypes and spec.ranks[0] <= t.rank <= spec.ranks[1]  # noqa: E731
        # A value that holds NaN only for an op whose contract says what a NaN does (`OpSpec.takes_nan`).
        candidates = [v for v in self.values if v.readable and takes(v.type) and (spec.takes_nan or not v.nan)]
        # A NaN-contract op reads a new float input three times in four: there its boundary
        # twin may hold NaN (`boundary_twin`); through values made by other ops a NaN reached
        # amax/amin in 3 programs of 1,000. So does an op with points (`OpSpec.points`: round,
        # sign): a value made by other ops is rarely exactly at one.
        at_edges = spec.takes_nan or bool(spec.points)
        fresh = not candidates or self.rng.random() < (0.75 if at_edges else 0.05)
        if fresh:
            floats = tuple(d for d in spec.dtypes if is_float(d)) if at_edges else ()
            first = self.random_type(floats or spec.dtypes, spec.ranks)
        else:
            # Values nothing reads yet first, the latest most: chains, not a forest of one-op programs.
            consumed = {name for node in self.nodes for name in node.inputs}
            unread = [v for v in candidates if v.name not in consumed]
            pool = unread if unread and self.rng.random() < 0.8 else candidates
            first_value = pool[-1] if self.rng.random() < 0.5 else self.rng.choice(pool)
            first = first_value.type
        draw = GrowDraw(self, first)
        attrs = spec.draw(draw)
        if attrs is None:
            return "applies"
        attrs = dict(attrs_of(attrs))
        domain = spec.domain(attrs, first.dtype)
        if fresh:
            first_value = self.new_input(first, domain)
        elif not domain.holds(first_value.tensor):
            first_value = self.guard(first_value, domain)
            if first_value is None:
                return "domain"
        operands = [first_value, *draw.values]
        try:
            kind = spec.infer([v.type for v in operands], attrs)
        except (ValueError, RuntimeError, IndexError):
            return "applies"
        if kind.numel > MAX_ELEMENTS or 0 in kind.shape:
            return "applies"
        failed = self.append(spec, operands, attrs, kind)
        if failed is None:
            self.domains[self.nodes[-1].name] = tuple(domain for _, domain in draw.operands)
        return failed

    def guard(self, value: Value, domain: Domain) -> Value | None:
        """`value` clamped into `domain` by a new `clamp` node (floats and ints)."""
        if not (is_float(value.type.dtype) or is_int(value.type.dtype)):
            return None
        low, high = domain.clamp_bounds()
        if is_int(value.type.dtype):
            low = None if low is None else int(-(-low // 1))
            high = None if high is None else int(high // 1)
        attrs = {"min": low, "max": high}
        if self.append(CATALOGUE["clamp"], [value], attrs, value.type) is not None:
            return None
        self.repairs += 1
        return self.values[-1] if domain.holds(self.values[-1].tensor) else None

    def append(
        self, spec: OpSpec, operands: list[Value], attrs: dict, kind: TensorType, name: str | None = None
    ) -> str | None:
        names = [v.name for v in operands]
        expression = spec.render(names, attrs)
        tensors = [v.tensor for v in operands]
        try:
            result = eval(expression, NAMESPACE, dict(zip(names, tensors)))  # noqa: S307 - our own template
        except (RuntimeError, ValueError, IndexError, TypeError):
            return "torch"  # torch refuses this combination (a view of a non-contiguous value...)
        actual = TensorType(tuple(result.shape), str(result.dtype).removeprefix("torch."))
        if actual != kind:
            raise SpecError(f"{spec.name}: inferred {kind}, torch gives {actual} for {expression} on {operands}")
        exact = all(v.exact for v in operands)
        failed = self.check(spec, expression, names, tensors, attrs, result, exact)
        if failed is not None:
            return failed
        precision = loosest([v.precision for v in operands] + [kind.dtype if is_float(kind.dtype) else None])
        wide = eval(spec.render(names, widened_attrs(attrs)), NAMESPACE, {v.name: v.wide for v in operands})  # noqa: S307
        wide = wide.double() if wide.is_floating_point() else wide  # int / int promotes to float32 there too
        if not conditioned(result, wide, precision):
            return "conditioned"
        node = Node(name or f"v{len(self.nodes)}", spec.name, tuple(names), attrs_of(attrs), kind)
        self.nodes.append(node)
        exact = exact and exact_result(spec, names, operands, attrs, result, wide)
        nan = result.is_floating_point() and any(v.nan for v in operands)  # only a NaN-taking op reads one
        self.values.append(Value(node.name, kind, result, False, wide, precision, exact, not is_open(spec.name), nan))
        return None

    def check(self, spec, expression, names, tensors, attrs, result: torch.Tensor, exact: bool) -> str | None:
        if result.is_floating_point():
            limit = FLOAT_LIMIT[str(result.dtype).removeprefix("torch.")]
            if spec.nan is not None and any(has_nan(t) for t in tensors):
                result = result[~torch.isnan(result)]  # a NaN its contract says it returns; the rest finite
            if not bool(torch.isfinite(result).all()) or (result.numel() and result.abs().max().item() > limit):
                return "finite"
        if spec.exact_in_f64 and not result.is_floating_point() and result.dtype != torch.bool:
            wide = [t.double() for t in tensors]
            exact = eval(expression, NAMESPACE, dict(zip(names, wide)))  # noqa: S307
            if not torch.equal(result.double(), exact.double()):
                return "no_overflow"
        if spec.check is not None:
            failed = spec.check(tensors, attrs, result)
            # On exact operands a discontinuity is met exactly, on every compiler: a tie, not a rounding.
            return None if failed == "stable" and exact else failed
        return None


def invalid(program: Program) -> str | None:
    """Why `program` is not a program the generator could have kept (the check its inputs,
    drawn as the suite draws them, fail), or None: valid. Replays the grower's own checks
    node by node (`Grower.append`): each result of its inferred type and passing every
    check of `CHECKS`, each first operand inside its op's domain. For a program rebuilt
    from another (a shrink: a node cut into an input, smaller shapes or dtypes). A boundary
    program's uniform twin too: its test runs both (`register.program_test`)."""
    failed = _first_failure(program) or (_first_failure(program.uniform_twin()) if program.at_boundary else None)
    return None if failed is None else failed[0]


def _first_failure(
    program: Program, domains: dict[str, tuple[Domain, ...]] | None = None
) -> tuple[str, str | None] | None:
    """`invalid`'s reason and the node that fails (None: an input), or None. With `domains`
    (`Grower.domains`), every further operand is checked against its own domain too (a
    program rebuilt from elsewhere has only its first operands')."""
    grower = Grower(program.seed, Random(0), 0)
    values: dict[str, Value] = {}
    if any(i.dynamic and any(i.type.shape[d] < 2 for d in i.dynamic) for i in program.inputs):
        return "applies", None  # a dynamic dim of size 1 broadcasts: the suite never declares one
    for spec_, tensor in zip(program.inputs, program.make_inputs(grower.tu)):
        wide = tensor.double() if tensor.is_floating_point() else tensor
        precision = spec_.type.dtype if is_float(spec_.type.dtype) else None
        values[spec_.name] = Value(spec_.name, spec_.type, tensor, True, wide, precision)
    for node in program.nodes:
        spec = CATALOGUE[node.op]
        operands = [values[name] for name in node.inputs]
        attrs = dict(node.attrs)
        try:
            if not spec.domain(attrs, operands[0].type.dtype).holds(operands[0].tensor):
                return "domain", node.name
            further = (domains or {}).get(node.name, ())
            if not all(domain.holds(v.tensor) for domain, v in zip(further, operands[1:])):
                return "domain", node.name
            failed = grower.append(spec, operands, attrs, node.type, node.name)
        except SpecError:
            return "applies", node.name  # the node's recorded type is not what torch computes
        except Exception:  # noqa: BLE001 - a check given shapes its op was never drawn for (a shrink's): not valid
            return "applies", node.name
        if failed is not None:
            return failed, node.name
        values[node.name] = grower.values[-1]
    return None


class GrowDraw(Draw):
    """An op's further operands: existing values when one fits, else new inputs."""

    def __init__(self, grower: Grower, x: TensorType):
        super().__init__(grower.rng, x)
        self.grower = grower
        self.values: list[Value] = []

    def operand(self, shape: tuple[int, ...], dtype: str, domain: Domain = FREE) -> TensorType:
        kind = TensorType(tuple(shape), dtype)
        self.values.append(self.grower.operand(kind, domain))
        self.operands.append((kind, domain))
        return kind


def exact_result(spec: OpSpec, names, operands: list[Value], attrs: dict, result, wide) -> bool:
    """Whether `spec`'s result on exact `operands` is exact too (`boundary`): an integer or
    bool always (the checks kept it away from any rounding); a float as the op's `exact` rule says."""
    if not result.is_floating_point():
        return True
    if spec.exact == boundary.MOVES:
        return True
    if spec.exact not in (boundary.ROUNDS_ONCE, boundary.ACCUMULATES):
        return False
    if not torch.equal(result.double(), wide):
        return False  # rounded: its value is not the float64 program's
    if spec.exact == boundary.ROUNDS_ONCE:
        return True
    magnitudes = eval(  # noqa: S307 - our own template, on |operands| in float64: the sum of |terms|
        spec.render(names, widened_attrs(attrs)),
        NAMESPACE,
        {v.name: v.wide.abs().double() if v.wide.is_floating_point() else v.wide.abs() for v in operands},
    )
    return boundary.representable_sums([v.tensor for v in operands], magnitudes, result.dtype)


def loosest(dtypes: list[str | None]) -> str | None:
    """The least precise of some float dtypes (by the suite's tolerance table), or None."""
    floats = [d for d in dtypes if d is not None]
    return max(floats, key=lambda d: TOLERANCES[torch_dtype(d)].rtol, default=None)


def conditioned(result: torch.Tensor, wide: torch.Tensor, precision: str | None) -> bool:
    """torch's result is within half the tolerance of the float64 program's (a float result;
    equal for an integer or bool one), the tolerance of the least precise float dtype it went
    through: a compiler as close to the float64 answer then agrees with torch within the
    whole tolerance, and no rounding flips a comparison, a cast or an argmax."""
    if not result.is_floating_point():
        return bool(torch.equal(result, wide.to(result.dtype)))
    if precision is None:
        precision = str(result.dtype).removeprefix("torch.")
    tol = TOLERANCES[torch_dtype(precision)]
    nan = torch.isnan(result.double())
    if not torch.equal(nan, torch.isnan(wide)):
        return False  # a NaN the float64 program does not have, or the other way
    close = (result.double() - wide).abs() <= 0.5 * (tol.atol + tol.rtol * wide.abs())
    return bool((close | nan).all())
