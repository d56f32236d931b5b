"""Generated programs as suite tests: registered through the registry like any other test,
so they run on every config through the suite's own machinery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from e2e.framework.registry import Test, annotate_args, register
from e2e.framework.testutils import TestUtils, seed_for
from e2e.generate.grow import generate
from e2e.generate.oracle import GENERATED_EXPLAINERS
from e2e.generate.program import Program
from e2e.generate.types import torch_dtype

# `pytest --generate N --generate-seed S` sets this to "S:N" before any suite file is
# loaded (forked probes, hosts and xdist workers inherit it); e2e/generate/suite.py reads it.
ENV = "E2E_GENERATE"
SUITE_FILE = Path(__file__).with_name("suite.py")


def program_test(program: Program, name: str | None = None) -> Test:
    """`program` as a suite test named `name` (default its own), not registered: its module
    class, its dynamic dims as `-1` annotations, its inputs drawn as the generator drew them
    (a `TestUtils` seeded by the program's own name, whatever the test is called), and the
    generated programs' oracle: the float64 distance and spec-refusal checks (docs/fuzz.md)."""
    module_class = program.module_class(name)
    annotations = program.annotations()
    if annotations:
        types = [i.type for i in program.inputs]
        arguments = [(shape, torch_dtype(t.dtype), True) for shape, t in zip(annotations, types)]
        module_class.forward = annotate_args([None, *arguments])(module_class.forward)

    def invoke(module, tu: TestUtils) -> None:
        module.forward(*program.make_inputs(tu))

    return Test(
        name or program.name,
        module_class,
        invoke,
        program.tolerance,
        source=f"{SUITE_FILE}:1",
        defined_in=str(SUITE_FILE),
        explainers=GENERATED_EXPLAINERS,
        test_utils=lambda _seed: TestUtils(seed_for(program.name)),
    )


def register_program(program: Program) -> str:
    """Register `program` as the test `program.name` (`program_test`); its name."""
    register(program_test(program))
    return program.name


def register_programs(seeds: Iterable[int]) -> list[str]:
    """Register the program of each seed (see `generate`); the test names, in seed order."""
    return [register_program(generate(seed)) for seed in seeds]


def seeds_from_env() -> range:
    """The seeds `$E2E_GENERATE` ("S:N": S..S+N-1) asks for; empty when unset."""
    text = os.environ.get(ENV, "")
    if not text:
        return range(0)
    start, _, count = text.partition(":")
    return range(int(start), int(start) + int(count or 1))


def seed_of(test_name: str) -> int | None:
    """The seed of a generated test's name (`Gen_<seed>`), or None."""
    prefix, _, seed = test_name.partition("_")
    return int(seed) if prefix == "Gen" and seed.lstrip("-").isdigit() else None
