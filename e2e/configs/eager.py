"""`eager`: run the native module op by op; every aten op is compiled alone (linalg) and
executed on the RefBackend. A pair passes only if its outputs match and no op that
computes values fell back to PyTorch (view and metadata ops stay native by design:
`compiler.frontends.eager_ops`). A fallback fails the pair in the fallback's stage, with
the op overload in its signature and the single op's IR as the saved IR.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from compiler.backend_compile import compile_torch_backend_ir
from compiler.frontends.eager_mode import EagerSession, eager_mode, from_eager, to_eager
from compiler.frontends.eager_ops import can_decompose
from compiler.stages import Snapshots, StageError, module_text, parse_module, run_stage
from compiler.toolchain import Toolchain, toolchain
from e2e.framework.trace import Trace, TraceItem, clone_tree


@dataclass
class EagerProgram:
    session: EagerSession
    module: object
    snapshots: Snapshots
    notes: list[str] = field(default_factory=list)
    rehearsal: object = None  # a second copy of the module, for `EagerSession.compile_ahead`

    def close(self) -> None:
        self.session.close()


@dataclass(frozen=True)
class EagerConfig:
    name: str = "eager"
    backend: str = "linalg"

    def toolchain(self) -> Toolchain:
        """Frontend and per-stage pipelines, for replaying this config's failures."""
        return toolchain("eager", self.backend)

    def warm_up(self) -> None:
        """The first op compiles of a process (fake tensors, the FX importer, the pass
        pipelines, the JIT, the decomposition table): 1.4 s that every test host forked
        before it would pay again (`benchmarks/eager_compile.py`)."""
        session = EagerSession(self.backend, opt_level=0)
        try:
            x = to_eager(torch.rand(3, 3), session)
            from_eager(torch.tanh(x @ x.t()).sum(0) + 1)
            can_decompose(torch.ops.aten.mm.default)
        finally:
            session.close()

    def host_paid_warm_up(self, result) -> bool:
        """Every pair compiles ops in its host (or JITs those of the compiled-op cache)."""
        return True

    def preload(self) -> None:
        """What every session imports: a FakeTensorMode imports torch._dynamo (0.9 s)."""
        from torch._subclasses.fake_tensor import FakeTensorMode

        FakeTensorMode()

    def compile(self, prepared, snapshots: Snapshots) -> EagerProgram:
        # Ops are compiled as they are dispatched, or together ahead of the run (`run`). At
        # O0: a test calls each op once or twice, so the JIT's time is most of the run. Ops
        # lowered by an earlier test host or run come from the program cache: JIT only.
        session = EagerSession(self.backend, opt_level=0, lowered_ops=prepared.program_cache)
        program = EagerProgram(session, to_eager(copy.deepcopy(prepared.module), session), snapshots)
        if _state_bytes(prepared.module) <= REHEARSAL_STATE_BYTES:
            program.rehearsal = to_eager(copy.deepcopy(prepared.module), session)
        return program

    def run(self, program: EagerProgram, golden: Trace) -> Trace:
        if program.rehearsal is not None:
            # The test's calls on native kernels first, on copies: the ops they compile are
            # then compiled together, one lowering and one JIT for all (`compile_ahead`).
            rehearsal, program.rehearsal = program.rehearsal, None
            program.session.compile_ahead(lambda: _calls(rehearsal, golden, program.session))
        trace = _calls(program.module, golden, program.session)
        report = program.session.report
        if report.loaded:
            loaded, compiled = sum(report.loaded.values()), sum(report.compiles.values())
            program.notes.append(
                f"program cache: {loaded} of {loaded + compiled} op programs lowered by an earlier "
                "test host or run (JIT-compiled only)"
            )
        fallbacks = report.fallbacks
        if fallbacks:
            raise self._fallback_error(fallbacks, program.snapshots)
        return trace

    def _fallback_error(self, fallbacks, snapshots: Snapshots) -> StageError:
        """The first fallback as a failure, its single op recompiled stage by stage.

        The replay writes that op's stage snapshots where every config writes them,
        so the failure reads and reduces like one of an FX config.
        """
        first = fallbacks[0]
        summary = [f"{first.op} fell back to PyTorch", *(f.describe() for f in fallbacks)]
        replayed = _replay(first.torch_ir, self.backend, snapshots) if first.torch_ir else None
        if replayed is not None:
            return StageError(
                replayed.stage,
                replayed.message,
                failing_pass=replayed.failing_pass,
                diagnostics=[replayed.message, *summary],
                input_ir=replayed.input_ir,
            )
        return StageError(
            first.stage,
            f"{first.op} fell back to PyTorch: {first.message}",
            failing_pass=first.failing_pass,
            diagnostics=summary,
            input_ir=first.failing_ir or first.torch_ir,
        )


def _calls(module, golden: Trace, session: EagerSession) -> Trace:
    """The golden trace's calls on `module` (wrapped for `session`), in eager mode."""
    trace = []
    with eager_mode(session):
        for item in golden:
            inputs = to_eager(clone_tree(item.inputs), session)
            outputs = getattr(module, item.method)(*inputs)
            trace.append(TraceItem(item.method, item.inputs, from_eager(outputs)))
    return trace


# A rehearsal runs on a copy of the module: above this much state (parameters, buffers), a
# model zoo's, its ops are compiled as they come instead.
REHEARSAL_STATE_BYTES = 64 << 20


def _state_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in module.state_dict(keep_vars=True).values())


def _replay(torch_ir: str, backend: str, snapshots: Snapshots) -> StageError | None:
    try:
        module = parse_module(torch_ir)
        module = run_stage(module, "torch-backend", toolchain("eager", backend).to_torch_backend, snapshots)
        compile_torch_backend_ir(module_text(module), backend, snapshots=snapshots).close()
    except StageError as error:
        return error
    return None


CONFIG = EagerConfig()
CONFIGS = {CONFIG.name: CONFIG}  # its registration (`e2e.configs.BUILT_IN`)
