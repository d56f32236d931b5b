"""The configs that run StableHLO testdata programs: one per executor, each given the
program as StableHLO (`load_executor(name, input="stablehlo")`).

Stages: `import` (parse in the project's context, then `inline` and `symbol-dce`: the
programs call private helpers; `chlo` ops first decomposed into StableHLO, `decompose_chlo`),
`lower` (the executor's own: the RefBackend runs
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
import re
from dataclasses import dataclass, field
from typing import Any

from torch_mlir import ir

from compiler.executors import INSTALL_RUNTIMES, load_executor
from compiler.frontends import ReducerFacts
from compiler.stages import Snapshots, StageError, format_diagnostics, new_context, parse_module, run_stage
from e2e.framework.result import NotApplicable
from e2e.framework.trace import Trace
from e2e.stablehlo_testdata.program import ELEMENTS, compare

PREPARE = ("inline", "symbol-dce")
CHLO_OP = re.compile(r"\bchlo\.\w+")


def decompose_chlo(text: str, context: ir.Context) -> ir.Module:
    """The program with its `chlo` ops decomposed into StableHLO, in `context`.

    torch-mlir's build has no `chlo` dialect (its context cannot parse the 115 programs
    that use one), jaxlib's has: StableHLO's own `chlo-legalize-to-stablehlo` runs there,
    and the result crosses as a portable artifact at jaxlib's StableHLO version. A failure
    is stage `import`'s."""
    try:
        from jax.interpreters.mlir import make_ir_context
        from jaxlib.mlir import ir as jax_ir
        from jaxlib.mlir import passmanager
        from jaxlib.mlir.dialects import stablehlo
    except ImportError:
        raise StageError(
            "import", f"chlo ops need jaxlib's chlo-legalize-to-stablehlo (torch-mlir has no chlo): {INSTALL_RUNTIMES}"
        ) from None
    from torch_mlir._mlir_libs import _stablehlo

    stablehlo.register_stablehlo_passes()
    with make_ir_context():
        try:
            module = jax_ir.Module.parse(text)
            passmanager.PassManager.parse("builtin.module(func.func(chlo-legalize-to-stablehlo))").run(module.operation)
            decomposed = str(module)
        except jax_ir.MLIRError as error:
            raise StageError("import", f"chlo-legalize-to-stablehlo (jaxlib): {error}") from None
    artifact = stablehlo.serialize_portable_artifact_str(decomposed, stablehlo.get_current_version())
    return _stablehlo.deserialize_portable_artifact(context, artifact)


@dataclass
class TestdataCompiled:
    program: Any
    checks: list
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GivenStableHlo:
    """The testdata's "frontend": the program is given as StableHLO (no graph to search)."""

    name = "stablehlo"
    reducer = ReducerFacts(fx_graph_search=False)


@dataclass(frozen=True)
class TestdataToolchain:
    """What the reducer replays of a testdata config (`e2e.reducer.localize.stage_pipelines`):
    stage `lower`, the executor's own entries, and `execute` (`Executor.execute_entries`: an
    execute crash replays on the executor that crashed). No frontend or backend pipeline:
    the program is StableHLO already, and a failure in `import` is not reduced (the program
    is its own reproducer)."""

    executor_name: str
    frontend: GivenStableHlo = GivenStableHlo()

    @property
    def executor(self):
        return load_executor(self.executor_name, input="stablehlo")

    @property
    def stages(self) -> dict[str, tuple[str, ...]]:
        executor = self.executor
        return {"lower": executor.lower_entries(), "execute": executor.execute_entries()}


@dataclass(frozen=True)
class TestdataConfig:
    name: str
    executor: str  # a key of compiler.executors.EXECUTORS
    model_formats: tuple[str, ...] = ("stablehlo",)

    def toolchain(self) -> TestdataToolchain:
        return TestdataToolchain(self.executor)

    def compile(self, prepared, snapshots: Snapshots) -> TestdataCompiled:
        executor = load_executor(self.executor, input="stablehlo")
        if missing := executor.missing():
            raise NotApplicable(f"the {self.name} config needs {executor.title}: {missing}")
        program = prepared.module
        snapshots.enter("import")
        text = program.stablehlo_program
        try:
            module = decompose_chlo(text, new_context()) if CHLO_OP.search(text) else parse_module(text, new_context())
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
