"""One aten op alone: does it stay native, what is its functional variant, and how is it
compiled as a single-op program for the reference backend.

The eager session (`compiler.frontends.eager`) asks `plan(op)` once per op overload and
`compile_single_op` once per signature (op, tensor shapes and dtypes, non-tensor
arguments). A single-op program is a one-node FX graph: a placeholder per tensor
argument, every other argument baked in, fake tensors in `meta["val"]` as the FX
importer needs them.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch._decomp
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch_mlir import ir
from torch_mlir.extras.fx_importer import FxImporter

from compiler import pipelines
from compiler.backend_compile import stage_torch_backend_ir
from compiler.refbackend import LoweredProgram, RefBackendProgram, ToLower, lower_linalg
from compiler.stages import Snapshots, StageError, module_text, new_context, run_stage

_VIEW = "view: the result aliases its input's storage"
_RANDOM = "random: its values come from PyTorch's generator, which golden outputs share"
_ALLOCATION = "allocation: the contents are undefined until written"
_QUERY = "query: returns a Python value (`equal`, `is_nonzero`), not a tensor to compute"
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
    returns = func._schema.returns
    if returns and not any("Tensor" in str(r.type) for r in returns):
        return _QUERY
    return None


# --- compiling one op ----------------------------------------------------------------


@dataclass(frozen=True)
class LoweredOp:
    """One op signature lowered for the reference backend, as text: what its compiled op is
    rebuilt from by the JIT alone (`load`), in a later test host or a later run (the
    session's `LoweredOpStore`). Everything here is what the op's program and its calls
    depend on besides the op's own key (op, argument signature, backend, opt level)."""

    program: LoweredProgram | InBatch
    # The op's result as a template: "tensor", or a tuple/list whose entries are the
    # index of a program result (None where the op returns None).
    result_kind: str  # "tensor", "tuple" or "list"
    result_slots: tuple[int | None, ...]
    result_types: tuple[tuple[torch.Size, torch.dtype], ...]  # per program result, as PyTorch gives it
    torch_ir: str
    decomposed: bool = False  # compiled through the op's decomposition, its own program having failed

    def load(self, context: ir.Context | None = None) -> CompiledOp:
        """JIT-compile the program (a failure is stage `lower`'s, as when it was compiled),
        parsed in `context` (default: a new one). A program lowered with others is loaded
        with them (`EagerSession`), not alone."""
        if isinstance(self.program, InBatch):
            raise TypeError("an op lowered with others loads with its batch")
        return CompiledOp(self.program.load(context), self)


@dataclass(frozen=True)
class InBatch:
    """The program of an op lowered with others (`refbackend.lower_together`): entry `entry`
    of the `LoweredBatch` a session's store keeps once under the key `batch`."""

    batch: str
    entry: str


@dataclass
class CompiledOp:
    """One op signature compiled for the reference backend: its JIT-compiled program."""

    program: RefBackendProgram
    lowered: LoweredOp  # what it was loaded from
    # Whether a call's results were checked against `result_types`: once is enough, the
    # program is compiled for static shapes and dtypes.
    results_checked: bool = False

    @property
    def result_kind(self) -> str:
        return self.lowered.result_kind

    @property
    def result_slots(self) -> tuple[int | None, ...]:
        return self.lowered.result_slots

    @property
    def torch_ir(self) -> str:
        return self.lowered.torch_ir

    def run(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Call the program on tensors matching its signature (the session's cache key
        holds their dtypes and shapes, so the program's own argument check is skipped)."""
        results = self.program.call_checked(tensors)
        if self.results_checked:
            return results
        result_types = self.lowered.result_types
        if len(results) != len(result_types):
            raise StageError("compare", f"{len(results)} results, PyTorch gives {len(result_types)}")
        for i, (result, (shape, dtype)) in enumerate(zip(results, result_types)):
            if result.dtype != dtype or result.shape != shape:
                raise StageError(
                    "compare",
                    f"result {i} is {type_text(result.shape, result.dtype)}, PyTorch gives {type_text(shape, dtype)}",
                )
        self.results_checked = True
        return results


def type_text(shape: torch.Size, dtype: torch.dtype) -> str:
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


class DecompositionMismatch(StageError):
    """The op's decomposition gives results of other shapes or dtypes than the op: it
    cannot stand in for the op, as one program or op by op."""


def can_decompose(func: torch._ops.OpOverload) -> bool:
    return func in _decompositions() or func in torch._decomp.decomposition_table


def decomposition(func: torch._ops.OpOverload) -> Any:
    """The Python decomposition of `func` the FX configs use (torch-mlir's table), or None.

    Not PyTorch's whole table: most of its entries are references down to `prims`, which
    torch.export never shows the FX configs and torch-mlir does not lower (`aten.div` on
    complex numbers would fall back as `prims.div`, the aten op no longer named)."""
    return _decompositions().get(func)


@dataclass
class DecomposedOp:
    """An op whose program failed, alone and as one program of its decomposition: each
    call runs its decomposition, whose ops the session dispatches one by one (compiled,
    cached, decomposed in turn or fallen back, each on its own)."""

    run: Any  # the decomposition: a Python function of the op's arguments
    failure: StageError  # the op's own failure, reported if the decomposition cannot stand in
    result_types: tuple[tuple[torch.Size, torch.dtype], ...]  # per tensor result, as PyTorch gives it
    torch_ir: str | None = None  # the op's own program, as its failure left it
    graph: str = ""
    results_checked: bool = False

    def check(self, result: Any) -> None:
        """Raise StageError("capture") unless `result` has the op's tensor results (once:
        shapes and dtypes are fixed per signature)."""
        if self.results_checked:
            return
        if result is NotImplemented:
            raise StageError("capture", "its decomposition does not apply to these arguments")
        got = tuple((torch.Size(r.shape), r.dtype) for r in pytree.tree_leaves(result) if isinstance(r, torch.Tensor))
        if got != self.result_types:
            raise StageError(
                "capture",
                f"its decomposition gives {[type_text(*t) for t in got]}, the op {[type_text(*t) for t in self.result_types]}",
            )
        self.results_checked = True


def result_types(func: torch._ops.OpOverload, args: tuple, kwargs: dict, fake_mode: FakeTensorMode) -> tuple:
    """The shapes and dtypes of the op's tensor results, from a fake run."""
    _, fake_result = single_op_graph(func, args, kwargs, fake_mode)
    return tuple((torch.Size(r.shape), r.dtype) for r in pytree.tree_leaves(fake_result) if isinstance(r, torch.Tensor))


@functools.cache
def _decompositions() -> dict:
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return get_decomposition_table()


def decomposed_op_graph(
    func: torch._ops.OpOverload, args: tuple, kwargs: dict, fake_mode: FakeTensorMode
) -> tuple[torch.fx.Graph, Any]:
    """`func` traced through the decompositions the FX configs use (torch-mlir's table),
    and through PyTorch's own for `func` itself: the ops torch-mlir lowers instead of one
    it may not (`_scaled_dot_product_flash_attention_for_cpu`, eval `native_batch_norm`)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    _, fake_result = single_op_graph(func, args, kwargs, fake_mode)
    leaves, spec = pytree.tree_flatten((args, kwargs))
    positions = [i for i, value in enumerate(leaves) if isinstance(value, torch.Tensor)]

    def call(*tensors):
        values = list(leaves)
        for position, tensor in zip(positions, tensors):
            values[position] = tensor
        call_args, call_kwargs = pytree.tree_unflatten(values, spec)
        result = func(*call_args, **call_kwargs)
        results = [result] if isinstance(result, torch.Tensor) else result
        return tuple(r for r in results if r is not None)

    table = dict(_decompositions())
    if func in torch._decomp.decomposition_table:
        table[func] = torch._decomp.decomposition_table[func]
    # Fresh tensors: make_fx would merge arguments that are the same tensor object.
    placeholders = [torch.empty(leaves[i].shape, dtype=leaves[i].dtype) for i in positions]
    traced = make_fx(call, decomposition_table=table, tracing_mode="fake")(*placeholders)
    wanted = [(tuple(r.shape), r.dtype) for r in pytree.tree_leaves(fake_result) if isinstance(r, torch.Tensor)]
    (output,) = [node for node in traced.graph.nodes if node.op == "output"]
    got = [(tuple(n.meta["val"].shape), n.meta["val"].dtype) for n in pytree.tree_leaves(output.args[0])]
    if got != wanted:
        raise DecompositionMismatch("capture", f"the decomposition of {func} gives results {got}, the op {wanted}")
    return traced.graph, fake_result


@dataclass(frozen=True)
class OpCall:
    """One aten op's call as the eager config compiles it: the op and its (unwrapped)
    arguments, the fake mode its shapes are traced in, and where it is compiled: the backend,
    the JIT's opt level, alone or through its decomposition (`decompose`), in `context`
    (default: a new one for this op)."""

    func: torch._ops.OpOverload
    args: tuple
    kwargs: dict
    fake_mode: FakeTensorMode
    backend: str = "linalg"
    opt_level: int | None = 0
    decompose: bool = False
    context: ir.Context | None = None

    def decomposed(self) -> OpCall:
        """The same call, compiled through the op's decomposition as one program."""
        return replace(self, decompose=True)


def compile_single_op(call: OpCall, snapshots: Snapshots) -> CompiledOp:
    """`lower_single_op`, then the JIT. Raises StageError (the JIT's failures in stage `lower`).
    Every stage's IR lives in the call's context (default: a new one for this op)."""
    if call.context is None:
        call = replace(call, context=new_context())
    lowered = lower_single_op(call, snapshots)
    try:
        return lowered.load(call.context)
    except StageError:
        raise
    except Exception as error:
        raise StageError("lower", f"{type(error).__name__}: {_first_line(error)}") from error


def lower_single_op(call: OpCall, snapshots: Snapshots) -> LoweredOp:
    """`stage_single_op`, then stage `lower`: linalg -> LLVM dialect, as text for the
    RefBackend's JIT. Raises StageError."""
    staged = stage_single_op(call, snapshots)
    to_lower = staged.to_lower
    try:
        program = lower_linalg(
            to_lower.module,
            to_lower.result_dtypes,
            to_linalg=to_lower.to_linalg,
            snapshots=snapshots,
            opt_level=to_lower.opt_level,
        )
    except StageError:
        raise
    except Exception as error:
        raise StageError("lower", f"{type(error).__name__}: {_first_line(error)}") from error
    return staged.lowered(program)


@dataclass
class StagedOp:
    """One op signature up to the `lower` stage (`stage_single_op`): its backend module, which
    `refbackend.lower_together` lowers with a test's other ops, and what its LoweredOp holds
    besides its program."""

    to_lower: ToLower
    result_kind: str
    result_slots: tuple[int | None, ...]
    result_types: tuple[tuple[torch.Size, torch.dtype], ...]
    torch_ir: str
    decomposed: bool

    def lowered(self, program: LoweredProgram) -> LoweredOp:
        return LoweredOp(
            program, self.result_kind, self.result_slots, self.result_types, self.torch_ir, decomposed=self.decomposed
        )


def stage_single_op(call: OpCall, snapshots: Snapshots) -> StagedOp:
    """capture (one-node graph, or with `decompose` the op's decomposition) -> import ->
    torch-backend -> the backend's IR, in `context` (default: a new one).

    Raises StageError; `snapshots.texts["graph"]` holds the FX graph and
    `snapshots.texts["torch-backend"]` the single op as raw torch-dialect IR.
    """
    stage = "capture"
    context, backend, decompose = call.context, call.backend, call.decompose
    try:
        build = decomposed_op_graph if decompose else single_op_graph
        graph, fake_result = build(call.func, call.args, call.kwargs, call.fake_mode)
        snapshots.texts["graph"] = str(graph)
        stage = "import"
        context = context or new_context()
        importer = FxImporter(context=context)
        importer.import_stateless_graph(graph, func_name="main")
        torch_backend = run_stage(
            importer.module, "torch-backend", pipelines.FX_TO_TORCH_BACKEND, snapshots
        )  # EagerFrontend.to_torch_backend
        stage = "backend"
        to_lower = stage_torch_backend_ir(
            module_text(torch_backend), backend, snapshots=snapshots, opt_level=call.opt_level, context=context
        )
    except StageError:
        raise
    except Exception as error:
        raise StageError(stage, f"{type(error).__name__}: {_first_line(error)}") from error
    if isinstance(fake_result, torch.Tensor):
        kind, slots, fakes = "tensor", (0,), [fake_result]
    else:
        kind = "list" if isinstance(fake_result, list) else "tuple"
        fakes = [r for r in fake_result if r is not None]
        indices = iter(range(len(fakes)))
        slots = tuple(None if r is None else next(indices) for r in fake_result)
    types = tuple((torch.Size(f.shape), f.dtype) for f in fakes)
    return StagedOp(to_lower, kind, slots, types, snapshots.texts["torch-backend"], decomposed=decompose)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _functional_variant(func: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The functional overload of a mutating op: `add_.Tensor` -> `add.Tensor`, `max.dim_max` -> `max.dim`."""
    schema = func._schema
    name = schema.name.split("::")[-1]
    namespace = getattr(torch.ops, func.namespace)
    if _is_in_place(func):
        packet = getattr(namespace, name[:-1], None)
        # The same overload name first (`add_.Tensor` -> `add.Tensor`); else any with the
        # same arguments (`transpose_.default` -> `transpose.int`).
        candidates = [func._overloadname] + (packet.overloads() if packet is not None else [])
        wanted = [a.name for a in schema.arguments]
    else:  # out= variants: the same arguments without the destinations
        packet = getattr(namespace, name, None)
        candidates = packet.overloads() if packet is not None else []
        wanted = [a.name for a in schema.arguments if not _is_written(a)]
    for overload_name in candidates:
        overload = getattr(packet, overload_name, None)
        if overload is None or overload._schema.is_mutable:
            continue
        if [a.name for a in overload._schema.arguments] == wanted:
            return overload
    return None


def _is_in_place(func: torch._ops.OpOverload) -> bool:
    name = func._schema.name.split("::")[-1]
    return name.endswith("_") and not name.endswith("__")


def _is_written(argument: Any) -> bool:
    return argument.alias_info is not None and argument.alias_info.is_write


@dataclass(frozen=True)
class Plan:
    """How the eager session treats one op overload, worked out once per op."""

    name: str  # "aten.add.Tensor"
    native_reason: str | None  # set: stays native by design
    mutating: bool  # in-place or out=: run `functional`, then copy into `written`
    in_place: bool
    functional: torch._ops.OpOverload | None
    written: tuple[str, ...]  # names of the destination arguments
    argument_names: tuple[str, ...]


_PLANS: dict[torch._ops.OpOverload, Plan] = {}  # memoizes a pure function of the op


def plan(func: torch._ops.OpOverload) -> Plan:
    found = _PLANS.get(func)
    if found is None:
        reason = native_reason(func)
        mutating = func._schema.is_mutable and reason is None
        found = _PLANS[func] = Plan(
            name=str(func),
            native_reason=reason,
            mutating=mutating,
            in_place=_is_in_place(func),
            functional=_functional_variant(func) if mutating else None,
            written=tuple(a.name for a in func._schema.arguments if _is_written(a)),
            argument_names=tuple(a.name for a in func._schema.arguments),
        )
    return found
