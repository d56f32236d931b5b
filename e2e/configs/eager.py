"""`eager`: run the native module op by op; every aten op is compiled alone (linalg) and
executed on the RefBackend. A pair passes only if its outputs match and no op that
computes values fell back to PyTorch (view and metadata ops stay native by design:
`compiler.frontends.eager_ops`). A fallback fails the pair in the fallback's stage, with
the op overload in its signature and the single op's IR as the saved IR.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from compiler.frontends.eager import EagerSession, eager_mode, from_eager, to_eager
from compiler.stages import Snapshots, StageError
from e2e.framework.trace import Trace, TraceItem, clone_tree


@dataclass
class EagerProgram:
    session: EagerSession
    module: object
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class EagerConfig:
    name: str = "eager"
    backend: str = "linalg"

    def compile(self, prepared, snapshots: Snapshots) -> EagerProgram:
        # Nothing to compile ahead: ops are compiled as they are dispatched.
        session = EagerSession(self.backend)
        return EagerProgram(session, to_eager(copy.deepcopy(prepared.module), session))

    def run(self, program: EagerProgram, golden: Trace) -> Trace:
        trace = []
        with eager_mode(program.session):
            for item in golden:
                inputs = to_eager(clone_tree(item.inputs), program.session)
                outputs = getattr(program.module, item.method)(*inputs)
                trace.append(TraceItem(item.method, item.inputs, from_eager(outputs)))
        fallbacks = program.session.report.fallbacks
        if fallbacks:
            first = fallbacks[0]
            raise StageError(
                first.stage,
                f"{first.op} fell back to PyTorch: {first.message}",
                failing_pass=first.failing_pass,
                diagnostics=[f.describe() for f in fallbacks],
                input_ir=first.failing_ir or first.torch_ir,
            )
        return trace


CONFIG = EagerConfig()
