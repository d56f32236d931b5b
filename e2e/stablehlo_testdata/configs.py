"""The configs that run StableHLO testdata programs: one per executor, each given the
program as StableHLO (`load_executor(name, input="stablehlo")`).

Stages: `import` (parse in the project's context, then `inline` and `symbol-dce`: the
programs call private helpers), `lower` (the executor's own: the RefBackend runs
`BACKENDS["stablehlo"]`'s conversion to linalg, exactly what the `stablehlo` config runs,
then LLVM; a runtime compiles for itself), `execute`, `compare` (each result by its
check's own semantics, `program.compare`; on a pass the trace handed back is the golden
one, so the suite's dtype table never overrides a check).

    --config e2e.stablehlo_testdata.configs:REFBACKEND     # testdata-refbackend
    --config e2e.stablehlo_testdata.configs:INTERP         # testdata-interp
    --config e2e.stablehlo_testdata.configs:XLA            # testdata-xla
    --config e2e.stablehlo_testdata.configs:IREE           # testdata-iree
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from torch_mlir import ir

from compiler.executors import load_executor
from compiler.stages import Snapshots, StageError, format_diagnostics, new_context, parse_module, run_stage
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace
from e2e.stablehlo_testdata.program import ELEMENTS, compare

PREPARE = ("inline", "symbol-dce")


@dataclass
class TestdataCompiled:
    program: Any
    checks: list
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TestdataConfig:
    name: str
    executor: str  # a key of compiler.executors.EXECUTORS
    model_formats: tuple[str, ...] = ("stablehlo",)

    def compile(self, prepared, snapshots: Snapshots) -> TestdataCompiled:
        executor = load_executor(self.executor, input="stablehlo")
        if missing := executor.missing():
            raise NotApplicable(f"the {self.name} config needs {executor.title}: {missing}")
        program = prepared.module
        snapshots.enter("import")
        try:
            module = parse_module(program.stablehlo_program, new_context())
        except ir.MLIRError as error:
            diagnostics = format_diagnostics(error)
            raise StageError("import", diagnostics[0], diagnostics=diagnostics) from None
        run_stage(module, "import", PREPARE, snapshots)
        dtypes = [ELEMENTS[element][0] for element in program.result_elements]
        snapshots.enter("lower")
        compiled = executor.program_for(module, dtypes, snapshots)
        return TestdataCompiled(compiled, program.checks)

    def run(self, compiled: TestdataCompiled, golden: Trace) -> Trace:
        try:
            outputs = list(compiled.program())
        finally:
            compiled.program.close()
        expected = golden[0].outputs if isinstance(golden[0].outputs, tuple) else (golden[0].outputs,)
        if len(outputs) != len(expected):
            raise StageError("execute", f"{len(outputs)} results; the program checks {len(expected)}")
        for index, (check, actual, wanted) in enumerate(zip(compiled.checks, outputs, expected)):
            if (problem := compare(check, actual, wanted)) is not None:
                raise StageError("compare", f"check.{check.kind} of result {index}: {problem}")
        return copy.deepcopy(golden)  # every check passed: the check, not the dtype table, decides


REFBACKEND = TestdataConfig("testdata-refbackend", "refbackend")
INTERP = TestdataConfig("testdata-interp", "interp")
XLA = TestdataConfig("testdata-xla", "xla")
IREE = TestdataConfig("testdata-iree", "iree")
