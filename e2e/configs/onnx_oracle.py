"""The third oracle of the `onnx` config: onnxruntime runs the same ONNX model.

When a pair's compiled program fails to run or gives other values than torch (or than
ONNX's reference outputs, for the ONNX backend suite), onnxruntime's run of the very
model torch-mlir imported says where the bug is:

| onnxruntime agrees with | the failure is in |
|---|---|
| torch, not the compiled program | torch-mlir: its ONNX importer or its lowering |
| the compiled program, not torch | the model: the exporter (or ONNX itself) computes something else |
| neither | unplaced (two bugs, or ONNX semantics differ from torch) |

Used only where `onnxruntime` is installed; its absence is one note, never a failure.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable

import numpy as np
import torch
import torch.utils._pytree as pytree

from e2e.framework.compare import compare_traces
from e2e.framework.judge import Explanation, Outcome
from e2e.framework.registry import Tolerance
from e2e.framework.trace import Trace, TraceItem

PREFIX = "onnxruntime oracle: "


def available() -> bool:
    return importlib.util.find_spec("onnxruntime") is not None


def run_onnxruntime(model: bytes, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run an ONNX model on onnxruntime's CPU provider, one thread."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]
    if len(names) != len(tensors):
        raise ValueError(f"the model takes {len(names)} inputs, the call passes {len(tensors)} tensors")
    feeds = {name: _to_numpy(tensor) for name, tensor in zip(names, tensors)}
    return [_to_torch(value) for value in session.run(None, feeds)]


def _to_numpy(tensor: torch.Tensor) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.detach().numpy()


def _to_torch(value: Any) -> torch.Tensor:
    array = np.asarray(value)
    if array.dtype.name == "bfloat16":
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def oracle_notes(
    model_for: Callable[[TraceItem], tuple[bytes, Any]],
    tensors_of: Callable[[TraceItem], list[torch.Tensor]],
    golden: Trace,
    compiled: Trace | None,
    tolerance: Tolerance | None,
) -> list[str]:
    """What onnxruntime says of a failing pair. `model_for(item)` is the model the call
    ran and its output pytree spec; `compiled` is the compiled program's trace, or None
    when it did not run to the end."""
    if not available():
        return [PREFIX + "not run (onnxruntime is not installed)"]
    import torch.utils._pytree as pytree

    ort_trace: Trace = []
    try:
        for item in golden:
            model, out_spec = model_for(item)
            flat = run_onnxruntime(model, tensors_of(item))
            ort_trace.append(TraceItem(item.method, item.inputs, pytree.tree_unflatten(flat, out_spec)))
    except Exception as error:  # onnxruntime refusing the model is itself information
        text = " ".join(str(error).split())
        text = text if len(text) <= 400 else f"{text[:120]} ... {text[-280:]}"  # onnxruntime puts the cause last
        return [PREFIX + f"onnxruntime could not run the model: {type(error).__name__}: {text}"]
    with_torch = compare_traces(golden, ort_trace, tolerance)
    agree_torch = "agrees with torch" if with_torch is None else f"disagrees with torch ({with_torch.kind})"
    if compiled is None:
        place = (
            "the model is right; the compiled program failed to run"
            if with_torch is None
            else ("the exported model itself computes other values than torch")
        )
        return [PREFIX + f"{agree_torch}; the compiled program did not run; {place}"]
    with_compiled = compare_traces(compiled, ort_trace, tolerance)
    agree_compiled = (
        "agrees with the compiled result"
        if with_compiled is None
        else (f"disagrees with the compiled result ({with_compiled.kind})")
    )
    if with_torch is None and with_compiled is not None:
        place = "the failure is in torch-mlir (ONNX importer or lowering)"
    elif with_torch is not None and with_compiled is None:
        place = "the failure is in the model (exporter or ONNX semantics), not in torch-mlir"
    elif with_torch is None:
        place = "onnxruntime agrees with both: the mismatch is within tolerance differences"
    else:
        place = "unplaced: onnxruntime agrees with neither"
    return [PREFIX + f"{agree_torch}; {agree_compiled}; {place}"]


class OnnxOracle:
    """The explainer (`e2e.framework.judge`) of a program that failed to run or compared
    wrong: what onnxruntime computes on the same model."""

    def explain(self, prepared, outcome: Outcome) -> Explanation | None:
        ran_wrong = outcome.mismatch is not None
        if not (ran_wrong or outcome.stage == "execute") or outcome.artifact is None:
            return None
        tensors = lambda item: [x for x in pytree.tree_leaves(item.inputs) if isinstance(x, torch.Tensor)]  # noqa: E731
        notes = oracle_notes(
            outcome.artifact.model_for, tensors, prepared.golden, outcome.trace, prepared.test.tolerance
        )
        return Explanation(notes)
