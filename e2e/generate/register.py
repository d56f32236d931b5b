"""Generated programs as suite tests: registered through the registry like any other test,
so they run on every config through the suite's own machinery."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from e2e.framework.registry import op_test
from e2e.generate.grow import generate
from e2e.generate.program import Program

# `pytest --generate N --generate-seed S` sets this to "S:N" before any suite file is
# loaded (forked probes, hosts and xdist workers inherit it); e2e/generate/suite.py reads it.
ENV = "E2E_GENERATE"
SUITE_FILE = Path(__file__).with_name("suite.py")


def register_program(program: Program) -> str:
    """Register `program` as the test `program.name`; its name."""
    op_test(program.name, program.function(), program.make_inputs, dynamic=program.annotations())
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
