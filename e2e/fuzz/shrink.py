"""The smallest program that still shows a bug: graph reduction on the `Program` value.

Delta-debugging style, greedy, on the `Program` value (not the FX graph: every candidate
is a program the generator could have written, so its regression test reads like one):

1. fewer ops: one node's cone alone (the node as the only output: what comes after it
   dropped), chunks of nodes cut (each cut node made a new input of its type, its dims
   dynamic too in a program with dynamic dims; halves first, then quarters... then single
   nodes), a node bypassed (replaced by an operand of its type), the smallest candidates first;
2. smaller shapes: each size of the inputs' dims made 1, 2 or half, everywhere at once
   or in one input's dim, the node types inferred again through the op specs;
3. fewer dims: a dim of size 1 dropped (the leading one of every input of the highest
   rank, then one input's), types inferred again;
4. plainer dtypes: f16/bf16 inputs and casts made f32, i8/i32 made i64, types inferred again.

A candidate is tried only when it is valid (`e2e.generate.grow.invalid`: its inputs,
drawn as the suite draws them, keep every intermediate finite and every operand in its
op's domain, the generator's own checks) and not tried before; it is kept when its pair
on the config fails as the bug does (`still_fails`: the same signature, the oracle
carried, and when the signature names no op, a wrong result's or a crash's, the guilty
aten op still in the program); then the order
starts over from the smaller program, until no candidate is kept or the time box ends.

Each candidate runs through the suite's runner in this (warm) process: `prepare` runs
torch's golden here, `run_pair` forks a child per pair (containment for crashes and
hangs; the child inherits the warm-up, so a candidate costs its compile, ~0.5-1.5 s).
Then the suite's MLIR reducer takes the smallest program (the regression test's bundle).

A program's values come from a `TestUtils` seeded by its original name, as the generator
drew them: inputs a shrink keeps keep their values; a cut node's new input is drawn after
them, inside the range the node's values had (so the ops reading it stay in their domains).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

import torch

from e2e.framework.result import Result
from e2e.framework.signature import Signature
from e2e.framework.testutils import TestUtils, seed_for
from e2e.generate.boundary import BOUNDARY, UNIFORM
from e2e.generate.grow import invalid
from e2e.generate.ops import CATALOGUE
from e2e.generate.program import InputSpec, Program
from e2e.generate.register import program_test
from e2e.generate.types import FREE, Domain, TensorType

# Plainer dtypes a shrink tries in place of narrower ones.
PLAINER = {"float16": "float32", "bfloat16": "float32", "int8": "int64", "int32": "int64"}


def run_program(program: Program, config_name: str, reports_dir: Path, seconds: float = 120.0) -> Result:
    """`program`'s pair on `config_name`, run by the suite's runner in a forked child."""
    from e2e.configs import load_config
    from e2e.framework.isolation import Limits
    from e2e.framework.prepared import prepare
    from e2e.framework.runner import run_pair

    prepared = prepare(program_test(program))
    return run_pair(prepared, load_config(config_name), reports_dir=reports_dir, limits=Limits(seconds))


def _used(program: Program, outputs: tuple[str, ...]) -> Program:
    """`program` with only what `outputs` need: nodes and inputs nobody reads dropped."""
    needed, nodes = set(outputs), []
    for node in reversed(program.nodes):
        if node.name in needed:
            nodes.append(node)
            needed.update(node.inputs)
    inputs = tuple(i for i in program.inputs if i.name in needed)
    return replace(program, inputs=inputs, nodes=tuple(reversed(nodes)), outputs=outputs)


def cut_nodes(
    program: Program, names: Iterable[str], domains: dict[str, Domain] | None = None, dynamic: bool = False
) -> Program:
    """`program` with the nodes `names` made inputs of their types (what reads one reads
    the input, drawn in `domains[name]`; with `dynamic`, its dims but those of size 1
    dynamic, as a computed value's may have been), and what no output needs then dropped."""

    def fresh_input(node) -> InputSpec:
        dims = tuple(d for d, size in enumerate(node.type.shape) if size > 1) if dynamic else ()
        domain = (domains or {}).get(node.name, FREE)
        return InputSpec(f"{node.name}_in", node.type, domain, dims, drawn_as(program))

    cut = {n.name: fresh_input(n) for n in program.nodes}
    cut = {name: fresh for name, fresh in cut.items() if name in set(names)}
    rename = lambda name: cut[name].name if name in cut else name  # noqa: E731
    nodes = tuple(replace(n, inputs=tuple(map(rename, n.inputs))) for n in program.nodes if n.name not in cut)
    outputs = tuple(map(rename, program.outputs))
    shrunk = replace(program, inputs=(*program.inputs, *cut.values()), nodes=nodes, outputs=outputs)
    fresh = {i.name for i in cut.values()}
    return _used(shrunk, tuple(o for o in outputs if o not in fresh) or outputs)


def drawn_as(program: Program) -> str:
    """How a new input of a shrunk `program` draws its values: at the boundaries when the
    program's inputs did (a tie the bug needs stays a tie), else uniformly."""
    return BOUNDARY if program.at_boundary else UNIFORM


def bypass(program: Program, name: str, operand: str) -> Program:
    """`program` without node `name`: what read it reads its operand `operand` (of its type)."""
    rename = lambda value: operand if value == name else value  # noqa: E731
    nodes = tuple(replace(n, inputs=tuple(map(rename, n.inputs))) for n in program.nodes if n.name != name)
    outputs = tuple(dict.fromkeys(map(rename, program.outputs)))
    computed = {n.name for n in nodes}
    return _used(replace(program, nodes=nodes), tuple(o for o in outputs if o in computed) or outputs)


def cut(program: Program, index: int) -> Program:
    """`program` with node `index` made an input of its type (what reads it reads the input)."""
    return cut_nodes(program, [program.nodes[index].name])


def alone(program: Program, index: int) -> Program:
    """Node `index` alone: its operands made inputs (a program of one op). In a program
    with dynamic dims, an operand another node computed has every dim dynamic (but those of size 1) (what the
    op saw may have been), so that a refusal of dynamic shapes shows alone too."""
    node = program.nodes[index]
    types = {i.name: i for i in program.inputs}
    for n in program.nodes:
        dynamic = tuple(d for d, size in enumerate(n.type.shape) if size > 1) if program.dynamic else ()
        types[n.name] = InputSpec(n.name, n.type, dynamic=dynamic, values=drawn_as(program))
    inputs = tuple(types[name] for name in dict.fromkeys(node.inputs))
    return replace(program, inputs=inputs, nodes=(node,), outputs=(node.name,))


def value_domains(program: Program) -> dict[str, Domain]:
    """The range each node's values have on the program's inputs: where a cut node's new
    input is drawn, so that what reads it stays in its op's domain (away from zero when
    the values were: a divisor)."""
    values = program.intermediates(program.make_inputs(TestUtils(seed_for(program.name))))
    domains = {}
    for node in program.nodes:
        value = values[node.name]
        if value.dtype == torch.bool or value.numel() == 0:
            continue
        v = value.double()
        low, high = v.min().item(), v.max().item()
        smallest = v.abs().min().item() if low < 0 < high else 0.0
        domains[node.name] = Domain(low, high, smallest)
    return domains


def fewer_ops(program: Program) -> list[Program]:
    """Candidates with fewer ops: each node's cone alone, chunks of nodes cut (halves,
    then quarters, ... then single nodes; in a program with dynamic dims, also with the
    new inputs' dims dynamic), each node bypassed (replaced by an operand of its type,
    which keeps what flows through it, dynamic dims included), the smallest first."""
    names = [n.name for n in program.nodes]
    domains = value_domains(program)
    found = [_used(program, (name,)) for name in names]
    size = len(names) // 2
    while size >= 1:
        for start in range(0, len(names), size):
            for dynamic in (False, True) if program.dynamic else (False,):
                found.append(cut_nodes(program, names[start : start + size], domains, dynamic))
        size //= 2
    types = {i.name: i.type for i in program.inputs} | {n.name: n.type for n in program.nodes}
    for node in program.nodes:
        for operand in dict.fromkeys(node.inputs):
            if types[operand] == node.type:
                found.append(bypass(program, node.name, operand))
    found = [c for c in found if c.nodes and len(c.nodes) < len(program.nodes)]
    return sorted(found, key=lambda c: (len(c.nodes), len(c.inputs)))


def retyped(program: Program, inputs: tuple[InputSpec, ...], casts: dict[str, str] | None = None) -> Program | None:
    """`program` on `inputs` of other shapes or dtypes (casts `casts`: node -> its new
    dtype attribute), every node's type inferred again through its op's spec; None when
    a spec refuses. Dynamic dims that became 1 stay static (a dim of size 1 broadcasts)."""
    types = {i.name: i.type for i in inputs}
    nodes = []
    for node in program.nodes:
        attrs = dict(node.attrs)
        if casts and node.name in casts:
            attrs["dtype"] = casts[node.name]
        try:
            kind = CATALOGUE[node.op].infer([types[name] for name in node.inputs], attrs)
        except Exception:  # noqa: BLE001 - a spec given types it was never drawn for may raise anything: refused
            return None
        if 0 in kind.shape:
            return None
        types[node.name] = kind
        nodes.append(replace(node, attrs=tuple(sorted(attrs.items())), type=kind))
    inputs = tuple(replace(i, dynamic=tuple(d for d in i.dynamic if i.type.shape[d] > 1)) for i in inputs)
    return replace(program, inputs=inputs, nodes=tuple(nodes))


def smaller_shapes(program: Program) -> Iterator[Program]:
    """Candidates with smaller inputs: each dim size (largest first) made 1, 2 or half of
    itself in every input at once (dims a broadcast ties stay equal), then one input's dim made 1."""
    sizes = sorted({s for i in program.inputs for s in i.type.shape if s > 1}, reverse=True)
    for size in sizes:
        for target in dict.fromkeys(t for t in (1, 2, size // 2) if 1 <= t < size):
            inputs = tuple(
                replace(i, type=TensorType(tuple(target if s == size else s for s in i.type.shape), i.type.dtype))
                for i in program.inputs
            )
            yield retyped(program, inputs)
    for k, spec in enumerate(program.inputs):
        for d, s in enumerate(spec.type.shape):
            if s > 1:
                shape = spec.type.shape[:d] + (1,) + spec.type.shape[d + 1 :]
                changed = replace(spec, type=TensorType(shape, spec.type.dtype))
                yield retyped(program, program.inputs[:k] + (changed,) + program.inputs[k + 1 :])


def without_dim(spec: InputSpec, dim: int) -> InputSpec:
    """`spec` without its dim `dim` (of size 1), its dynamic dims renumbered."""
    shape = spec.type.shape[:dim] + spec.type.shape[dim + 1 :]
    dynamic = tuple(d - (d > dim) for d in spec.dynamic if d != dim)
    return replace(spec, type=TensorType(shape, spec.type.dtype), dynamic=dynamic)


def fewer_dims(program: Program) -> Iterator[Program | None]:
    """Candidates of lower rank: the leading dim dropped from every input of the highest
    rank when it is 1 in each (broadcasting aligns dims from the end), then one input's
    dim of size 1 dropped. Ops whose attributes name dims refuse most (the specs' `infer`,
    then torch itself in `invalid`)."""
    top = max((i.type.rank for i in program.inputs), default=0)
    highest = [i for i in program.inputs if i.type.rank == top]
    if top > 0 and all(i.type.shape[0] == 1 for i in highest):
        yield retyped(program, tuple(without_dim(i, 0) if i.type.rank == top else i for i in program.inputs))
    for k, spec in enumerate(program.inputs):
        for d, s in enumerate(spec.type.shape):
            if s == 1:
                yield retyped(program, program.inputs[:k] + (without_dim(spec, d),) + program.inputs[k + 1 :])


def plainer_dtypes(program: Program) -> Iterator[Program]:
    """Candidates in plainer dtypes (f16/bf16 -> f32, i8/i32 -> i64): all at once, then
    each input and each cast alone."""

    def plain(spec: InputSpec) -> InputSpec:
        t = spec.type
        return replace(spec, type=TensorType(t.shape, PLAINER.get(t.dtype, t.dtype)))

    casts = {
        n.name: PLAINER[dict(n.attrs)["dtype"]]
        for n in program.nodes
        if n.op == "to" and dict(n.attrs).get("dtype") in PLAINER
    }
    narrow = [k for k, i in enumerate(program.inputs) if i.type.dtype in PLAINER]
    if narrow and casts:
        yield retyped(program, tuple(map(plain, program.inputs)), casts)
    for k in narrow:
        yield retyped(program, program.inputs[:k] + (plain(program.inputs[k]),) + program.inputs[k + 1 :])
    for name, dtype in casts.items():
        yield retyped(program, program.inputs, {name: dtype})


def candidates(program: Program) -> Iterator[Program]:
    """Smaller programs, the most promising first: fewer ops, then smaller shapes, fewer
    dims, then plainer dtypes (None where a spec refuses the new types)."""
    yield from fewer_ops(program)
    yield from smaller_shapes(program)
    yield from fewer_dims(program)
    yield from plainer_dtypes(program)


def same_bug(result: Result, signature: Signature) -> bool:
    """Whether a candidate's pair fails as the bug does (same stage, place and message)."""
    return not result.passed and result.signature == signature


def op_to_keep(signature: Signature, guilty: str | None) -> str | None:
    """The op a shrink of a bug must keep (short aten name), or None: the bug's guilty aten
    op when its signature names no op (a wrong result's `compare | values`, a crash's
    `Fatal Python error: ...`), where the signature alone would take another op's bug for it."""
    if guilty is None or signature.op or not guilty.startswith(("torch.aten.", "aten.")):
        return None
    return guilty.split("aten.", 1)[1].split(".")[0].rstrip("_") or None


def keeps_op(program: Program, op: str | None) -> bool:
    """Whether `program` still computes the guilty op `op` (a short aten name, `remainder`),
    by its catalogue name or in its torch call; True when no op is known."""
    return not op or any(op == n.op or op in n.expression() for n in program.nodes)


def size(program: Program) -> tuple[int, int, int, int]:
    """What a shrink makes smaller, in order: ops, then elements, then narrow dtypes, then dims."""
    types: list[TensorType] = [i.type for i in program.inputs] + [n.type for n in program.nodes]
    narrow = sum(t.dtype in PLAINER for t in types)
    return len(program.nodes), sum(t.numel for t in types), narrow, sum(t.rank for t in types)


def shrink(
    program: Program,
    still_fails: Callable[[Program], bool],
    seconds: float = 120.0,
) -> tuple[Program, int]:
    """The smallest program found that `still_fails`, and how many candidates were tried."""
    deadline, tried, seen = time.monotonic() + seconds, 0, {program}
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in candidates(program):
            if time.monotonic() >= deadline:
                break
            if candidate is None or candidate in seen or size(candidate) >= size(program):
                continue
            seen.add(candidate)
            if invalid(candidate) is not None:
                continue
            tried += 1
            if still_fails(candidate):
                program, progress = candidate, True
                break
    return program, tried
