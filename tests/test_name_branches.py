"""No code branches on a frontend's or a config's name: a component that differs says so by a
method or an attribute of its own (`compiler.frontends.Frontend`, `compiler.executors.Executor`,
a config's explainers), and the one place that names it is its registration.

The scan reads every module of `compiler/` and `e2e/` (not the suite's tests) with `ast` and
finds: a comparison with a frontend's or a non-backend config's name (`spec == "eager"`,
`given in ("onnx", ...)`), a `startswith`/`endswith` on one (`name.startswith("onnx")`), a
parameter defaulting to one (`recapture(frontend="fx")`), and a table keyed by two or more of
them (`{"ltc": ..., "fx": ...}[step]`) that is not a registration (`REGISTRATIONS`).
"""

from __future__ import annotations

import ast
from pathlib import Path

from compiler import pipelines
from compiler.frontends import FRONTENDS
from e2e.configs import BUILT_IN, CONFIG_NAMES, OPT_IN_CONFIG_NAMES, RUNTIME_CONFIG_NAMES

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("compiler", "e2e")
NOT_SCANNED = ("e2e/test_suite",)  # tests name configs in their own xfail-like data
# A backend's name is also its FX config's (linalg, tosa, stablehlo): a branch on the backend
# (its pipeline) is the backend's business, not a config's; those names are left out.
NAMES = frozenset(FRONTENDS) | (
    frozenset(CONFIG_NAMES + OPT_IN_CONFIG_NAMES + RUNTIME_CONFIG_NAMES) - set(pipelines.BACKENDS)
)
# The tables that are registrations: the one place a name is written, with why.
REGISTRATIONS = {
    ("compiler/frontends/__init__.py", "FRONTENDS"),  # frontend name -> its class
    ("e2e/configs/pipeline.py", "CONFIGS"),  # config name -> its PipelineConfig
    ("e2e/configs/__init__.py", "BUILT_IN"),  # config name -> its module
    # A bundle's frontend step, by the name case.json gives it (data read from a file; the
    # replay runtime imports nothing of the project, so it cannot ask the frontend object).
    ("compiler/replay_runtime/frontend_step.py", "RUN"),
}


def _named(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and node.value in NAMES else None


def _names_in(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for n in map(_named, node.elts) if n]
    return [n] if (n := _named(node)) else []


def name_branches(source: str, path: str = "<source>") -> list[str]:
    """Each branch on a frontend's or config's name in `source`, as `path:line: code`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    registered: set[int] = set()
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and (path, t.id) in REGISTRATIONS for t in targets) and node.value is not None:
            registered |= {id(n) for n in ast.walk(node.value)}
    found = []
    for node in ast.walk(tree):
        hit = False
        if isinstance(node, ast.Compare):
            hit = any(_names_in(side) for side in (node.left, *node.comparators))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            hit = node.func.attr in ("startswith", "endswith") and any(_names_in(a) for a in node.args)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            hit = any(_named(d) for d in defaults)
        elif isinstance(node, ast.Dict) and id(node) not in registered:
            hit = sum(1 for key in node.keys if key is not None and _named(key)) >= 2
        if hit:
            found.append(f"{path}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def _modules() -> list[Path]:
    return sorted(
        path
        for folder in SCANNED
        for path in (ROOT / folder).rglob("*.py")
        if not any(path.relative_to(ROOT).as_posix().startswith(skip) for skip in NOT_SCANNED)
    )


def test_no_code_branches_on_a_frontend_or_config_name():
    found = [hit for path in _modules() for hit in name_branches(path.read_text(), path.relative_to(ROOT).as_posix())]
    assert not found, "give the component a method or an attribute instead:\n" + "\n".join(found)


def test_the_scan_finds_the_branches_it_replaced():
    """The branches the frontend seam replaced, as they were written: each is found again."""
    replaced = {
        'if spec == "eager":\n    pass\n': 1,  # configs/__init__.py's load_config
        'x = [n for n in names if not n.startswith("onnx")]\n': 1,  # support.py's sweep configs
        'if self.toolchain().executor_input == "onnx":\n    pass\n': 1,  # configs/runtime.py
        'def recapture(self, call, dynamic, frontend: str = "fx"):\n    pass\n': 1,  # prepared.py
        'step = {"ltc": "a", "fx": "b", "onnx": "c"}[case.pipeline[0]]\n': 1,  # reducer/frontend_graph.py
        'run(module, "torchscript") if name in ("ltc", "torchscript") else None\n': 1,  # jit_compile.py
        'if backend in ("linalg", "tosa"):\n    pass\n': 0,  # a backend's name: not a config's branch
    }
    for source, count in replaced.items():
        assert len(name_branches(source)) == count, source


def test_every_built_in_config_is_registered_where_it_is_defined():
    """`load_config` finds a built-in config by its registration alone (`BUILT_IN`)."""
    assert set(BUILT_IN) == set(CONFIG_NAMES + OPT_IN_CONFIG_NAMES)
