"""Generated programs as suite tests: registered through the registry like any other test,
so they run on every config through the suite's own machinery."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Sequence

from e2e.framework.registry import Test, annotate_args, register
from e2e.framework.run_record import write_json_atomic
from e2e.framework.testutils import TestUtils, seed_for
from e2e.generate.grow import generate
from e2e.generate.oracle import Float64Oracle, SpecRefusal
from e2e.generate.program import Program
from e2e.generate.ties import TieJudge
from e2e.generate.types import torch_dtype

# `pytest --generate N --generate-seed S` sets this to "S:N" before any suite file is
# loaded (forked probes, hosts and xdist workers inherit it); e2e/generate/suite.py reads it.
ENV = "E2E_GENERATE"
# The pytest process that parsed the option grows those programs once and saves them here
# (`save_programs`): its xdist workers, their import probes and test hosts, and the reducer
# read them (`programs_for`) instead of each growing all N again (about 20 ms a program).
PROGRAMS_ENV = "E2E_GENERATE_PROGRAMS"
PROGRAMS_FILE = "programs.json"  # in the run's reports directory
SUITE_FILE = Path(__file__).with_name("suite.py")


def program_test(program: Program, name: str | None = None) -> Test:
    """`program` as a suite test named `name` (default its own), not registered: its module
    class, its dynamic dims as `-1` annotations, its inputs drawn as the generator drew them
    (a `TestUtils` seeded by the program's own name, whatever the test is called), and the
    generated programs' oracle: the spec-refusal, tie-contract and float64 distance checks (docs/fuzz.md).
    A boundary program's test calls `forward` twice: on its uniform twin's inputs (trace item
    #0: what the seed's uniform program finds, a precision bug continuous values show), then
    on its own (#1: what only ties, zeros and NaN show), one compile for both."""
    module_class = program.module_class(name)
    annotations = program.annotations()
    if annotations:
        types = [i.type for i in program.inputs]
        arguments = [(shape, torch_dtype(t.dtype), True) for shape, t in zip(annotations, types)]
        module_class.forward = annotate_args([None, *arguments])(module_class.forward)

    def invoke(module, tu: TestUtils) -> None:
        if program.at_boundary:
            module.forward(*program.uniform_twin().make_inputs(TestUtils(seed_for(program.name))))
        module.forward(*program.make_inputs(tu))

    return Test(
        name or program.name,
        module_class,
        invoke,
        program.tolerance,
        source=f"{SUITE_FILE}:1",
        defined_in=str(SUITE_FILE),
        explainers=(SpecRefusal(), Float64Oracle(TieJudge(program))),
        test_utils=lambda _seed: TestUtils(seed_for(program.name)),
    )


def register_program(program: Program) -> str:
    """Register `program` as the test `program.name` (`program_test`); its name."""
    register(program_test(program))
    return program.name


def register_programs(seeds: Iterable[int]) -> list[str]:
    """Register the program of each seed (see `generate`, `programs_for`); the test names, in seed order."""
    return [register_program(program) for program in programs_for(list(seeds))]


def save_programs(seeds: Sequence[int], path: Path) -> None:
    """Grow the programs of `seeds` and save them at `path`, named by `$E2E_GENERATE_PROGRAMS`
    for this process's children (workers, probes, hosts), which then read them back."""
    programs = [generate(seed).to_json() for seed in seeds]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"seeds": list(seeds), "programs": programs})
    os.environ[PROGRAMS_ENV] = str(path)


def programs_for(seeds: Sequence[int]) -> list[Program]:
    """The programs of `seeds`: read from `$E2E_GENERATE_PROGRAMS` when it holds exactly these
    seeds (JSON rebuilds a program exactly), else grown here (`generate`)."""
    saved = saved_programs()
    if saved is not None and saved[0] == list(seeds):
        return [Program.from_json(text) for text in saved[1]]
    return [generate(seed) for seed in seeds]


def saved_programs() -> tuple[list[int], list[str]] | None:
    """(seeds, programs as JSON) of the file `$E2E_GENERATE_PROGRAMS` names, or None (unset,
    gone, unreadable: the caller grows them)."""
    path = os.environ.get(PROGRAMS_ENV)
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text())
        return [int(seed) for seed in data["seeds"]], list(data["programs"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
