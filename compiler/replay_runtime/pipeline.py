"""A pipeline: MLIR pass entries and Python passes, run in order on a module.

Entries are MLIR pass entries (`func.func(canonicalize)`) or Python passes,
`python:<module>:<function>`, a function taking an `ir.Module` (how tests emulate
broken compilers, and how the reference backend's bf16 boundary rewrite is named).
An entry naming this runtime (`python:compiler.replay_runtime.<module>:<function>`)
is found in the runtime that runs it, wherever it was copied to; a bundle's own
pass modules are registered in `PASS_MODULES`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence

PYTHON_PASS = "python:"
RUNTIME_PACKAGE = "compiler.replay_runtime"  # this package's name in the project
# module name -> a Python pass module a bundle carries as `<module name>.py`
PASS_MODULES: dict[str, ModuleType] = {}


def as_text(pipeline: Sequence[str]) -> str:
    """The textual form `PassManager.parse` takes."""
    return "builtin.module(" + ",".join(pipeline) + ")"


def python_pass_module(entry: str) -> str:
    """`python:tests.broken_compilers:reject_exp` -> `tests.broken_compilers`."""
    return entry[len(PYTHON_PASS) :].partition(":")[0]


def python_pass(entry: str) -> Callable:
    module_name, _, function = entry[len(PYTHON_PASS) :].partition(":")
    if module_name == RUNTIME_PACKAGE or module_name.startswith(RUNTIME_PACKAGE + "."):
        module_name = __package__ + module_name[len(RUNTIME_PACKAGE) :]
    module = PASS_MODULES.get(module_name) or importlib.import_module(module_name)
    return getattr(module, function)


def load_pass_modules(directory: Path, pipeline: Sequence[str]) -> None:
    """Register the pass modules the pipeline names that `directory` carries (a bundle's)."""
    for entry in pipeline:
        name = python_pass_module(entry) if entry.startswith(PYTHON_PASS) else None
        path = directory / f"{name}.py"
        if name and name not in PASS_MODULES and path.exists():
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses look their module up
            spec.loader.exec_module(module)
            PASS_MODULES[name] = module


def run_entries(module, pipeline: Sequence[str]) -> None:
    """Run a pipeline with Python passes in place; raises ir.MLIRError (or anything) on failure."""
    from torch_mlir import passmanager

    run: list[str] = []
    for entry in list(pipeline) + [None]:
        if entry is None or entry.startswith(PYTHON_PASS):
            if run:
                with module.context:
                    passmanager.PassManager.parse(as_text(run)).run(module.operation)
                run = []
            if entry is not None:
                with module.context:
                    python_pass(entry)(module)
        else:
            run.append(entry)
