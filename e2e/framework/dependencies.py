"""What a test's result depends on by its own code: the files it registers from and runs,
and the project and suite modules they import, transitively (import statements read with
`ast`, never site-packages, never into the compiler: `LIBRARY_DIRS`)."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from e2e.framework.fingerprints import PROJECT, file_digest

if TYPE_CHECKING:
    from e2e.framework.registry import Test

# The bundled compiler is a library the tests call, not their own code: what a result owes
# it is in `versions_fingerprint` (every project source), what a capture owes it in
# `FRONTEND_SOURCES`. Followed from a test's imports (the registry imports a tolerance from
# `compiler.replay_runtime`, whose package imports the whole compiler), an edit to a
# lowering would look like an edit to every test and drop every capture.
LIBRARY_DIRS = ("compiler",)


def test_dependencies(test: Test) -> list[Path]:
    """The files `test`'s result depends on by its own code: the file that registered it
    (`Test.origin`), the file that defines what it runs (`Test.defined_in`: its invoker's,
    or a testdata program), and the project and suite modules they import,
    transitively, short of the compiler (`LIBRARY_DIRS`). A suite directory is the
    registering file's; only files in it or under the project root are followed (never
    site-packages)."""
    origin, defined_in = (
        Path(f).resolve() if f and os.path.isfile(f) else None for f in (test.origin, test.defined_in)
    )
    starts = tuple(dict.fromkeys(p for p in (origin, defined_in) if p is not None))
    roots = (PROJECT,) if origin is None else (PROJECT, origin.parent)
    return list(_closure(starts, roots, tuple(PROJECT / name for name in LIBRARY_DIRS)))


test_dependencies.__test__ = False  # not a pytest test, wherever it is imported


def module_dependencies(path: Path) -> list[Path]:
    """`path` and the project and suite modules it imports, transitively (its directory
    being its suite directory): what a suite file's import runs of this project's code."""
    path = Path(path).resolve()
    return list(_closure((path,), (PROJECT, path.parent)))


def files_digest(paths: Iterable[Path]) -> str:
    """The files' names (project-relative where they are the project's) and texts."""
    return _files_digest(tuple(paths))


@functools.cache
def _files_digest(paths: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        name = path.relative_to(PROJECT).as_posix() if path.is_relative_to(PROJECT) else str(path)
        digest.update(f"{name}\0{file_digest(path)}\0".encode())
    return digest.hexdigest()


@functools.cache
def _closure(starts: tuple[Path, ...], roots: tuple[Path, ...], libraries: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """`starts` and what they import, transitively, within `roots` and outside `libraries`
    (a start outside them counts, but what it imports is not followed)."""
    found = dict.fromkeys(starts)
    queue = [path for path in starts if _inside(path, roots)]
    while queue:
        for module in _imports(queue.pop()):
            if module not in found and _inside(module, roots) and not _inside(module, libraries):
                found[module] = None
                queue.append(module)
    return tuple(found)


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


@functools.cache
def _imports(path: Path) -> tuple[Path, ...]:
    """The files `path`'s import statements (anywhere in it) may load: looked for under
    the project root and beside `path` (a suite directory on `sys.path`), relative
    imports under its package; with every package `__init__.py` on the way."""
    absolute = (PROJECT, path.parent)
    found: dict[Path, None] = {}
    for level, module, names in _import_statements(path):
        if level:
            bases = (path.parents[level - 1],) if level <= len(path.parents) else ()
        else:
            bases = absolute
        found.update(dict.fromkeys(_module_files(module, bases)))
        for name in names:  # `from package import module`; `import a.b` has none
            found.update(dict.fromkeys(_module_files([*module, name], bases)))
    found.pop(path, None)
    return tuple(found)


_IMPORTS_DIR: Path | None = None  # where `_import_statements` keeps what it parsed (`keep_imports`)


def keep_imports(directory: Path | None) -> None:
    """Keep each parsed file's import statements in `directory`, by the file's text: parsing
    the suite's 71 modules is a quarter of a second of every command (None: parse each time)."""
    global _IMPORTS_DIR
    _IMPORTS_DIR = directory


def _import_statements(path: Path) -> list[tuple[int, list[str], list[str]]]:
    """(level, dotted module as parts, imported names) per import statement of `path`;
    `import a.b` is (0, [a, b], []). Read from `keep_imports`' directory when there."""
    kept = _IMPORTS_DIR / f"{file_digest(path)[:32]}.json" if _IMPORTS_DIR is not None else None
    if kept is not None:
        try:
            return [(level, module, names) for level, module, names in json.loads(kept.read_text())]
        except (OSError, ValueError, TypeError):
            pass
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    statements = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            statements += [(0, alias.name.split("."), []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module.split(".") if node.module else []
            statements.append((node.level, module, [a.name for a in node.names if a.name != "*"]))
    if kept is not None:
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_suffix(f".{os.getpid()}.partial")
            partial.write_text(json.dumps(statements))
            os.replace(partial, kept)  # another worker may be reading it
        except OSError:
            pass
    return statements


def _module_files(parts: list[str], bases: tuple[Path, ...]) -> list[Path]:
    """The files importing the dotted name `parts` from `bases` runs: each package's
    `__init__.py` on the way and the module itself."""
    files = []
    for base in bases:
        directory = base
        for i, part in enumerate(parts):
            module = directory / f"{part}.py"
            directory = directory / part
            if i == len(parts) - 1 and module.is_file():
                files.append(module)
            if not directory.is_dir():
                break
            if (directory / "__init__.py").is_file():
                files.append(directory / "__init__.py")
    return files
