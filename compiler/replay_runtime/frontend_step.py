"""A frontend bundle's replay: run the reduced `nn.Module` through the frontend that refused it.

Three frontends, with torch and torch-mlir alone: `ltc` (a trace on the lazy device,
with the suite's Lazy-key decompositions: `init_ts_backend`, which the suite's LTC
frontend uses too), `fx` (`torch.export` + torch-mlir's decompositions + `FxImporter`)
and `onnx` (`torch.onnx.export`, then torch-mlir's ONNX importer). Each `run_*`
returns the failure as the suite words it (so its normalized form can be compared
with the bundle's), or None when the frontend accepts the module.
"""

from __future__ import annotations

import math
import re

import torch

from .signature import first_line, normalize

_INITIALIZED = False
_DECOMPOSITIONS = None  # the Library holding our Lazy-key kernels must stay alive


# Ops the TorchScript LTC backend has no lowering for (it would run them eagerly on
# the CPU, breaking the graph) whose PyTorch decompositions trace with ops it has.
# Only decompositions into aten ops work: those into prims need `as_strided`, which
# the lazy device lacks. tests/test_jit_importer.py checks each one traces.
LAZY_DECOMPOSED_OPS = (
    "hardtanh",
    "hardswish",
    "mish",
    "any.dim",
    "dot",
    "floor_divide",
    "linalg_vector_norm",
    "count_nonzero.dim_IntList",
)


# Factories LTC implements as `*.out` ops into an empty lazy tensor, which the torch
# dialect's backend contract cannot lower. Their values depend only on their scalar
# arguments, static under LTC, so they are made on the CPU and enter the graph as
# constants.
LAZY_CPU_FACTORIES = ("arange", "arange.start", "arange.start_step", "eye", "eye.m", "linspace")


def _var_mean(x, dim=None, *, correction=None, keepdim=False):
    """var_mean from mean, sub, mul, sum and div (PyTorch's own goes through prims)."""
    dims = list(range(x.dim())) if dim is None else [d % max(x.dim(), 1) for d in dim]
    count = math.prod(x.shape[d] for d in dims)
    mean = x.mean(dims, keepdim=True)
    centered = x - mean
    divisor = max(count - (1 if correction is None else correction), 0)
    var = (centered * centered).sum(dims, keepdim=keepdim) / divisor
    return var, mean if keepdim else x.mean(dims)  # squeeze would need as_strided


def _logical_and(a, b):
    """logical_and from ne and bitwise_and, which broadcast themselves (PyTorch's own
    broadcasts with `expand`, a view the lazy device cannot take: as_strided)."""
    return torch.bitwise_and(a != 0, b != 0)


def _rot90(x, k=1, dims=(0, 1)):
    """rot90 from flip and transpose_copy (PyTorch's own ends in an in-place transpose_,
    which the lazy device runs eagerly as as_strided_)."""
    torch._check(len(dims) == 2, lambda: f"expected total rotation dims == 2, but got dims = {len(dims)}")
    torch._check(x.dim() >= 2, lambda: f"expected total dims >= 2, but got total dims = {x.dim()}")
    first, second = (d % x.dim() for d in dims)
    torch._check(first != second, lambda: f"expected rotation dims to be different, but got dim0 = {first}")
    k %= 4
    if k == 1:
        return torch.transpose_copy(torch.flip(x, [second]), first, second)
    if k == 2:
        return torch.flip(x, [first, second])
    if k == 3:
        return torch.transpose_copy(torch.flip(x, [first]), first, second)
    return x.clone()


# Ops without a lowering whose decomposition we write here.
LAZY_OWN_DECOMPOSITIONS = {
    "rot90": _rot90,
    "logical_and": _logical_and,
    "var_mean.correction": _var_mean,
    "var.correction": lambda *args, **kwargs: _var_mean(*args, **kwargs)[0],
}


def _on_cpu(factory):
    def kernel(*args, **kwargs):
        return factory(*args, **{**kwargs, "device": torch.device("cpu")}).to("lazy")

    return kernel


def _aten_op(name: str):
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def init_ts_backend() -> None:
    """The TorchScript LTC backend, with our Lazy-key decompositions registered (once per process)."""
    global _INITIALIZED, _DECOMPOSITIONS  # the backend can be initialized once per process
    if not _INITIALIZED:
        import torch._lazy
        import torch._lazy.metrics
        import torch._lazy.ts_backend
        from torch._decomp import decomposition_table

        torch._lazy.ts_backend.init()
        _DECOMPOSITIONS = torch.library.Library("aten", "IMPL")
        for name in LAZY_DECOMPOSED_OPS:
            _DECOMPOSITIONS.impl(name, decomposition_table[_aten_op(name)], "Lazy")
        for name, decomposition in LAZY_OWN_DECOMPOSITIONS.items():
            _DECOMPOSITIONS.impl(name, decomposition, "Lazy")
        for name in LAZY_CPU_FACTORIES:
            _DECOMPOSITIONS.impl(name, _on_cpu(_aten_op(name)), "Lazy")
        _INITIALIZED = True


def exporter_message(error: Exception) -> str:
    """What the exporter's long report says of the cause: the aten op being translated and
    the innermost exception of its "Exception summary"; else its first line."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    summary = text.partition("## Exception summary")[2]
    causes = [line for line in summary.splitlines() if line.startswith("<class ")]
    if not causes:
        return first_line(error)
    root = re.sub(r"^<class '(?:[\w]+\.)*(\w+)'>: ", r"\1: ", causes[0])
    target = re.search(r"target=(torch\.ops\.[\w.]+)", summary)
    return (f"{target[1]}: " if target else "") + root


def run_ltc(module, args, dynamic_shapes) -> str | None:
    """Trace on the lazy device (TorchScript LTC backend); ops it cannot lower run eagerly."""
    init_ts_backend()
    torch._lazy.metrics.reset()
    try:
        with torch.device("lazy"):
            outputs = module.to("lazy")(*[x.to("lazy") for x in args])
    except Exception as error:
        return f"lazy tensor trace: {type(error).__name__}: {first_line(error)}"
    fallbacks = sorted(n for n in torch._lazy.metrics.counter_names() if n.startswith("aten::"))
    if fallbacks:  # the counters of ops that fell back to the CPU
        return f"LTC has no lowering for {', '.join(fallbacks)} (ran eagerly on CPU)"
    # The TorchScript graph LTC made for the outputs, read back as a graph.
    flat = [x for x in torch.utils._pytree.tree_leaves(outputs) if isinstance(x, torch.Tensor)]
    try:
        torch._C.parse_ir(torch._C._lazy._get_tensors_backend(flat), parse_tensor_constants=True)
    except Exception as error:
        return f"lazy tensor trace: {type(error).__name__}: {first_line(error)}"
    return None


EXPORT_STEP = "torch.export"
DECOMPOSITIONS_STEP = "decompositions"  # its own label: another tool fails there


class StepFailure(Exception):
    """A frontend step that raised: `step` names it as the suite's signatures do."""

    def __init__(self, step: str, cause: Exception):
        super().__init__(f"{step}: {type(cause).__name__}: {first_line(cause)}")
        self.step, self.cause = step, cause


def export_program(module, args, dynamic_shapes, *, strict: bool = False, decompose=None):
    """`torch.export.export`, then `decompose(program)` when given; the suite's capture
    stage and the bundles' replay both export through here, so a failure is labelled alike."""
    step = EXPORT_STEP
    try:
        program = torch.export.export(module, tuple(args), dynamic_shapes=dynamic_shapes, strict=strict)
        step = DECOMPOSITIONS_STEP
        return decompose(program) if decompose is not None else program
    except Exception as error:
        raise StepFailure(step, error) from error


def _torch_mlir_decompositions(program):
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return program.run_decompositions(get_decomposition_table())


REGISTERED, CIA = "registered", "cia"  # where torch keeps a decomposition


def torch_op(name: str):
    """`aten.x.overload` as its OpOverload."""
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def torch_decompositions(entries) -> dict:
    """A decomposition table from torch alone: per (op name, kind), torch's registered
    decomposition (`registered`) or the op's own CompositeImplicitAutograd kernel (`cia`),
    the two kinds torch-mlir's table takes from torch."""
    from torch._decomp import decomposition_table
    from torch._export.utils import _get_decomp_for_cia

    ops = [(torch_op(name), kind) for name, kind in entries]
    return {op: decomposition_table[op] if kind == REGISTERED else _get_decomp_for_cia(op) for op, kind in ops}


def run_fx(module, args, dynamic_shapes, decompositions=None) -> str | None:
    """torch.export, torch-mlir's decomposition table (or `decompositions`, entries of
    `torch_decompositions`), then torch-mlir's FxImporter. A failure in torch.export, or in
    decompositions given by entries, replays with torch alone (torch-mlir is imported after)."""
    decompose = _torch_mlir_decompositions
    if decompositions is not None:
        decompose = lambda program: program.run_decompositions(torch_decompositions(decompositions))  # noqa: E731
    try:
        program = export_program(module, args, dynamic_shapes, decompose=decompose)
    except StepFailure as failure:
        return str(failure)
    import torch_mlir.dialects.torch as torch_dialect
    from torch_mlir import ir
    from torch_mlir.extras.fx_importer import FxImporter

    context = ir.Context()
    torch_dialect.register_dialect(context)
    try:
        FxImporter(context=context).import_frozen_program(program, func_name="main")
    except Exception as error:
        return f"FxImporter: {type(error).__name__}: {first_line(error)}"
    return None


def run_onnx(module, args, dynamic_shapes) -> str | None:
    """torch.onnx.export (dynamo), ONNX shape inference, then torch-mlir's onnx_importer."""
    import onnx
    import torch_mlir.dialects.torch as torch_dialect
    from torch_mlir import ir
    from torch_mlir.extras import onnx_importer

    try:
        model = torch.onnx.export(module, tuple(args), dynamic_shapes=dynamic_shapes, dynamo=True).model_proto
    except Exception as error:
        return f"torch.onnx.export: {type(error).__name__}: {exporter_message(error)}"
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as error:
        return f"ONNX shape inference: {type(error).__name__}: {first_line(error)}"
    model.graph.name = "main"
    context = ir.Context()
    torch_dialect.register_dialect(context)
    try:
        info = onnx_importer.ModelInfo(model)
        imported = info.create_module(context=context)
        onnx_importer.NodeImporter.define_function(info.main_graph, imported.operation).import_all()
    except Exception as error:
        return f"onnx_importer: {type(error).__name__}: {first_line(error)}"
    return None


RUN = {"ltc": run_ltc, "fx": run_fx, "onnx": run_onnx}


def main(module, args, frontend: str, dynamic_shapes, expected: str, decompositions=None) -> int:
    """Exit status: 1 the frontend still fails with `expected` (normalized), 0 it accepts the module, 2 otherwise."""
    if decompositions is not None:
        failure = run_fx(module, args, dynamic_shapes, decompositions)
    else:
        failure = RUN[frontend](module, args, dynamic_shapes)
    if failure is None:
        print("not reproduced: the frontend accepts the module")
        return 0
    print(failure)
    if normalize(failure) == expected:
        print("REPRODUCED")
        return 1
    print(f"different failure; expected: {expected}")
    return 2
