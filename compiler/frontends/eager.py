"""Eager frontend: run an unmodified PyTorch program, compiling every aten op alone.

    from compiler.frontends.eager import EagerSession, to_eager, from_eager, eager_mode

    session = EagerSession()
    model = to_eager(model, session)                 # parameters and buffers wrapped
    out = from_eager(model(to_eager(x, session)))    # each aten op compiled and run
    print(session.report.summary())                  # compiled vs fell back, cache hits

    with eager_mode() as session:                    # also catches factory ops
        out = model(x)

An `EagerTensor` wraps a real tensor (`elem`). Autograd runs above the dispatcher, so
the forward ops and the backward ops reach `__torch_dispatch__` as aten ops. For each
op the session builds a one-node FX graph (tensor arguments become placeholders,
everything else is baked in), imports it, lowers it to linalg and compiles it with
the reference backend (`compile_single_op`). Compiled ops are cached by op overload,
tensor shapes and dtypes, and non-tensor arguments, so a cache hit costs a dict
lookup and the ExecutionEngine call. An op that fails to compile runs natively and
is recorded as a `Fallback` (a failure); ops in `NATIVE_BY_DESIGN` (views, metadata,
allocation, random numbers) run natively and are not failures. In-place and `out=`
ops are computed by their functional variant and copied into the destination.
"""

from __future__ import annotations

import contextlib
import operator
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch_mlir.extras.fx_importer import FxImporter

from compiler import compile_torch_backend_ir, pipelines
from compiler.frontends.eager_report import EagerReport, Fallback
from compiler.refbackend import RefBackendProgram
from compiler.stages import Snapshots, StageError, module_text, new_context, run_stage

__all__ = [
    "NATIVE_BY_DESIGN",
    "CompiledOp",
    "EagerReport",
    "EagerSession",
    "EagerTensor",
    "Fallback",
    "compile_single_op",
    "eager_mode",
    "from_eager",
    "native_reason",
    "to_eager",
]

_VIEW = "view: the result aliases its input's storage"
_RANDOM = "random: its values come from PyTorch's generator, which golden outputs share"
_ALLOCATION = "allocation: the contents are undefined until written"
_METADATA = "metadata: mutates or reads sizes/strides/storage, no values computed"

# Ops that stay native on purpose, by overload packet; they are not fallbacks. Every
# op whose schema says its result aliases an input (`OpOverload.is_view`) is a view
# and stays native too (see `native_reason`).
NATIVE_BY_DESIGN: dict[str, str] = {
    "aten.detach": _VIEW,
    "aten.alias": _VIEW,
    "aten.lift_fresh": "identity on a freshly created constant (`torch.tensor`)",
    "aten._unsafe_view": "view: reshape of a fresh tensor (`reshape` after a copy)",
    "aten._local_scalar_dense": "reads one value into Python (`.item()`), no values computed",
    "aten.empty": _ALLOCATION,
    "aten.empty_like": _ALLOCATION,
    "aten.empty_strided": _ALLOCATION,
    "aten.new_empty": _ALLOCATION,
    "aten.new_empty_strided": _ALLOCATION,
    "aten.resize_": _METADATA,
    "aten.resize_as_": _METADATA,
    "aten.set_": _METADATA,
    "aten.is_same_size": _METADATA,
    "aten.bernoulli": _RANDOM,
    "aten.bernoulli_": _RANDOM,
    "aten.cauchy_": _RANDOM,
    "aten.exponential_": _RANDOM,
    "aten.geometric_": _RANDOM,
    "aten.log_normal_": _RANDOM,
    "aten.multinomial": _RANDOM,
    "aten.native_dropout": _RANDOM,
    "aten.normal": _RANDOM,
    "aten.normal_": _RANDOM,
    "aten.rand": _RANDOM,
    "aten.rand_like": _RANDOM,
    "aten.randint": _RANDOM,
    "aten.randint_like": _RANDOM,
    "aten.randn": _RANDOM,
    "aten.randn_like": _RANDOM,
    "aten.random_": _RANDOM,
    "aten.randperm": _RANDOM,
    "aten.uniform_": _RANDOM,
}


def native_reason(func: torch._ops.OpOverload) -> str | None:
    """Why `func` stays native by design, or None if it should be compiled."""
    packet = f"{func.namespace}.{func._schema.name.split('::')[-1]}"
    if packet in NATIVE_BY_DESIGN:
        return NATIVE_BY_DESIGN[packet]
    if func.is_view:
        return _VIEW
    return None


# --- compiling one op ----------------------------------------------------------------


@dataclass
class CompiledOp:
    """One op signature compiled for the reference backend."""

    program: RefBackendProgram
    # The op's result as a template: "tensor", or a tuple/list whose entries are the
    # index of a program result (None where the op returns None).
    result_kind: str  # "tensor", "tuple" or "list"
    result_slots: tuple[int | None, ...]
    result_types: tuple[tuple[torch.Size, torch.dtype], ...]  # per program result, as PyTorch gives it
    torch_ir: str

    def run(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        results = self.program(*tensors)
        for i, (result, (shape, dtype)) in enumerate(zip(results, self.result_types)):
            if result.dtype != dtype or result.shape != shape:
                raise StageError(
                    "compare",
                    f"result {i} is {_type_text(result.shape, result.dtype)}, "
                    f"PyTorch gives {_type_text(shape, dtype)}",
                )
        return results


def _type_text(shape: torch.Size, dtype: torch.dtype) -> str:
    return f"{str(dtype).removeprefix('torch.')}[{','.join(map(str, shape))}]"


def single_op_graph(
    func: torch._ops.OpOverload, args: tuple, kwargs: dict, fake_mode: FakeTensorMode
) -> tuple[torch.fx.Graph, Any]:
    """A graph calling `func` once: a placeholder per tensor argument, the rest baked in.

    Nodes carry fake tensors in `meta["val"]`, as the FX importer needs. Returns the
    graph and the op's fake result.
    """
    graph = torch.fx.Graph()
    leaves, spec = pytree.tree_flatten((args, kwargs))
    fake_leaves, node_leaves = [], []
    for value in leaves:
        if isinstance(value, torch.Tensor):
            with fake_mode:
                fake = torch.empty(value.shape, dtype=value.dtype)
            node = graph.placeholder(f"arg{len(graph.nodes)}")
            node.meta["val"] = fake
            fake_leaves.append(fake)
            node_leaves.append(node)
        else:
            fake_leaves.append(value)
            node_leaves.append(value)
    fake_args, fake_kwargs = pytree.tree_unflatten(fake_leaves, spec)
    with fake_mode:
        fake_result = func(*fake_args, **fake_kwargs)
    node_args, node_kwargs = pytree.tree_unflatten(node_leaves, spec)
    call = graph.call_function(func, tuple(node_args), node_kwargs)
    call.meta["val"] = fake_result
    if isinstance(fake_result, torch.Tensor):
        graph.output((call,))
        return graph, fake_result
    if not isinstance(fake_result, (tuple, list)):
        raise StageError("capture", f"{func} returns {type(fake_result).__name__}, not tensors")
    outputs = []
    for i, value in enumerate(fake_result):
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise StageError("capture", f"{func} result {i} is {type(value).__name__}, not a tensor")
        item = graph.call_function(operator.getitem, (call, i))
        item.meta["val"] = value
        outputs.append(item)
    graph.output(tuple(outputs))
    return graph, fake_result


def compile_single_op(
    func: torch._ops.OpOverload,
    args: tuple,
    kwargs: dict,
    fake_mode: FakeTensorMode,
    snapshots: Snapshots,
) -> CompiledOp:
    """capture (one-node graph) -> import -> torch-backend -> linalg -> RefBackend.

    Raises StageError; `snapshots.texts["graph"]` holds the FX graph and
    `snapshots.texts["torch-backend"]` the single op as raw torch-dialect IR.
    """
    stage = "capture"
    try:
        graph, fake_result = single_op_graph(func, args, kwargs, fake_mode)
        snapshots.texts["graph"] = str(graph)
        stage = "import"
        importer = FxImporter(context=new_context())
        importer.import_stateless_graph(graph, func_name="main")
        run_stage(importer.module, "torch-backend", pipelines.FX_TO_TORCH_BACKEND, snapshots)
        stage = "backend"
        program = compile_torch_backend_ir(module_text(importer.module), "linalg", snapshots=snapshots)
    except StageError:
        raise
    except Exception as error:
        text = str(error).strip()
        first_line = text.splitlines()[0] if text else ""
        raise StageError(stage, f"{type(error).__name__}: {first_line}") from error
    if isinstance(fake_result, torch.Tensor):
        kind, slots, fakes = "tensor", (0,), [fake_result]
    else:
        kind = "list" if isinstance(fake_result, list) else "tuple"
        fakes = [r for r in fake_result if r is not None]
        indices = iter(range(len(fakes)))
        slots = tuple(None if r is None else next(indices) for r in fake_result)
    types = tuple((torch.Size(f.shape), f.dtype) for f in fakes)
    return CompiledOp(program, kind, slots, types, snapshots.texts["torch-backend"])


# --- the tensor subclass ---------------------------------------------------------------


class EagerTensor(torch.Tensor):
    """A tensor whose aten ops are compiled one by one by its session."""

    elem: torch.Tensor
    session: "EagerSession"

    __slots__ = ("elem", "session")
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, elem: torch.Tensor, session: "EagerSession", requires_grad: bool = False):
        tensor = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.size(),
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=elem.device,
            requires_grad=requires_grad,
        )
        tensor.elem = elem
        tensor.session = session
        return tensor

    def __repr__(self, *, tensor_contents=None) -> str:
        grad = f", grad_fn={type(self.grad_fn).__name__}" if self.grad_fn is not None else ""
        return f"EagerTensor({self.elem!r}{grad})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        session = _session_of(args, kwargs)
        return session.dispatch(func, args, kwargs or {})


def _session_of(args: tuple, kwargs: dict | None) -> "EagerSession":
    for value in args:
        if type(value) is EagerTensor:
            return value.session
        if isinstance(value, (list, tuple)):
            for item in value:
                if type(item) is EagerTensor:
                    return item.session
    for value in pytree.tree_leaves(kwargs or {}):
        if type(value) is EagerTensor:
            return value.session
    raise RuntimeError("EagerTensor.__torch_dispatch__ called without an EagerTensor argument")


def _signature(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The cache key of one argument; appends its tensors' data to `tensors`."""
    if isinstance(value, torch.Tensor):
        if type(value) is EagerTensor:
            value = value.elem
        tensors.append(value)
        return (value.dtype, value.shape)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(item, tensors) for item in value)
    if isinstance(value, float):
        return (float, repr(value))  # 1.0 != 1 and nan == nan as keys
    return (type(value), value)


def _unwrap(value: Any) -> Any:
    return value.elem if type(value) is EagerTensor else value


def _argument_text(args: tuple, kwargs: dict) -> str:
    def text(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return _type_text(value.shape, value.dtype)
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(text(v) for v in value) + "]"
        return repr(value)

    parts = [text(a) for a in args] + [f"{k}={text(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _functional_variant(func: torch._ops.OpOverload) -> tuple[torch._ops.OpOverload | None, list[str]]:
    """For a mutating op (`add_`, `add.out`): its functional overload and written arguments."""
    schema = func._schema
    written = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    name = schema.name.split("::")[-1]
    if name.endswith("_") and not name.endswith("__"):
        packet = getattr(torch.ops.aten, name[:-1], None)
        candidates = [func._overloadname]
    else:
        packet = getattr(torch.ops.aten, name, None)
        candidates = packet.overloads() if packet is not None else []
    in_place = name.endswith("_") and not name.endswith("__")
    # In-place ops keep every argument (`self` is the destination); out= ops drop `out`.
    wanted = [a.name for a in schema.arguments if in_place or a.name not in written]
    for overload_name in candidates:
        overload = getattr(packet, overload_name, None)
        if overload is None or overload._schema.is_mutable:
            continue
        if [a.name for a in overload._schema.arguments] == wanted:
            return overload, written
    return None, written
