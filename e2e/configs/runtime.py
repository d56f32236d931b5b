"""The runtime configs: torch-mlir's output run on a real runtime, named `<backend>@<executor>`.

| config | backend IR | runs on | RefBackend twin |
|---|---|---|---|
| `tosa@tosa-ref` | TOSA | the TOSA reference model (`tosa-tools`) | `tosa` |
| `stablehlo@xla` | StableHLO | XLA's CPU client (jax) | `stablehlo` |
| `stablehlo@interp` | StableHLO | StableHLO's reference interpreter (jaxlib) | `stablehlo` |
| `linalg@iree` | linalg-on-tensors | IREE llvm-cpu | `linalg` |
| `torch@iree` | raw torch IR (IREE's own torch input path) | IREE llvm-cpu | `linalg` |
| `onnx@iree` | raw torch-onnx IR of the exported model (IREE's own ONNX input path) | IREE llvm-cpu | `onnx` |

Each pair's explainer (`TwinVerdict`, asked by the runner after it judged) also compiles the
same lowered program on the RefBackend (its *twin*) and runs it. When exactly one of them
matches torch, or neither, the Result's `verdict` field says which side the bug is on (and
`verdict_reason` says why, in words): a runtime-side bug (the twin runs the same IR
right), a RefBackend-side one (the runtime runs it right: look at `<backend>` -> linalg or
the RefBackend, not at torch -> `<backend>`), or one in the lowered IR itself (both wrong).
An executor that computes what its IR's spec says (`by_the_spec`: StableHLO's reference
interpreter) turns a runtime-side wrong result around: the program is wrong by the spec.
A runtime that is not installed makes its pairs skip, naming the install command.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from compiler.executors import RuntimeExecutor, executor_class
from compiler.frontends import FRONTENDS, frontend_class
from compiler.stages import Snapshots, StageError
from compiler.toolchain import TORCH_INPUT
from e2e.configs.pipeline import CONFIGS as PIPELINE_CONFIGS
from e2e.configs.pipeline import PipelineConfig, run_programs
from e2e.configs.runtime_bundle import write_native_bundle
from e2e.framework import isolation
from e2e.framework.compare import compare_traces
from e2e.framework.judge import Explainer, Explanation, Outcome
from e2e.framework.registry import Tolerance
from e2e.framework.result import BOTH_WRONG, REFBACKEND_SIDE, RUNTIME_SIDE
from e2e.framework.trace import Trace

TWIN_TIMEOUT = 120.0  # seconds for the twin's compile and run


class Departs(enum.Enum):
    """How one side's run of the shared program departed from torch; the value words it."""

    WRONG_RESULTS = "gives wrong results ({})"
    FAILS = "fails in stage {}"
    RAISED = "raised: {}"
    ENDED = "ended abnormally ({})"


@dataclass(frozen=True)
class Departure:
    """What the runtime or its RefBackend twin did instead of matching torch: `how`, and the
    detail its words carry (the mismatch, the stage and its error, how the process ended)."""

    how: Departs
    detail: str

    def __str__(self) -> str:
        return self.how.value.format(self.detail)


def twin_outcome(twin_config: PipelineConfig, prepared, golden: Trace) -> Departure | None:
    """None when the RefBackend twin matches torch; else what it did. It compiles and runs in a
    forked child: a twin that crashes (a RefBackend miscompile reading garbage) cannot take
    the runtime's pair down with it."""

    def compile_run_compare() -> Departure | None:
        try:
            twin = twin_config.compile(prepared, Snapshots())
            try:
                mismatch = compare_traces(golden, run_programs(twin, golden), twin.tolerance)
            finally:
                twin.close()
        except StageError as error:
            return Departure(Departs.FAILS, f"{error.stage}: {error.message.splitlines()[0][:300]}")
        if mismatch is None:
            return None
        return Departure(Departs.WRONG_RESULTS, f"{mismatch.kind} mismatch: {str(mismatch)[:300]}")

    outcome = isolation.run_forked(compile_run_compare, timeout=TWIN_TIMEOUT)
    if outcome is None or isinstance(outcome, Departure):
        return outcome
    if isinstance(outcome, isolation.Raised):
        return Departure(Departs.RAISED, outcome.traceback.strip().splitlines()[-1][:300])
    return Departure(Departs.ENDED, f"{type(outcome).__name__}: {getattr(outcome, 'reason', '')}")


class OnRuntime:
    """A config's compile and run on a real runtime, explained beside its RefBackend twin.
    Mixed into `PipelineConfig`, which compiles for the executor it names and runs what it
    compiled; `twin` names the RefBackend config that compiles the same IR."""

    twin: str

    @property
    def runtime(self) -> str:
        return executor_class(self.executor).title

    @property
    def ir_name(self) -> str:
        chain = self.toolchain()
        return chain.frontend.imported_ir_words if chain.backend == TORCH_INPUT else chain.executor_input

    def _raw_conversion(self) -> str | None:
        """The conversion of the frontend's own imported IR to torch (ONNX's), when the
        executor is handed that IR: each side then runs its own copy of it."""
        chain = self.toolchain()
        return chain.frontend.raw_conversion if chain.backend == TORCH_INPUT else None

    def explainers(self) -> tuple[Explainer, ...]:
        return (*super().explainers(), TwinVerdict(self), NativeReproducer(self))

    def verdict(self, runtime: Departure | None, twin: Departure | None) -> Explanation | None:
        """Which of the runtime and the RefBackend twin matches torch on the same program (None: both)."""
        same = f"the same {self.ir_name} IR"
        if runtime is None and twin is None:
            return None
        if twin is None:
            kind = RUNTIME_SIDE
            text = (
                f"verdict: {RUNTIME_SIDE} ({self.runtime}): the RefBackend twin `{self.twin}` runs {same} and matches "
                f"torch; {self.runtime} {runtime}"
            )
            if runtime.how is Departs.WRONG_RESULTS and self.toolchain().executor.by_the_spec:
                text += (
                    f": by the spec, {self._produced_by()} emitted a wrong program, which the twin's lowering departs "
                    f"from as torch does (or {self.runtime} is wrong)"
                )
        elif runtime is None:
            kind = REFBACKEND_SIDE
            below = "linalg -> LLVM" if self.backend in ("linalg", TORCH_INPUT) else f"{self.backend} -> linalg -> LLVM"
            if (conversion := self._raw_conversion()) is not None:
                below = f"{conversion}, the torch backend, linalg -> LLVM"
            text = (
                f"verdict: {REFBACKEND_SIDE}: {self.runtime} runs {same} and matches torch; the RefBackend twin "
                f"`{self.twin}` {twin}: look at {below} or the RefBackend, not at {self._produced_by()}"
            )
        else:
            kind = BOTH_WRONG
            text = (
                f"verdict: {BOTH_WRONG}: {self.runtime} {runtime}, and the RefBackend twin `{self.twin}` {twin}: "
                f"look at what produced {same} ({self._produced_by()}){self._shared_below()}, or both executors"
            )
        return Explanation([text], verdict=kind, verdict_reason=text)

    def _produced_by(self) -> str:
        return self.toolchain().frontend.producer(self.ir_name)

    def _shared_below(self) -> str:
        """What both executors run of their own below the shared IR (each its own copy)."""
        if (conversion := self._raw_conversion()) is not None:
            return f", at {conversion} (each runs its own)"
        return ""


@dataclass(frozen=True)
class TwinVerdict:
    """The explainer (`e2e.framework.judge`) of a runtime pair: the same program compiled and run on
    the RefBackend twin says which side a failure, or the twin's own failure, is on."""

    config: OnRuntime

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.passed:
            runtime = None
        elif outcome.mismatch is not None:
            runtime = Departure(Departs.WRONG_RESULTS, f"{outcome.mismatch.kind} mismatch")
        elif outcome.stage in ("lower", "execute"):  # the runtime refused or failed what torch-mlir produced
            runtime = Departure(Departs.FAILS, outcome.stage)
        else:
            return None  # failed before the two split
        return self.config.verdict(runtime, twin_outcome(self.config.twin_config(), prepared, prepared.golden))


@dataclass(frozen=True)
class NativeReproducer:
    """The runtime's own reproducer of a program it ran and failed or got wrong: the failing
    call's program, inputs and expected outputs in the runtime's own terms."""

    config: OnRuntime

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.ir_dir is None or outcome.artifact is None or outcome.stage not in ("execute", "compare"):
            return None
        runtime = self.config.runtime
        if outcome.mismatch is not None:
            failure, call = f"{runtime} gives wrong results: {outcome.mismatch}", outcome.mismatch.call
        else:
            failure, call = f"{runtime} fails in stage {outcome.stage}: {_message(outcome.error)}", None
        item = prepared.golden[call or 0]
        program, _ = outcome.artifact.program_for(item.method, item.inputs)
        tolerance = prepared.test.tolerance or Tolerance(1e-4, 1e-5)
        try:
            readme = write_native_bundle(
                outcome.ir_dir,
                getattr(program, "program", program),
                item.inputs,
                item.outputs,
                runtime=runtime,
                failure=failure,
                rtol=tolerance.rtol,
                atol=tolerance.atol,
            )
        except Exception as error:  # the failure is recorded either way
            return Explanation([f"native reproducer: not written: {type(error).__name__}: {error}"[:300]])
        return Explanation([f"native reproducer ({runtime}'s own tools): {readme}"])


def _message(error: BaseException | None) -> str:
    return error.message if isinstance(error, StageError) else f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class RuntimeConfig(OnRuntime, PipelineConfig):
    twin: str = ""  # the RefBackend config that compiles the same IR

    def twin_config(self) -> PipelineConfig:
        """The twin, compiling the static shapes where this config's runtime takes no others."""
        static = getattr(self.toolchain().executor, "static_only", False)
        twin = PIPELINE_CONFIGS[self.twin]
        return PipelineConfig(twin.name, twin.frontend, twin.backend, static=static, model_formats=twin.model_formats)


def runtime_config(name: str) -> OnRuntime:
    """The config `<input>@<executor>`: the IR `input` (linalg, tosa or stablehlo from the FX
    frontend; `torch`: raw torch IR; `onnx`: the exported ONNX model) run on a registered
    runtime executor (`compiler.executors`), beside the RefBackend twin that runs the same IR.
    A new runtime needs its executor's registration, nothing here."""
    given, _, executor = name.partition("@")
    cls = executor_class(executor)  # an unknown executor: ValueError, naming the known ones
    if not issubclass(cls, RuntimeExecutor) or given not in cls.accepts:
        accepted = ", ".join(cls.accepts) if issubclass(cls, RuntimeExecutor) else "nothing: it is not a runtime"
        raise ValueError(f"config {name!r}: executor {executor!r} accepts {accepted}")
    if own_ir_of(given):  # a frontend's own IR (ONNX's), handed over as imported
        return RuntimeConfig(name, given, TORCH_INPUT, executor, twin=given, **_as(PIPELINE_CONFIGS[given]))
    twin = twin_of(given)
    return RuntimeConfig(name, "fx", given, executor, twin=twin, **_as(PIPELINE_CONFIGS[twin]))


def own_ir_of(given: str) -> bool:
    """Whether the input `given` of a config `<given>@<executor>` is the IR a frontend of that
    name imports as its own (the onnx frontend's torch-onnx IR): then that frontend, and its
    config as the twin, compile the pair."""
    return given in FRONTENDS and frontend_class(given).imported_ir == given


def twin_of(given: str) -> str:
    """The RefBackend config that compiles the same IR as the configs `<given>@...`: a
    frontend's own for its own IR, linalg for raw torch IR, else the backend's config."""
    if own_ir_of(given):
        return given
    return "linalg" if given == TORCH_INPUT else given


def _as(twin: PipelineConfig) -> dict:
    """What a runtime config takes over from its twin: the models it compiles, its explainers."""
    return {"model_formats": twin.model_formats, "explain_with": twin.explain_with}


# The runtime configs this project documents and records xfail sets for; any other
# `<input>@<executor>` of a registered runtime loads the same way.
CONFIGS: dict[str, OnRuntime] = {
    name: runtime_config(name)
    for name in ("tosa@tosa-ref", "stablehlo@xla", "stablehlo@interp", "linalg@iree", "torch@iree", "onnx@iree")
}
