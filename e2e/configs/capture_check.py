"""Capture discrepancies: wrong results that torch.export, not the compiler, introduced.

When a compiled program's outputs differ from the eager golden ones, the captured
program (the decomposed `ExportedProgram` the importer was given) is run by torch
itself on the first mismatching call. If it disagrees with eager torch too, and the
compiled program agrees with it, the compiler compiled faithfully what it was handed:
the pair fails in stage `capture`
with a `capture discrepancy` signature, not as a compiler mismatch. (Example: an
`nn.TransformerEncoder` with a padding mask in eval mode takes the nested-tensor fast
path eagerly; the exported graph does not, and pads differently.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from compiler.frontends import load_frontend
from e2e.framework.compare import agree, compare_values
from e2e.framework.judge import Explanation, Outcome
from e2e.framework.trace import TraceItem, call_key

DISCREPANCY = "capture discrepancy"


def run_exported(exported: Any, inputs: list[Any]) -> Any:
    """The captured program run by torch on copies of `inputs` (it may update them in place).

    The importer froze the program (its parameters are no longer placeholders), so the
    graph is interpreted as it is now, not through `ExportedProgram.module()`.
    """
    from torch.export.graph_signature import OutputKind

    copies = pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, list(inputs))
    placeholders = [n for n in exported.graph.nodes if n.op == "placeholder"]
    flat = pytree.tree_leaves(copies)
    if len(flat) != len(placeholders):
        raise ValueError(f"the graph takes {len(placeholders)} inputs, the call has {len(flat)}")
    with torch.no_grad():
        outputs = torch.fx.Interpreter(exported.graph_module, graph=exported.graph).run(*flat)
    specs = exported.graph_signature.output_specs
    user = [value for value, spec in zip(outputs, specs) if spec.kind == OutputKind.USER_OUTPUT]
    return pytree.tree_unflatten(user, exported.call_spec.out_spec)


@dataclass(frozen=True)
class CaptureCheck:
    """The explainer (`e2e.framework.judge`) of an FX-captured config's wrong results.

    The captured program comes from the import the config compiled; one taken over from an
    earlier host of the test lost it on the way (an `ExportedProgram` does not cross
    processes), and is captured again by the config's frontend (`PreparedTest.recapture`), so a
    pair's verdict does not depend on which configs ran before it."""

    frontend: str  # the config's frontend (`compiler.frontends`), whose import keeps its program (`exported`)

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        if outcome.mismatch is None:
            return None
        compiled, golden, trace = outcome.artifact, prepared.golden, outcome.trace
        tolerance = prepared.test.tolerance
        for number, (expected, actual) in enumerate(zip(golden, trace)):
            where = f"trace item #{number} ({expected.method}) @ output"
            # The runner's comparison named the first mismatching call: the calls before it
            # agree and need no second comparison (a 512 MiB output takes seconds a pass).
            if number < (outcome.mismatch.call or 0) or (
                outcome.mismatch.call is None and agree(expected.outputs, actual.outputs, tolerance)
            ):
                continue
            versus_eager = self._versus_eager(compiled, prepared, expected, actual, where, tolerance)
            if versus_eager is None:
                return None
            return Explanation(
                stage="capture",
                error=(
                    f"{DISCREPANCY} ({versus_eager.kind}): the captured program, run by torch, disagrees with the "
                    f"eager module, and the compiled program agrees with the captured one: {versus_eager}"
                ),
            )
        return None

    def _versus_eager(self, compiled, prepared, expected: TraceItem, actual: TraceItem, where: str, tolerance):
        """How the captured program, run by torch, differs from eager torch on `expected`'s
        call while agreeing with the compiled program; None: no capture discrepancy (the
        capture agrees with eager, the compiler is wrong as well, or no verdict is possible)."""
        dynamic = (expected.method, None) in compiled.imported
        imported = compiled.imported.get((expected.method, None if dynamic else call_key(expected.inputs)))
        exported = getattr(imported, "exported", None)
        try:
            if exported is None:
                exported = prepared.recapture(expected, dynamic, load_frontend(self.frontend))
            native = run_exported(exported, expected.inputs)
        except Exception:
            return None  # it does not capture again, or the captured program does not run natively
        # The compiled program against the captured one first: for a compiler bug they
        # differ, usually within the first chunk, and the full comparison is not needed.
        if not agree(native, actual.outputs, tolerance):
            return None
        return compare_values(expected.outputs, native, where, tolerance)
