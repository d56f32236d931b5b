"""A generated program as a value: printable, saved as JSON, rebuilt exactly from its seed.

A `Program` holds its inputs (shape, dtype, the domain its values are drawn in, which
dims are dynamic), its nodes (an op of the catalogue, the values it reads, its
attributes, its result's type) and its outputs. `to_python()` is the program as a small
Python function, and `function()` is that very text compiled: what the suite captures is
what a report prints. `make_inputs(tu)` draws the inputs from a seeded `TestUtils` in
order, as the generator drew them when it checked every intermediate (`Checks`).
"""

from __future__ import annotations

import json
import linecache
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from compiler.replay_runtime.compare import TOLERANCES, Tolerance
from e2e.framework.testutils import TestUtils
from e2e.generate import boundary
from e2e.generate.ops import spec
from e2e.generate.types import Domain, TensorType, is_float, torch_dtype

# The checks every registered program passed on its inputs (see grow.py).
CHECKS = ("finite", "domain", "no_overflow", "cast_in_range", "no_shift", "stable", "conditioned")

NAMESPACE = {"torch": torch, "F": torch.nn.functional}  # what an op's template refers to
DEFAULT_FLOAT_RANGE = (-2.0, 2.0)
DEFAULT_INT_RANGE = (-8, 8)


def program_name(seed: int) -> str:
    return f"Gen_{seed}"


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: TensorType
    domain: Domain = Domain()
    dynamic: tuple[int, ...] = ()  # dims declared dynamic (-1 in the test's annotation)
    values: str = boundary.UNIFORM  # how its values are drawn: uniformly, or `boundary.BOUNDARY`

    def draw(self, tu: TestUtils, order: tuple[float, ...] = (), points: tuple[float, ...] = ()) -> torch.Tensor:
        """This input's values from `tu`, inside its domain (at the boundaries: palettes
        opening in the program's `order`, `boundary.ranking`, holding one of `points`, where
        an op reading it decides by its rule alone: `OpSpec.points`)."""
        shape, dtype, d = self.type.shape, self.type.dtype, self.domain
        if self.values == boundary.BOUNDARY:
            return boundary.draw(tu, shape, dtype, d, order, points)
        if dtype == "bool":
            return tu.bools(*shape)
        if is_float(dtype):
            low = d.low if d.low is not None else (d.high - 4.0 if d.high is not None else DEFAULT_FLOAT_RANGE[0])
            high = d.high if d.high is not None else low + 4.0 if d.low is not None else DEFAULT_FLOAT_RANGE[1]
            if d.min_abs and low < d.min_abs and high > -d.min_abs:  # a divisor: a magnitude, then a sign
                magnitude = tu.rand(*shape, low=d.min_abs, high=max(abs(low), abs(high), d.min_abs + 1.0))
                sign = torch.where(tu.bools(*shape), 1.0, -1.0)
                return (magnitude * sign).clamp(low, high).to(torch_dtype(dtype))
            return tu.rand(*shape, low=low, high=high, dtype=torch_dtype(dtype))
        info = torch.iinfo(torch_dtype(dtype))
        low = int(d.low) if d.low is not None else DEFAULT_INT_RANGE[0]
        high = int(d.high) if d.high is not None else DEFAULT_INT_RANGE[1]
        low, high = max(low, info.min), min(high, info.max)
        values = tu.randint(*shape, low=low, high=high + 1, dtype=torch_dtype(dtype))
        if d.min_abs:
            values = torch.where(values.abs() < d.min_abs, torch.full_like(values, max(int(d.min_abs), low)), values)
        return values


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...]
    type: TensorType

    def expression(self) -> str:
        return spec(self.op).render(list(self.inputs), dict(self.attrs))


@dataclass(frozen=True)
class Checks:
    """What the generator checked on this program's inputs: every check in `passed` held
    for every intermediate; `turned_away` counts the op insertions each check rejected
    while growing it, `repairs` the guards (clamps into an op's domain) it inserted."""

    passed: tuple[str, ...] = CHECKS
    turned_away: tuple[tuple[str, int], ...] = ()
    repairs: int = 0


@dataclass(frozen=True)
class Program:
    seed: int
    inputs: tuple[InputSpec, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    checks: Checks = field(default_factory=Checks)

    @property
    def name(self) -> str:
        return program_name(self.seed)

    @property
    def ops(self) -> list[str]:
        return [node.op for node in self.nodes]

    @property
    def dynamic(self) -> bool:
        return any(i.dynamic for i in self.inputs)

    @property
    def tolerance(self) -> Tolerance | None:
        """The comparison's tolerance: the loosest of the suite's table over every float
        dtype the program computes in (an f32 output cast from an f16 value carries f16's
        error), or None (the table by each output's dtype) when that is f32's."""
        dtypes = {t.dtype for t in [*(i.type for i in self.inputs), *(n.type for n in self.nodes)]}
        loosest = max((TOLERANCES[torch_dtype(d)] for d in dtypes if is_float(d)), key=lambda t: t.rtol, default=None)
        return None if loosest is None or loosest == TOLERANCES[torch.float32] else loosest

    def annotations(self) -> list[list[int]] | bool:
        """Per-input shapes with -1 for dynamic dims (`op_test`'s `dynamic=`), or False."""
        if not self.dynamic:
            return False
        return [[-1 if d in i.dynamic else s for d, s in enumerate(i.type.shape)] for i in self.inputs]

    def make_inputs(self, tu: TestUtils) -> list[torch.Tensor]:
        """The inputs, drawn from `tu` in order (the suite's invoker passes the test's seeded one)."""
        if not self.at_boundary:
            return [spec_.draw(tu) for spec_ in self.inputs]
        points: dict[str, tuple[float, ...]] = {}  # by input: the points of the ops reading it first
        for node in self.nodes:
            if node.inputs:
                points[node.inputs[0]] = points.get(node.inputs[0], ()) + spec(node.op).points
        order = boundary.ranking(self.seed)
        return [spec_.draw(tu, order, points.get(spec_.name, ())) for spec_ in self.inputs]

    @property
    def at_boundary(self) -> bool:
        """Whether some input draws at the boundaries (`boundary`, `grow.boundary_twin`)."""
        return any(i.values == boundary.BOUNDARY for i in self.inputs)

    def uniform_twin(self) -> Program:
        """The same program with every input drawn uniformly: a boundary program's seed's
        uniform program, which its test runs first (`register.program_test`)."""
        return replace(self, inputs=tuple(replace(i, values=boundary.UNIFORM) for i in self.inputs))

    def to_python(self) -> str:
        """The program as a Python module class named after it (what the suite captures)."""
        lines = ["import torch", "import torch.nn.functional as F", "", ""]
        lines.append(f"class {self.name}(torch.nn.Module):")
        lines.append(f"    def forward(self, {', '.join(i.name for i in self.inputs)}):")
        for i in self.inputs:
            d = i.domain
            bounds = "" if d == Domain() else f" in {_domain_text(d)}"
            dynamic = f", dynamic dims {list(i.dynamic)}" if i.dynamic else ""
            drawn = ", boundary values" if i.values == boundary.BOUNDARY else ""
            lines.append(f"        # {i.name}: {i.type}{bounds}{dynamic}{drawn}")
        for node in self.nodes:
            lines.append(f"        {node.name} = {node.expression()}  # {node.type}")
        lines.append(f"        return {', '.join(self.outputs)}")
        return "\n".join(lines) + "\n"

    def module_class(self, name: str | None = None) -> type[torch.nn.Module]:
        """`to_python()` compiled, its class named `name` (default the program's): its text
        is put in linecache under that name, so tracebacks show it and torch.jit.script
        (which reads a method's source by its file name) scripts this program, not another
        of the same seed (regression tests of one seed are different programs)."""
        name = name or self.name
        source = self.to_python().replace(f"class {self.name}(", f"class {name}(", 1)
        filename = f"<generated {name}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace: dict[str, Any] = {}
        exec(compile(source, filename, "exec"), namespace)
        return namespace[name]

    def intermediates(self, inputs: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every value of the program on `inputs` (inputs and node results, by name), run
        natively node by node."""
        values = {i.name: t for i, t in zip(self.inputs, inputs)}
        for node in self.nodes:
            values[node.name] = eval(node.expression(), NAMESPACE, values)  # noqa: S307 - our own template
        return values

    def widened(self) -> Program:
        """The same program with every float dtype float64 (inputs, casts, results): the
        reference a distance oracle judges a float result by (`intermediates` of it on
        the inputs cast up)."""

        def wide(t: TensorType) -> TensorType:
            return TensorType(t.shape, "float64") if is_float(t.dtype) else t

        nodes = tuple(replace(n, type=wide(n.type), attrs=attrs_of(widened_attrs(dict(n.attrs)))) for n in self.nodes)
        return replace(self, inputs=tuple(replace(i, type=wide(i.type)) for i in self.inputs), nodes=nodes)

    def run(self, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The program's outputs on `inputs`, natively, always as a tuple."""
        out = self.module_class()()(*inputs)
        return out if isinstance(out, tuple) else (out,)

    def to_json(self) -> str:
        return json.dumps(
            {
                "seed": self.seed,
                "inputs": [
                    {
                        "name": i.name,
                        "shape": list(i.type.shape),
                        "dtype": i.type.dtype,
                        "domain": i.domain.to_json(),
                        "dynamic": list(i.dynamic),
                        # Only when not the default: a uniform program's JSON is as it was.
                        **({"values": i.values} if i.values != boundary.UNIFORM else {}),
                    }
                    for i in self.inputs
                ],
                "nodes": [
                    {
                        "name": n.name,
                        "op": n.op,
                        "inputs": list(n.inputs),
                        "attrs": dict(n.attrs),
                        "shape": list(n.type.shape),
                        "dtype": n.type.dtype,
                    }
                    for n in self.nodes
                ],
                "outputs": list(self.outputs),
                "checks": {
                    "passed": list(self.checks.passed),
                    "turned_away": dict(self.checks.turned_away),
                    "repairs": self.checks.repairs,
                },
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> Program:
        data = json.loads(text)
        checks = data.get("checks", {})
        return Program(
            seed=data["seed"],
            inputs=tuple(
                InputSpec(
                    i["name"],
                    TensorType(tuple(i["shape"]), i["dtype"]),
                    Domain(*i["domain"]),
                    tuple(i["dynamic"]),
                    i.get("values", boundary.UNIFORM),
                )
                for i in data["inputs"]
            ),
            nodes=tuple(
                Node(
                    n["name"],
                    n["op"],
                    tuple(n["inputs"]),
                    attrs_of(n["attrs"]),
                    TensorType(tuple(n["shape"]), n["dtype"]),
                )
                for n in data["nodes"]
            ),
            outputs=tuple(data["outputs"]),
            checks=Checks(
                tuple(checks.get("passed", CHECKS)),
                tuple(sorted(checks.get("turned_away", {}).items())),
                checks.get("repairs", 0),
            ),
        )


def widened_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """A node's attributes in the float64 program: a cast to a float dtype casts to float64."""
    return {k: "float64" if k == "dtype" and is_float(v) else v for k, v in attrs.items()}


def attrs_of(attrs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Attributes as a node keeps them: sorted by name, lists as tuples (JSON gives lists)."""
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))


def _domain_text(d: Domain) -> str:
    low = "-inf" if d.low is None else f"{d.low:g}"
    high = "inf" if d.high is None else f"{d.high:g}"
    return f"[{low}, {high}]" + (f", |x| >= {d.min_abs:g}" if d.min_abs else "") + (" or NaN" if d.nan else "")
