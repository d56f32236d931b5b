"""StableHLO testdata programs as e2e tests: one test per program, named by its path below
the corpus (`stablehlo/<path without .mlir>`).

A test's module carries the rewritten program (`stablehlo_program`, see `program.py`)
and its checks; natively it returns the program's expected values, which become the
golden trace. Only the configs of `e2e/stablehlo_testdata/configs.py` take it
(`model_format` "stablehlo"); a program that cannot be taken is registered with its
skip reason.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import torch

from e2e.framework.registry import Test, register
from e2e.stablehlo_testdata.program import NotTaken, Program, read_program

ENV = "STABLEHLO_TESTDATA"
OPTION = "--stablehlo-testdata"
# The shared copy beside the checkout: <checkout>/../shared/corpora/stablehlo-testdata.
DEFAULT_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "corpora" / "stablehlo-testdata"
CI_EVERY = 20  # the `stablehlo_testdata_ci` slice: every 20th program by sorted path
MARK, CI_MARK = "stablehlo_testdata", "stablehlo_testdata_ci"
PREFIX = "stablehlo/"


def corpus_dir() -> Path | None:
    """The directory `--stablehlo-testdata` (or $STABLEHLO_TESTDATA) names; else the shared
    copy if it exists; else None."""
    given = os.environ.get(ENV)
    if given:
        return Path(given)
    return DEFAULT_DIR if DEFAULT_DIR.is_dir() else None


def testdata_root(root: Path) -> Path:
    """The testdata directory `root` names: itself, or a checkout of openxla/stablehlo's
    `stablehlo/testdata` when present."""
    return root / "stablehlo" / "testdata" if (root / "stablehlo" / "testdata").is_dir() else root


def program_paths(root: Path) -> list[Path]:
    """Every `.mlir` below `root` (see `testdata_root`), sorted by relative path."""
    root = testdata_root(root)
    return sorted(root.rglob("*.mlir"), key=lambda p: p.relative_to(root).as_posix())


def program_path(root: Path, test: str) -> Path:
    """The file of the test named `test` (`stablehlo/abs_float32_20_20`) below `root`."""
    return testdata_root(root) / (test.removeprefix(PREFIX) + ".mlir")


class StablehloProgram(torch.nn.Module):
    """A program with its expected values: what the testdata configs compile, and, run
    natively, the values its checks compare with."""

    def __init__(self, program: Program):
        super().__init__()
        self.stablehlo_program = program.text
        self.checks = program.checks
        self.result_elements = program.result_elements
        self.expected = program.expected

    def forward(self):
        outputs = tuple(tensor.clone() for tensor in self.expected)
        return outputs[0] if len(outputs) == 1 else outputs


def _factory(program: Program):
    return lambda: StablehloProgram(program)


def _invoke(module, tu) -> None:
    module.forward()


def register_programs(root: Path, source: str) -> Counter:
    """Register every program below `root`; returns how many were skipped with each reason."""
    paths = program_paths(root)
    base = testdata_root(root)
    skipped: Counter = Counter()
    for index, path in enumerate(paths):
        name = path.relative_to(base).as_posix().removesuffix(".mlir")
        reason, program = None, None
        try:
            program = read_program(path, name)
        except NotTaken as error:
            reason = str(error)
            skipped[reason] += 1
        marks = (MARK, CI_MARK) if index % CI_EVERY == 0 else (MARK,)
        register(
            Test(
                PREFIX + name,
                _factory(program) if program else (lambda: torch.nn.Identity()),
                _invoke,
                source=f"{path} (StableHLO testdata, via {source})",
                defined_in=str(path),
                marks=marks,
                model_format="stablehlo",
                skip_reason=None if reason is None else f"StableHLO testdata program not taken: {reason}",
            )
        )
    return skipped
