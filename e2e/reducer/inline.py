"""A bundle's `repro.py`, self-contained: the replay code of this checkout, inlined.

Someone reading an upstream issue has torch, torch-mlir and numpy, not this project.
So `repro.py` is not a stub that imports the checkout: it is the replay itself
(`e2e.reducer.replay.main` and what it calls), copied definition by definition from
the modules below with `ast`, with the project's own imports dropped. The copy is
made when the bundle is written, so a bundle always carries the code that verified it.

A Python pass named in the case's pipeline (`python:<module>:<function>`) is found in
the inlined definitions, or else its whole module's source is embedded, provided that
module imports nothing from the project.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass
from typing import Sequence

PROJECT_PACKAGES = ("compiler", "e2e", "tests")


@dataclass(frozen=True)
class Piece:
    module: str
    names: tuple[str, ...]
    module_calls: bool = False  # also copy the module's top-level calls (registrations)


# In dependency order: each piece may use the names of the pieces before it.
PIECES = (
    Piece("compiler.pipelines", ("as_text",)),
    Piece(
        "compiler.stages",
        ("StageError", "_rebuild_stage_error", "new_context", "module_text", "parse_module", "format_diagnostics"),
        module_calls=True,
    ),
    Piece("compiler.native_output", ("Captured", "captured_stderr")),
    Piece(
        "compiler.softfloat",
        ("RUNTIME_MLIR", "RUNTIME_SYMBOLS", "_address_accessors", "Runtime", "_RUNTIME", "conversion_runtime"),
    ),
    Piece(
        "compiler.refbackend",
        (
            "DType",
            "DTYPES",
            "ELEMENT_DTYPES",
            "UnsupportedDType",
            "dtype_spec",
            "UnrankedMemRef",
            "_RANKED_CACHE",
            "ranked_memref_type",
            "to_storage_array",
            "from_storage_array",
            "memref_argument",
            "memref_view",
            "read_memref",
            "_memref_copy",
            "bf16_boundary_as_i16",
            "_return_callback_name",
            "SCALAR_RESULTS",
            "_signless",
            "_builtin_element",
            "ArgumentType",
            "ResultType",
            "argument_types",
            "check_arguments",
            "RefBackendProgram",
        ),
    ),
    # the JIT frontends' torch-backend stage ends with this Python pass (compiler.toolchain)
    Piece("compiler.jit_compile", ("_DEAD_ALLOCATIONS", "erase_dead_allocations")),
    Piece(
        "e2e.reducer.execute",
        (
            "SIGNATURE_ATTR",
            "DYNAMIC_DIM",
            "_main",
            "record_main_signature",
            "_tensor_types",
            "_input",
            "invoke_main",
        ),
    ),
    Piece("e2e.framework.registry", ("Tolerance",)),
    Piece(
        "e2e.framework.compare",
        (
            "TOLERANCES",
            "EXACT",
            "Mismatch",
            "tolerance_for",
            "CHUNK",
            "_flat_index",
            "_chunks",
            "_working_dtype",
            "compare_tensors",
        ),
    ),
    Piece(
        "e2e.framework.signature",
        (
            "Signature",
            "_RULES",
            "normalize",
            "pass_name",
            "stage_signature",
            "mismatch_signature",
            "first_native_error",
            "crash_signature",
            "ended_signature",
        ),
    ),
    Piece(
        "e2e.reducer.case",
        (
            "ERROR",
            "PYTHON_PASS",
            "RUNTIME_PASS",
            "INLINED",
            "Case",
            "python_pass",
            "run_entries",
            "compile_signature",
            "observe",
            "single_threaded",
            "load_arrays",
            "arity",
            "_observe_mismatch",
        ),
    ),
    Piece("e2e.reducer.replay", ("strip_reproducer_resource", "replay", "main")),
)


class NotInlinable(ValueError):
    """A Python pass whose module needs this project: the bundle cannot stand alone."""


def _is_project(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in PROJECT_PACKAGES


def _source(module: str) -> tuple[list[str], ast.Module]:
    text = inspect.getsource(importlib.import_module(module))
    return text.splitlines(), ast.parse(text)


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
        return {t.id for t in targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


def _segment(lines: list[str], node: ast.stmt) -> str:
    """The statement's lines (decorators included) without imports of the project inside it."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    drop: set[int] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.ImportFrom) and _is_project(inner.module):
            drop.update(range(inner.lineno, inner.end_lineno + 1))
        elif isinstance(inner, ast.Import) and any(_is_project(a.name) for a in inner.names):
            drop.update(range(inner.lineno, inner.end_lineno + 1))
    return "\n".join(lines[i - 1] for i in range(start, node.end_lineno + 1) if i not in drop)


def _imports(tree: ast.Module, lines: list[str]) -> list[str]:
    found = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__" and not _is_project(node.module):
            found.append(_segment(lines, node))
        elif isinstance(node, ast.Import) and not any(_is_project(a.name) for a in node.names):
            found.append(_segment(lines, node))
    return found


def _piece_code(piece: Piece) -> tuple[list[str], str]:
    """(its module's imports, the definitions the piece names, in source order)."""
    lines, tree = _source(piece.module)
    wanted, parts = set(piece.names), []
    for node in tree.body:
        if _defined_names(node) & wanted:
            parts.append(_segment(lines, node))
            wanted -= _defined_names(node)
        elif piece.module_calls and isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            parts.append(_segment(lines, node))
    if wanted:
        raise NotInlinable(
            f"{piece.module} no longer defines {', '.join(sorted(wanted))} (update e2e.reducer.inline.PIECES)"
        )
    return _imports(tree, lines), f"# --- from {piece.module} ---\n\n" + "\n\n\n".join(parts)


def embedded_pass_module(module: str) -> str:
    """The source of a Python pass's module, refused when it imports this project."""
    lines, tree = _source(module)
    for node in ast.walk(tree):
        names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in getattr(node, "names", [])]
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(_is_project(n) for n in names):
            raise NotInlinable(f"the Python pass module {module} imports this project ({', '.join(names)})")
    return "\n".join(lines) + "\n"


def inlined_pieces(pieces: Sequence[Piece] = PIECES) -> tuple[list[str], str]:
    """(the import lines they need, their definitions as one block of source)."""
    imports: list[str] = []
    bodies: list[str] = []
    for piece in pieces:
        piece_imports, body = _piece_code(piece)
        imports += [i for i in piece_imports if i not in imports]
        bodies.append(body)
    return imports, "\n\n\n".join(bodies)


def repro_script(docstring: str, pipeline: list[str]) -> str:
    """The text of a standalone repro.py replaying the bundle next to it."""
    imports, code = inlined_pieces()
    inlined = [p.module for p in PIECES]
    registrations = [f"INLINED[{m!r}] = globals()" for m in inlined]
    for entry in pipeline:
        # A runtime's replay pass is imported from the installed project: the runtime is needed anyway.
        if entry.startswith("python:") and not entry.startswith("python:compiler.executors.replay:"):
            module = entry[len("python:") :].partition(":")[0]
            if module not in inlined:
                source = embedded_pass_module(module)
                registrations.append(f"INLINED[{module!r}] = _namespace({module!r}, {source!r})")
                inlined.append(module)
    return "\n".join(
        [
            "#!/usr/bin/env python3",
            f'"""{docstring}"""',
            "",
            "from __future__ import annotations",
            "",
            "import sys",
            "import types",
            *imports,
            "",
            code,
            "",
            "# --- Python passes named in the pipeline ---",
            "",
            "def _namespace(name, source):",
            "    module = types.ModuleType(name)",
            "    sys.modules[name] = module  # dataclasses look their module up",
            "    exec(compile(source, name, 'exec'), module.__dict__)",
            "    return module.__dict__",
            "",
            *registrations,
            "",
            'if __name__ == "__main__":',
            "    sys.exit(main(Path(__file__).resolve().parent))",
            "",
        ]
    )
