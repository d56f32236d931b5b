"""What makes a bundle stand alone: the replay runtime copied whole, and its Python passes.

Someone reading an upstream issue has torch, torch-mlir and numpy, not this project.
So a bundle carries `replay_runtime/`, a copy of `compiler.replay_runtime` (which
imports nothing else of the project), and its `repro.py` loads that copy from next to
itself (`LOADER`) and calls it. The copy is made when the bundle is written, so a
bundle always carries the code that verified it. A Python pass module the case's
pipeline names (`python:<module>:<function>`) outside the runtime is copied as
`<module>.py`, provided it imports nothing from the project; a runtime's replay entry
(`compiler.executors.replay`) needs the installed project anyway.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import shutil
from pathlib import Path
from typing import Sequence

import compiler.replay_runtime
from compiler.replay_runtime.pipeline import PYTHON_PASS, RUNTIME_PACKAGE, python_pass_module
from compiler.replay_runtime.replay import RUNTIME_PASS

PROJECT_PACKAGES = ("compiler", "e2e", "tests", "torch_mlir_e2e_test")
RUNTIME_DIR = Path(compiler.replay_runtime.__file__).parent
RUNTIME_COPY = "replay_runtime"  # the copy's directory in a bundle, and its package name there

# repro.py's first lines: load the copy next to the script, without putting the bundle
# directory on sys.path (python -I leaves it off) and without writing bytecode into it.
LOADER = f'''
import importlib
import importlib.util
import sys
from pathlib import Path


def runtime(module: str):
    """A module of the replay runtime copied next to this file (`{RUNTIME_COPY}/`)."""
    if "{RUNTIME_COPY}" not in sys.modules:
        here = Path(__file__).resolve().parent / "{RUNTIME_COPY}"
        sys.dont_write_bytecode = True  # leave the bundle as it was written
        spec = importlib.util.spec_from_file_location(
            "{RUNTIME_COPY}", here / "__init__.py", submodule_search_locations=[str(here)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["{RUNTIME_COPY}"] = package
        spec.loader.exec_module(package)
    return importlib.import_module("{RUNTIME_COPY}." + module)
'''


class NotStandalone(ValueError):
    """A Python pass whose module needs this project: the bundle cannot stand alone."""


def project_imports(source: str) -> list[str]:
    """The modules of this project that `source` imports (absolute imports; relative ones stay inside)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in PROJECT_PACKAGES]
    return found


def pass_modules(pipeline: Sequence[str]) -> dict[str, str]:
    """`<module>.py` -> source, for each Python pass module of the pipeline a bundle must carry."""
    files = {}
    for entry in pipeline:
        if not entry.startswith(PYTHON_PASS) or entry.startswith(RUNTIME_PASS):
            continue
        module = python_pass_module(entry)
        if module == RUNTIME_PACKAGE or module.startswith(RUNTIME_PACKAGE + "."):
            continue
        source = inspect.getsource(importlib.import_module(module))
        if imported := project_imports(source):
            raise NotStandalone(f"the Python pass module {module} imports this project ({', '.join(imported)})")
        files[f"{module}.py"] = source
    return files


def write_runtime(bundle_dir: Path, pipeline: Sequence[str] = ()) -> None:
    """Copy the replay runtime whole into the bundle, and the pass modules its pipeline needs."""
    files = pass_modules(pipeline)  # refused before anything is written
    target = bundle_dir / RUNTIME_COPY
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(RUNTIME_DIR, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name, source in files.items():
        (bundle_dir / name).write_text(source)
