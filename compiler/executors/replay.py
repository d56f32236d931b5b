"""A runtime executor as Python pass entries, so a toolchain's stage lists end in it and the
reducer replays (and ddmin-reduces) a runtime failure with the runtime as its oracle.

    python:compiler.executors.replay:<executor>_<backend>       compile (stage `lower`)
    python:compiler.executors.replay:<executor>_<backend>_run   compile, then call @main once
                                                                on made-up inputs (stage `execute`)

(`-` in names becomes `_`.) A runtime's StageError names its entry as the failing pass,
which is how a result's signature and its replay line up.
"""

from __future__ import annotations

import contextlib
import re
import sys

import numpy as np
import torch

from compiler import pipelines
from compiler.executors import load_executor, runtime_executors
from compiler.refbackend import ELEMENT_DTYPES

PYTHON_PASS = "python:compiler.executors.replay:"
# (executor, the IR it is given): every runtime, with every IR it accepts
RUNTIMES = tuple((name, accepted) for name, cls in runtime_executors().items() for accepted in cls.accepts)
DYNAMIC_DIM = 3


def function_name(executor: str, backend: str, run: bool = False) -> str:
    return f"{executor}_{backend}{'_run' if run else ''}".replace("-", "_")


def entry(executor: str, backend: str, run: bool = False) -> str:
    return PYTHON_PASS + function_name(executor, backend, run)


def parse(pass_entry: str) -> tuple[str, str, bool] | None:
    """(executor, backend, run) of a replay entry; None for any other entry."""
    for executor, backend in RUNTIMES:
        for run in (False, True):
            if pass_entry == entry(executor, backend, run):
                return executor, backend, run
    return None


def compile_for(pass_entry: str, module, result_dtypes):
    """The program the runtime a replay entry names compiles from `module`."""
    from compiler.stages import Snapshots

    executor, backend, _ = parse(pass_entry)
    return load_executor(executor, input=backend).compile(module, result_dtypes, Snapshots())


@contextlib.contextmanager
def blamed(executor: str, backend: str, backend_ir: str, run: bool = False):
    """A runtime's StageError names its replay entry as the failing pass, and the IR it was given."""
    from compiler.stages import StageError

    try:
        yield
    except StageError as error:
        if error.failing_pass is None:
            error.failing_pass = entry(executor, backend, run)
            error.input_ir = error.input_ir or backend_ir
        raise


class BlamedProgram:
    """A runtime's program whose execute-stage errors name the replay entry that shows them."""

    def __init__(self, program, executor: str, backend: str, backend_ir: str):
        self.program, self.executor, self.backend, self.backend_ir = program, executor, backend, backend_ir

    def __call__(self, *tensors):
        with blamed(self.executor, self.backend, self.backend_ir, run=True):
            return self.program(*tensors)

    def close(self) -> None:
        self.program.close()


def _argument_tensors(text: str) -> list[torch.Tensor]:
    """Deterministic small inputs for @main's tensor arguments (builtin or torch-dialect types)."""
    header = re.search(r"func\.func @main\((.*?)\)\s*(->|\{|attributes)", text, re.S)
    inputs = []
    for builtin, torch_dims, torch_element in re.findall(
        r"tensor<((?:[\d?]+x)*\w+)>|!torch\.vtensor<\[([\d,-]*)\],\s*(\w+)>", header[1] if header else ""
    ):
        if builtin:
            *dims, element = builtin.split("x")
        else:
            dims, element = [d for d in torch_dims.split(",") if d], torch_element
        shape = [DYNAMIC_DIM if d in ("?", "-1") else int(d) for d in dims]
        values = torch.arange(int(np.prod(shape)) if shape else 1, dtype=torch.float64).reshape(shape) % 7 - 3
        dtype = ELEMENT_DTYPES.get(element, torch.float32)
        inputs.append((values > 0) if dtype == torch.bool else values.to(dtype))
    return inputs


def _compile(executor_name: str, backend: str, module):
    """(the runtime's program of `module`, its text) as the replay entries compile it."""
    from compiler.refbackend import result_dtypes
    from compiler.stages import Snapshots, module_text

    text = module_text(module)
    # Raw imported IR (torch's, or a frontend's own: torch-onnx) is typed as torch types.
    dtypes = _result_types(text) if backend in pipelines.BACKENDS else result_dtypes(text)
    return load_executor(executor_name, input=backend).compile(module, dtypes, Snapshots()), text


def write_native(pass_entry: str, text: str, directory) -> str:
    """What a `_run` entry runs, in the runtime's own terms: `text` compiled by the runtime the
    entry names, written into `directory` with the made-up inputs the entry calls @main with
    (`write_native`, as a runtime pair's native reproducer is); returns the command that runs it."""
    from pathlib import Path

    from compiler.stages import new_context, parse_module

    executor, backend, _ = parse(pass_entry)
    program, text = _compile(executor, backend, parse_module(text, new_context()))
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        return program.write_native(Path(directory), _argument_tensors(text))
    finally:
        program.close()


def _replay(executor_name: str, backend: str, run: bool):
    def replay(module) -> None:
        program, text = _compile(executor_name, backend, module)
        try:
            if run:
                program(*_argument_tensors(text))
        finally:
            program.close()

    replay.__name__ = function_name(executor_name, backend, run)
    return replay


def _result_types(text: str) -> list[torch.dtype]:
    header = re.search(r"func\.func @main\(.*?\)\s*->\s*(\(.*?\)|tensor<[^>]*>)\s*(attributes|\{)", text, re.S)
    if header is None:
        return []
    return [ELEMENT_DTYPES.get(e, torch.float32) for e in re.findall(r"tensor<(?:[\d?]+x)*(\w+)>", header[1])]


for _executor, _backend in RUNTIMES:
    for _run in (False, True):
        setattr(sys.modules[__name__], function_name(_executor, _backend, _run), _replay(_executor, _backend, _run))
