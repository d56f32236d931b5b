"""An FX capture kept across processes (the frontend cache, a test host handing over):
`FxCapture` pickles as `torch.export.save` bytes, restored with the node metadata torch-mlir's
FX importer reads.

A capture depends on torch and the test, not on torch-mlir, so the suite keeps it across a
torch-mlir rebuild and imports it again.
"""

from __future__ import annotations

import functools
import io

import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from compiler.stages import first_line


class FxCapture:
    """Stage `capture` of `module.<method>`: the decomposed ExportedProgram and the capture's notes.

    Pickled (the frontend cache, a test host handing over), the program travels as
    `torch.export.save` bytes, taken at the first pickling: the importer freezes the program
    in place, and a frozen program no longer validates, so the suite pickles a capture into
    its cache before importing it. Unpickled, the program is loaded when first asked for. A
    program that does not save or load is `None`, with `lost` saying why: the caller
    captures again.
    """

    def __init__(self, program: ExportedProgram | None, notes: list[str]):
        self._program = program
        self.notes = notes
        self.lost: str | None = None
        self._saved: bytes | None = None

    @property
    def program(self) -> ExportedProgram | None:
        if self._program is None and self._saved is not None:
            _name_return_types()
            try:
                self._program = _as_captured(torch.export.load(io.BytesIO(self._saved)))
            except Exception as error:  # torch's deserializer: a program it cannot read is captured again
                self.lost = f"torch.export.load: {type(error).__name__}: {first_line(error)[:200]}"
                self._saved = None
        return self._program

    def lost_on_the_way(self) -> str | None:
        """None when the program is here (loaded, if it was kept); else why it was lost."""
        return self.lost if self.program is None else None

    def __getstate__(self) -> dict:
        if self._saved is None and self.lost is None and self._program is not None:
            if specialized := specialized_values(self._program):
                # torch.export.save writes such a dim as the number it became; the importer
                # would type the loaded program more precisely than the captured one.
                self.lost = f"torch.export specialized a dynamic dim of {', '.join(specialized[:3])}"
                return {"saved": None, "notes": self.notes, "lost": self.lost}
            try:
                self._saved = _saved_without_inputs(self._program)
            except Exception as error:  # torch's serializer: a program it cannot write is captured again
                self.lost = f"torch.export.save: {type(error).__name__}: {first_line(error)[:200]}"
        return {"saved": self._saved, "notes": self.notes, "lost": self.lost}

    def __setstate__(self, state: dict) -> None:
        self.__init__(None, state["notes"])
        self.lost, self._saved = state["lost"], state["saved"]


def _as_captured(program: ExportedProgram) -> ExportedProgram:
    """A loaded `program` with the node metadata torch.export gave it when captured, where
    torch-mlir's FX importer reads it and `torch.export.load` does not restore it:

    - the value of an op that returns one `Tensor[]` (`split`, `unbind`, an LSTM's parts) is a
      list when captured, a tuple once loaded, and the importer types only the list;
    - a tensor value's `tensor_meta` is not saved, and the importer reads it (`.item()`'s
      `_local_scalar_dense` takes its operand's dtype from it).
    """
    from torch.fx.passes.shape_prop import _extract_tensor_metadata

    for node in program.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and "tensor_meta" not in node.meta:
            node.meta["tensor_meta"] = _extract_tensor_metadata(value)
        if node.op != "call_function" or not isinstance(value, tuple):
            continue
        returns = getattr(getattr(node.target, "_schema", None), "returns", ())
        if len(returns) == 1 and isinstance(returns[0].type, torch.ListType):
            node.meta["val"] = list(value)
    return program


@functools.cache
def _name_return_types() -> int:
    """Give torch's own structured results (`torch.return_types.max`, `sort`, `topk`, ...) the
    serialized name `torch.export.save` asks of a pytree node: torch registers them without
    one, so a program returning one did not save (51 of the suite's captures were made again
    after every torch-mlir rebuild). The name is the class's own, given before a capture is
    saved and before one is loaded, in whichever process. How many were named (0 when torch's
    registry has changed shape: such programs are then captured again)."""
    try:
        from torch.return_types import all_return_types
        from torch.utils import _pytree
    except ImportError:
        return 0
    named = 0
    for cls in all_return_types:
        entry = _pytree.SUPPORTED_SERIALIZED_TYPES.get(cls)
        if entry is None or entry.serialized_type_name != _pytree.NO_SERIALIZED_TYPE_NAME_FOUND:
            continue
        name = f"{cls.__module__}.{cls.__name__}"
        if name in _pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE:
            continue
        _pytree.SUPPORTED_SERIALIZED_TYPES[cls] = entry._replace(serialized_type_name=name)
        _pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE[name] = cls
        named += 1
    return named


def _saved_without_inputs(program: ExportedProgram) -> bytes:
    """`torch.export.save` bytes of `program` without the example inputs it was exported
    with: torch.export.save writes them too, and nothing reads them back here (the test
    makes its own), so a capture of a 512 MiB input was 512 MiB on disk and on the pipe."""
    _name_return_types()
    inputs, program._example_inputs = program._example_inputs, None
    try:
        buffer = io.BytesIO()
        torch.export.save(program, buffer)
        return buffer.getvalue()
    finally:
        program._example_inputs = inputs


def specialized_values(program: ExportedProgram) -> list[str]:
    """The graph values with a symbolic dim torch.export later found to be a constant (a
    dynamic dim the program forces static): the importer types it `?` in the captured
    program and as the constant in a saved and loaded one."""
    found = []
    for node in program.graph.nodes:
        for value in pytree.tree_leaves(node.meta.get("val")):
            if isinstance(value, torch.Tensor) and any(
                isinstance(dim, torch.SymInt) and dim.node.maybe_as_int() is not None for dim in value.shape
            ):
                found.append(node.name)
                break
    return found
