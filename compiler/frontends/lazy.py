"""LTC frontend (`LtcFrontend`): run the module on the `lazy` device and take the TorchScript graph.

The TorchScript LTC backend records every op on lazy tensors; the graph of the
forward's outputs is lowered to TorchScript without running it
(`_get_tensors_backend`). Its inputs are the *device data* the outputs depend on, in
the order `_get_tensors_ts_device_data_node` reports them (deduplicated by data
handle): a device datum whose lazy tensor id is one of the user's inputs becomes an
argument of `@main`; every other one (parameters, buffers, scalars LTC materialized,
tensors created from Python data) becomes a constant. An index tensor torch reads on
the host (tensor_split's) stays on the CPU: LTC reads its values, so it is no argument.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.utils._pytree as pytree

from compiler.frontends import NotCapturable, ReducerFacts, StaticShapesOnly
from compiler.frontends.jit import ConstantInput, GraphInput, TensorArg
from compiler.frontends.jit_frontend import JitFrontend
from compiler.replay_runtime.frontend_step import init_ts_backend
from compiler.stages import StageError, first_line


@dataclass
class LazyCapture:
    """What the JIT importer needs, and how to call and unflatten the compiled program."""

    graph: torch._C.Graph
    graph_inputs: list[GraphInput]
    # For each argument of @main, in order: its index among the flat tensor inputs.
    argument_indices: list[int]
    out_spec: pytree.TreeSpec


class NotOnLazyDevice(NotCapturable):
    """The method makes an output on another device itself (a factory given `device="cpu"`,
    `x.to("cpu")`): LTC never sees it, so there is nothing of it to trace or to compile."""


def capture(module: torch.nn.Module, example_inputs: Sequence[object], method: str = "forward") -> LazyCapture:
    """Stage `capture`: trace `module.<method>(*example_inputs)` on the lazy device.

    Raises `NotOnLazyDevice` for a method that puts an output on another device itself."""
    init_ts_backend()
    try:
        return _capture(module, example_inputs, method)
    except (StageError, NotOnLazyDevice):
        raise
    except Exception as error:
        raise StageError("capture", f"lazy tensor trace: {type(error).__name__}: {first_line(error)}") from error


# torch reads some tensor arguments on the host whatever the device of the others
# (tensor_split's `tensor_indices_or_sections`: "a zero-dimensional or one-dimensional
# long tensor on the CPU") and refuses them on the device with this message.
_HOST_ARGUMENT_REFUSED = re.compile(r"expected \w+ to be on cpu, but it's on lazy")


def _is_host_index(x: torch.Tensor) -> bool:
    """The form of a tensor argument torch reads on the host: a 0-d or 1-d int64 tensor."""
    return x.dtype == torch.int64 and x.dim() <= 1


def _capture(module: torch.nn.Module, example_inputs: Sequence[object], method: str) -> LazyCapture:
    try:
        return _trace(module, example_inputs, method, keep_on_host=lambda x: False)
    except RuntimeError as error:
        if not _HOST_ARGUMENT_REFUSED.search(str(error)):
            raise
    # As a device user does, keep the index tensors on the CPU: LTC reads their values
    # while tracing, so they specialize the graph (as they fix its output shapes anyway)
    # and are not arguments of @main.
    return _trace(module, example_inputs, method, keep_on_host=_is_host_index)


def _trace(
    module: torch.nn.Module,
    example_inputs: Sequence[object],
    method: str,
    keep_on_host: Callable[[torch.Tensor], bool],
) -> LazyCapture:
    lazy_module = copy.deepcopy(module).to("lazy")
    flat_inputs, in_spec = pytree.tree_flatten(list(example_inputs))
    lazy_inputs = [x.to("lazy") if isinstance(x, torch.Tensor) and not keep_on_host(x) else x for x in flat_inputs]
    # Index among the flat *tensor* inputs (what the compiled program is called with).
    tensor_index_of_id: dict[int, int] = {}
    tensor_index = 0
    for x in lazy_inputs:
        if isinstance(x, torch.Tensor):
            if x.device.type == "lazy":
                tensor_index_of_id[torch._C._lazy._get_tensor_id(x)] = tensor_index
            tensor_index += 1
    shapes = [tuple(x.shape) for x in flat_inputs if isinstance(x, torch.Tensor)]
    dtypes = [x.dtype for x in flat_inputs if isinstance(x, torch.Tensor)]

    torch._lazy.metrics.reset()
    # Tensors the method makes itself (arange, zeros, ...) are lazy too, so they are
    # traced rather than mixed in from the CPU.
    with torch.device("lazy"):
        outputs = getattr(lazy_module, method)(*pytree.tree_unflatten(lazy_inputs, in_spec))
    # An op without a lazy lowering runs eagerly (counted as `aten::<op>`); its result
    # would enter the graph as a constant computed from these example inputs.
    fallbacks = sorted(n for n in torch._lazy.metrics.counter_names() if n.startswith("aten::"))
    if fallbacks:
        raise StageError("capture", f"LTC has no lowering for {', '.join(fallbacks)} (ran eagerly on CPU)")
    flat_outputs, out_spec = pytree.tree_flatten(outputs)
    for i, leaf in enumerate(flat_outputs):
        if not isinstance(leaf, torch.Tensor):
            raise StageError("capture", f"output leaf {i} is a {type(leaf).__name__}, not a tensor")
    if not flat_outputs:
        raise StageError("capture", "the method returns no tensors")
    for i, leaf in enumerate(flat_outputs):
        if leaf.device.type != "lazy":
            raise NotOnLazyDevice(
                f"output leaf {i} is made on {leaf.device} by the method itself; ltc traces the lazy device"
            )

    # First: this gives every output an IR value (a device data node for an output that
    # is an input or a constant), and the backend dump below skips tensors without one:
    # a program returning only inputs or constants would print as "", and one returning
    # an input next to a computed value would lose that output.
    tensor_ids, values = torch._C._lazy_ts_backend._get_tensors_ts_device_data_node(flat_outputs)
    graph_text = torch._C._lazy._get_tensors_backend(flat_outputs)
    # There is no Graph-returning API (`_get_latest_computation_graph` is text too).
    graph = torch._C.parse_ir(_parseable(graph_text), parse_tensor_constants=True)
    if len(list(graph.inputs())) != len(tensor_ids):
        raise StageError(
            "capture",
            f"the lazy graph has {len(list(graph.inputs()))} inputs but {len(tensor_ids)} device data",
        )
    if len(list(graph.outputs())) != len(flat_outputs):
        raise StageError(
            "capture",
            f"the lazy graph has {len(list(graph.outputs()))} outputs but the method returns {len(flat_outputs)}",
        )
    graph_inputs: list[GraphInput] = []
    argument_indices: list[int] = []
    for tensor_id, value in zip(tensor_ids, values):
        index = tensor_index_of_id.get(tensor_id)
        if index is not None:
            graph_inputs.append(TensorArg(shapes[index], dtypes[index]))
            argument_indices.append(index)
        else:
            graph_inputs.append(ConstantInput(_device_datum(value)))
    return LazyCapture(graph, graph_inputs, argument_indices, out_spec)


# The TorchScript lowering of an op with several results (max.dim, sort, topk,
# nll_loss_forward, ...) leaves behind the tuple of its results, unused, typed as the
# op's named tuple, a type spelling `parse_ir` rejects ("unknown type specifier").
_NAMED_TUPLE_NODE = re.compile(r"^ *(%[\w.]+) : NamedTuple\(.*\) = prim::TupleConstruct\(.*\)\n", re.MULTILINE)


def _parseable(graph_text: str) -> str:
    """`graph_text` without the unused named-tuple nodes `parse_ir` cannot read.

    A node none of whose results is used and that has no side effect is dead code:
    dropping it cannot change the program. One that is used stays (and fails to parse).
    """

    def drop_if_unused(match: re.Match[str]) -> str:
        uses = re.findall(re.escape(match[1]) + r"(?![\w.])", graph_text)
        return "" if len(uses) == 1 else match[0]

    return _NAMED_TUPLE_NODE.sub(drop_if_unused, graph_text)


def _device_datum(value: Any) -> torch.Tensor:
    """A device datum as a CPU tensor; LTC keeps scalars it materialized as Python numbers."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, bool):
        return torch.tensor(value, dtype=torch.bool)
    if isinstance(value, int):
        return torch.tensor(value, dtype=torch.int64)
    if isinstance(value, float):
        # A 0-d float32 neither widens float32 tensors nor makes int tensors float64.
        return torch.tensor(value, dtype=torch.float32)
    raise StageError("capture", f"a lazy device datum of type {type(value).__name__} is not supported")


@dataclass(frozen=True)
class LtcFrontend(JitFrontend):
    """The module on the `lazy` device (TorchScript backend), its forward one lazy graph."""

    name = "ltc"
    reducer = ReducerFacts(
        repro_step="ltc",
        device="lazy",
        dynamic_graph_search=False,
        repro_step_words="tracing on the lazy device (TorchScript LTC backend)",
    )

    def capture_graph(self, module, example_inputs, dynamic_dims, method, static_refused, notes):
        if static_refused:
            raise StaticShapesOnly(f"ltc traces static shapes; dynamic dims {list(dynamic_dims)} were asked for")
        notes["capture"] = "lazy"
        return capture(module, example_inputs, method)

    def check(self, module, inputs, dynamic_dims) -> None:
        capture(module, inputs)
