"""The smallest program that still shows a bug: graph reduction on the `Program` value.

Hypothesis-style shrinking, greedy: from a failing program, try smaller candidates in
order (one output alone; a node cut, its value made a new input of the same type; then
every node no output needs dropped) and keep the first whose pair on the config fails
with the same signature, until none does or the time box ends. Each candidate runs through
the suite's runner (`e2e.framework.runner.run_pair`, in a forked child), carrying the
generated programs' oracle, so a shrink never trades a bug for torch's rounding. Then the
suite's MLIR reducer takes the smallest program (the regression test's bundle).

A program's values come from a `TestUtils` seeded by its original name, as the generator
drew them: inputs a shrink keeps keep their values; a cut node's new input is drawn after
them, in [-2, 2] (a candidate whose golden run breaks shows another signature and is not kept).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterator

from e2e.framework.result import Result
from e2e.framework.signature import Signature
from e2e.generate.program import InputSpec, Program
from e2e.generate.register import program_test


def run_program(program: Program, config_name: str, reports_dir: Path, seconds: float = 120.0) -> Result:
    """`program`'s pair on `config_name`, run by the suite's runner in a forked child."""
    from e2e.configs import load_config
    from e2e.framework.isolation import Limits
    from e2e.framework.runner import prepare, run_pair

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


def cut(program: Program, index: int) -> Program:
    """`program` with node `index` made an input of its type (what reads it reads the input)."""
    node = program.nodes[index]
    fresh = InputSpec(f"{node.name}_in", node.type)
    renamed = tuple(
        replace(n, inputs=tuple(fresh.name if i == node.name else i for i in n.inputs)) for n in program.nodes
    )
    outputs = tuple(fresh.name if o == node.name else o for o in program.outputs)
    nodes = renamed[:index] + renamed[index + 1 :]
    shrunk = replace(program, inputs=(*program.inputs, fresh), nodes=nodes, outputs=outputs)
    return _used(shrunk, tuple(o for o in shrunk.outputs if o != fresh.name) or shrunk.outputs)


def alone(program: Program, index: int) -> Program:
    """Node `index` alone: its operands made inputs (a program of one op). In a program
    with dynamic dims, an operand another node computed has every dim dynamic (but those of size 1) (what the
    op saw may have been), so that a refusal of dynamic shapes shows alone too."""
    node = program.nodes[index]
    types = {i.name: i for i in program.inputs}
    for n in program.nodes:
        dynamic = tuple(d for d, size in enumerate(n.type.shape) if size > 1) if program.dynamic else ()
        types[n.name] = InputSpec(n.name, n.type, dynamic=dynamic)
    inputs = tuple(types[name] for name in dict.fromkeys(node.inputs))
    return replace(program, inputs=inputs, nodes=(node,), outputs=(node.name,))


def candidates(program: Program) -> Iterator[Program]:
    """Smaller programs, the most promising first."""
    if len(program.outputs) > 1:
        for output in program.outputs:
            yield _used(program, (output,))
    for index in range(len(program.nodes)):
        if len(program.nodes) > 1:
            yield cut(program, index)


def same_bug(result: Result, signature: str) -> bool:
    """Whether a candidate's pair fails as the bug does (same stage, place and message)."""
    if result.passed or not result.signature:
        return False
    return Signature.parse(result.signature) == Signature.parse(signature)


def shrink(
    program: Program,
    still_fails: Callable[[Program], bool],
    seconds: float = 120.0,
) -> tuple[Program, int]:
    """The smallest program found that `still_fails`, and how many candidates were tried."""
    deadline, tried = time.monotonic() + seconds, 0
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for candidate in candidates(program):
            if time.monotonic() >= deadline:
                break
            if not candidate.nodes or len(candidate.nodes) >= len(program.nodes) and candidate == program:
                continue
            tried += 1
            if still_fails(candidate):
                program, progress = candidate, True
                break
    return program, tried
