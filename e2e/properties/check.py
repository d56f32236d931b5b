"""The property every family checks: a compiled module computes what native torch computes.

`check_compiles_like_native` compiles a module with a pipeline (the passes
from torch backend IR to LLVM; a config's by default), runs it on the ExecutionEngine
and compares with native torch. A failure raises `PropertyFailure`. When hypothesis
replays the shrunk example (its final run), the failure first goes to the reducer, so
the reproducer bundle is built from the shrunk example and the error names it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch
from hypothesis import note
from hypothesis.control import _current_build_context
from torch.utils._pytree import tree_leaves

from compiler.frontends.fx import fx_to_torch_backend_ir
from compiler.stages import StageError
from e2e.framework.compare import compare_values
from e2e.framework.registry import Tolerance

DEFAULT_REPORTS = Path("reports") / "properties"
REDUCE_TIME_BOX = 60.0


class PropertyFailure(AssertionError):
    """The compiled module disagrees with native torch, or does not compile."""


def to_executor(config: str = "linalg") -> list[str]:
    """The config's pipeline from torch backend IR to LLVM."""
    from e2e.configs import load_config
    from e2e.reducer.localize import stage_pipelines

    return stage_pipelines(load_config(config))["backend"]


def _is_final_replay() -> bool:
    context = _current_build_context.value
    return context is not None and context.is_final


def _in_hypothesis() -> bool:
    return _current_build_context.value is not None


def check_compiles_like_native(
    module: torch.nn.Module,
    inputs: Sequence[Any],
    *,
    name: str,
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    pipeline: Sequence[str] | None = None,
    config: str = "linalg",
    tolerance: Tolerance | None = None,
    reports_dir: Path = DEFAULT_REPORTS,
) -> None:
    """Raise PropertyFailure unless `module(*inputs)` compiles and matches native torch."""
    pipeline = list(pipeline) if pipeline is not None else to_executor(config)
    with torch.no_grad():
        golden = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    torch_ir = None
    try:
        torch_ir, _ = fx_to_torch_backend_ir(module, list(inputs), dynamic_dims)
        from e2e.reducer.graph import run_torch_backend_ir  # the RefBackend, or the runtime the pipeline ends in

        actual, _ = run_torch_backend_ir(torch_ir, pipeline, [x for x in inputs if isinstance(x, torch.Tensor)])
    except (StageError, Exception) as error:  # any compile or run error is the property failing
        message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        _fail(name, config, f"does not compile: {message}", module, inputs, torch_ir, pipeline, reports_dir, error=True)
        return
    mismatch = compare_values(list(tree_leaves(golden)), actual, "output", tolerance)
    if mismatch is not None:
        _fail(name, config, str(mismatch), module, inputs, torch_ir, pipeline, reports_dir, error=False)


def _fail(name, config, what, module, inputs, torch_ir, pipeline, reports_dir, *, error: bool) -> None:
    shapes = ", ".join(
        f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}" for x in inputs if isinstance(x, torch.Tensor)
    )
    message = f"{name} on {config}: {what}\n  example inputs: {shapes}"
    if _is_final_replay():
        outcome = reproduce(name, config, module, inputs, torch_ir, pipeline, reports_dir, error=error)
        message += f"\n  {outcome.summary()}"
        if outcome.bundle is not None:
            message += f"\n  reproducer (from the shrunk example): {outcome.bundle / 'README.md'}"
    if _in_hypothesis():
        note(message)
    raise PropertyFailure(message)


def reproduce(name, config, module, inputs, torch_ir, pipeline, reports_dir: Path, *, error: bool):
    """A reproducer bundle for one failing example (the reducer's entry points)."""
    from e2e.reducer.failure import reduce_mismatch, reduce_mlir
    from e2e.reducer.outcome import ReduceOutcome

    if error and torch_ir is not None:
        return reduce_mlir(
            torch_ir, pipeline, "backend", test=name, config=config, reports_dir=reports_dir, time_box=REDUCE_TIME_BOX
        )
    if not error:
        return reduce_mismatch(
            module, list(inputs), pipeline, test=name, config=config, reports_dir=reports_dir, time_box=REDUCE_TIME_BOX
        )
    return ReduceOutcome(note="the failure is before the torch backend IR (capture or import): no MLIR to reduce")
