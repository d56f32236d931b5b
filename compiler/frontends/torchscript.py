"""TorchScript frontend (`TorchScriptFrontend`): `torch.jit.script`, falling back to `torch.jit.trace`.

The method's graph is copied and inlined (`prim::CallMethod` of submodules disappear);
`prim::GetAttr` on `self` and its submodules is resolved by the importer against the
scripted module, so parameters and buffers become constants without freezing (which
would require eval mode). Tensor arguments become arguments of `@main`; non-tensor
arguments (ints, floats, bools) are specialized to their example values.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.utils._pytree as pytree

from compiler.frontends import ReducerFacts, StaticShapesOnly
from compiler.frontends.jit import ConstantInput, GraphInput, TensorArg
from compiler.frontends.jit_frontend import JitFrontend
from compiler.stages import StageError, first_line


@dataclass
class ScriptCapture:
    graph: torch._C.Graph
    graph_inputs: list[GraphInput]
    # For each argument of @main, in order: its index among the flat tensor inputs.
    argument_indices: list[int]
    out_spec: pytree.TreeSpec
    # "script", or "trace" when scripting failed; then `fallback_reason` says why.
    method: str = "script"
    fallback_reason: str | None = None


def capture(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    dynamic_dims: Sequence[Sequence[int] | None] | None = None,
    method: str = "forward",
) -> ScriptCapture:
    """Stage `capture`: script (or trace) `module.<method>` and take its inlined graph."""
    # Golden structure of the outputs, from a run on a copy (the run may update buffers).
    try:
        outputs = getattr(copy.deepcopy(module), method)(*example_inputs)
    except Exception as error:
        raise StageError("capture", f"eager run: {type(error).__name__}: {first_line(error)}") from error
    flat_outputs, out_spec = pytree.tree_flatten(outputs)
    for i, leaf in enumerate(flat_outputs):
        if not isinstance(leaf, torch.Tensor):
            raise StageError("capture", f"output leaf {i} is a {type(leaf).__name__}, not a tensor")

    scripted_module, how, reason = _script_or_trace(copy.deepcopy(module), example_inputs, method)
    try:
        graph = getattr(scripted_module, method).graph.copy()
        torch._C._jit_pass_inline(graph)
        # Folds the checks on constant attributes (`if self.padding_idx is not None`).
        torch._C._jit_pass_constant_propagation(graph)
    except Exception as error:
        raise StageError(
            "capture", f"inlining the {how}d graph: {type(error).__name__}: {first_line(error)}"
        ) from error

    graph_values = list(graph.inputs())
    if how == "trace":
        # A traced graph takes only the tensors, flattened.
        arguments = [x for x in pytree.tree_leaves(list(example_inputs)) if isinstance(x, torch.Tensor)]
    else:
        arguments = list(example_inputs) + _defaults_after(getattr(scripted_module, method).schema, len(example_inputs))
    if len(graph_values) != len(arguments) + 1:
        raise StageError(
            "capture", f"the {how}d graph takes {len(graph_values) - 1} arguments, {len(arguments)} were given"
        )
    graph_inputs: list[GraphInput] = [ConstantInput(scripted_module)]
    argument_indices: list[int] = []
    tensor_index = 0
    for position, (_value, argument) in enumerate(zip(graph_values[1:], arguments)):
        if isinstance(argument, torch.Tensor):
            shape = list(argument.shape)
            wanted = dynamic_dims[position] if dynamic_dims and position < len(dynamic_dims) else None
            if how == "script" and wanted and len(wanted) == len(shape):
                shape = [-1 if w == -1 else s for s, w in zip(shape, wanted)]
            graph_inputs.append(TensorArg(tuple(shape), argument.dtype))
            argument_indices.append(tensor_index)
            tensor_index += 1
        elif isinstance(argument, (bool, int, float, str)) or argument is None:
            graph_inputs.append(ConstantInput(argument))
        else:
            raise StageError(
                "capture", f"argument {position} is a {type(argument).__name__}; only tensors and scalars are supported"
            )
    return ScriptCapture(graph, graph_inputs, argument_indices, out_spec, how, reason)


def _defaults_after(schema: torch._C.FunctionSchema, given: int) -> list[object]:
    """The default values of the arguments after the first `given` (`forward(self, x, mask=None)`)."""
    defaults = []
    for argument in schema.arguments[1 + given :]:  # 0 is `self`
        if not argument.has_default_value():
            raise StageError("capture", f"argument {argument.name!r} of {schema.name} has no default and was not given")
        defaults.append(argument.default_value)
    return defaults


def _script_or_trace(module: torch.nn.Module, example_inputs: Sequence[object], method: str):
    try:
        return torch.jit.script(module), "script", None
    except Exception as script_error:
        reason = f"torch.jit.script: {type(script_error).__name__}: {first_line(script_error)}"
    try:
        if method == "forward":
            traced = torch.jit.trace(module, tuple(example_inputs), check_trace=False)
        else:
            traced = torch.jit.trace_module(module, {method: tuple(example_inputs)}, check_trace=False)
    except Exception as trace_error:
        raise StageError(
            "capture",
            f"{reason}; torch.jit.trace fallback: {type(trace_error).__name__}: {first_line(trace_error)}",
        ) from trace_error
    return traced, "trace", reason


@dataclass(frozen=True)
class TorchScriptFrontend(JitFrontend):
    """torch.jit.script, or torch.jit.trace where scripting fails."""

    name = "torchscript"
    reducer = ReducerFacts(jit_graph_search=True)

    def capture_graph(self, module, example_inputs, dynamic_dims, method, static_refused, notes):
        captured = capture(module, example_inputs, dynamic_dims, method)
        notes["capture"] = captured.method
        if captured.fallback_reason:
            notes["fallback_reason"] = captured.fallback_reason
        if static_refused and captured.method == "trace":
            raise StaticShapesOnly(
                f"torchscript fell back to torch.jit.trace, which traces static shapes; dynamic dims "
                f"{list(dynamic_dims)} were asked for ({captured.fallback_reason})"
            )
        return captured
