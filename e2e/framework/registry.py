"""The test registry: every e2e test, by a unique name.

Two ways to write a test. The torch-mlir e2e form, accepted unchanged:

    class MmModule(torch.nn.Module):
        @export
        @annotate_args([None, ([-1, -1], torch.float32, True), ([-1, -1], torch.float32, True)])
        def forward(self, lhs, rhs):
            return torch.mm(lhs, rhs)

    @register_test_case(module_factory=lambda: MmModule())
    def MmModule_basic(module, tu: TestUtils):
        module.forward(tu.rand(4, 4), tu.rand(4, 4))

and the short form, inputs beside the module, variants by parametrization:

    @e2e_test(inputs=lambda tu: [tu.rand(3, 4)], dynamic=True,
              params={"Sin": dict(fn=torch.sin), "Cos": dict(fn=torch.cos)})
    class Unary(torch.nn.Module):
        def __init__(self, fn): ...

which registers `Unary_Sin` and `Unary_Cos`. `op_test` wraps a plain function.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import torch

from compiler.replay_runtime.compare import Tolerance  # noqa: F401 - re-exported: a test's tolerance
from e2e.framework.testutils import TestUtils

# An argument annotation as upstream writes it: (shape with -1 for dynamic dims, dtype,
# value semantics). The first entry of a method's list stands for `self` and is None.
ArgAnnotation = tuple[list[int], torch.dtype, bool] | tuple[list[int], torch.dtype]


@dataclass(frozen=True)
class Test:
    """One registered e2e test."""

    __test__ = False  # not a pytest class

    name: str
    module_factory: Callable[[], torch.nn.Module]
    # Calls methods of the (traced) module with inputs made by a seeded TestUtils.
    program_invoker: Callable[[Any, TestUtils], None]
    # Overrides the dtype table in compare.py for this test.
    tolerance: Tolerance | None = None
    source: str = ""  # "file.py:line", for error messages
    # This test's own per-pair budget in seconds (upstream's `timeout_seconds`); None: the run's.
    timeout_seconds: float | None = None
    # pytest marks the plugin puts on this test's items (e.g. "opinfo"), for `-m` selection.
    marks: tuple[str, ...] = ()
    # What the module is to a config: "torch" (an nn.Module to capture) or "onnx" (it carries
    # an ONNX model, `module.onnx_model`); a config runs the formats its `model_formats` names.
    model_format: str = "torch"
    # Why this test cannot run at all (e.g. an ONNX case with sequence types): its items skip.
    skip_reason: str | None = None
    # The suite file this test belongs to: the file whose module-level code registered it
    # (set by `register`); how the suite loader tells which file's tests these are.
    origin: str = ""
    # Makes the invoker's `tu` from the test's seed (upstream's form: upstream's own draws).
    test_utils: Callable[[int], TestUtils] = TestUtils
    # Explainers (`e2e.framework.judge`) of this test's own, asked after its config's
    # (a generated program's oracle, `e2e.generate.oracle`).
    explainers: tuple[Any, ...] = ()
    # The file that defines what the test runs, when it is not `origin`: its invoker's,
    # class's or inputs' file, or the data file it reads (a StableHLO testdata program).
    # The result cache keys on it (`e2e.framework.dependencies.test_dependencies`); "": none.
    defined_in: str = ""

    def arg_shapes(self, module: torch.nn.Module, method: str = "forward") -> list[list[int] | None] | None:
        """Per-argument shapes (-1 = dynamic) from `annotate_args`, without `self`."""
        annotations = getattr(getattr(type(module), method, None), "_e2e_arg_annotations", None)
        if annotations is None:
            return None
        return [None if a is None else list(a[0]) for a in annotations[1:]]


class RegistryError(ValueError):
    pass


GLOBAL_TEST_REGISTRY: dict[str, Test] = {}


def register(test: Test) -> Test:
    if test.name in GLOBAL_TEST_REGISTRY:
        previous = GLOBAL_TEST_REGISTRY[test.name]
        raise RegistryError(
            f"duplicate e2e test name {test.name!r} ({test.source}; first registered at {previous.source})"
        )
    if not test.origin:
        test = replace(test, origin=_registering_file(sys._getframe(1)))
    GLOBAL_TEST_REGISTRY[test.name] = test
    return test


def registered_from(file: str | os.PathLike) -> list[str]:
    """The names of the tests `file` registered (see `Test.origin`), in registration order."""
    origin = os.path.realpath(file)
    return [name for name, test in GLOBAL_TEST_REGISTRY.items() if test.origin == origin]


def _registering_file(frame) -> str:
    """The file whose module-level code is running the registration: the innermost module
    being executed, so a test registered through a helper (`register_zoo`, the OpInfo sweep)
    belongs to the suite file that called it, and a suite file imported by another one keeps
    its own tests. Outside any import, the file of the registering call."""
    caller = ""
    while frame is not None:
        file = frame.f_globals.get("__file__")
        if file and frame.f_code.co_name == "<module>":
            return _real(file)
        if file and not caller and file != __file__:
            caller = file
        frame = frame.f_back
    return _real(caller) if caller else ""


@functools.cache
def _real(file: str) -> str:
    return os.path.realpath(file)


def _source_of(obj: Any) -> str:
    """The "file:line" of a test's invoker, class or inputs, the line `inspect.getsourcelines`
    gives, without its cost: that tokenizes a function's whole block and parses a class's
    whole file again for each class (a third of importing a suite file of 100 tests)."""
    try:
        file = inspect.getsourcefile(obj)
        obj = inspect.unwrap(obj)  # as getsourcelines does, after the file was found
        if inspect.isclass(obj):
            line = _class_lines("".join(linecache.getlines(inspect.getsourcefile(obj))))[obj.__qualname__]
        else:
            line = inspect.findsource(obj)[1] + 1
        return f"{file}:{line}"
    except Exception:  # no source (a REPL, exec'd text that does not tokenize): its repr
        return repr(obj)


def _file_of(obj: Any) -> str:
    """The file a test's invoker, class or inputs is defined in ("" when none is known)."""
    try:
        return inspect.getsourcefile(obj) or ""
    except TypeError:  # a builtin
        return ""


@functools.lru_cache(maxsize=8)
def _class_lines(source: str) -> dict[str, int]:
    """Every class of a module's text, by qualified name: the line of its first decorator,
    else of its `class` (the first of a name, as `inspect.findsource` finds it)."""
    lines: dict[str, int] = {}

    class Finder(ast.NodeVisitor):
        def __init__(self) -> None:
            self.stack: list[str] = []

        def visit_FunctionDef(self, node) -> None:
            self.stack += [node.name, "<locals>"]
            self.generic_visit(node)
            del self.stack[-2:]

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_ClassDef(self, node) -> None:
            self.stack.append(node.name)
            lines.setdefault(".".join(self.stack), (node.decorator_list[0] if node.decorator_list else node).lineno)
            self.generic_visit(node)
            self.stack.pop()

    Finder().visit(ast.parse(source))
    return lines


# --- the torch-mlir e2e form ---------------------------------------------------------


def register_test_case(
    module_factory: Callable[[], torch.nn.Module],
    timeout_seconds: float | None = None,
    *,
    tolerance: Tolerance | None = None,
    test_utils: Callable[[int], TestUtils] = TestUtils,
):
    """Register the decorated invoker as a test named after the function.

    `timeout_seconds` is this test's deadline per config (None: the run's); `test_utils`
    makes the invoker's `tu` from the test's seed.
    """

    def decorator(invoker: Callable[[Any, TestUtils], None]):
        register(
            Test(
                invoker.__name__,
                module_factory,
                invoker,
                tolerance,
                _source_of(invoker),
                timeout_seconds=timeout_seconds,
                test_utils=test_utils,
                defined_in=_file_of(invoker),
            )
        )
        return invoker

    return decorator


def annotate_args(annotations: Sequence[ArgAnnotation | None]):
    """Shapes (-1 for dynamic dims) and dtypes of a method's arguments; entry 0 is `self`."""

    def decorator(method):
        method._e2e_arg_annotations = list(annotations)
        return method

    return decorator


def export(method):
    """Marks a method as part of the compiled program (kept for upstream compatibility)."""
    method._e2e_export = True
    return method


# --- the short form ------------------------------------------------------------------

InputsFn = Callable[..., Sequence[Any]]


def e2e_test(
    inputs: InputsFn,
    *,
    name: str | None = None,
    dynamic: bool | Sequence[Sequence[int] | None] = False,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    tolerance: Tolerance | None = None,
):
    """Register an nn.Module class as one test, or one test per entry of `params`.

    `inputs(tu)` returns the forward arguments. A `params` entry's keys go to the
    module's constructor and/or to `inputs`, each getting the keys it names (a key
    neither names is an error). `dynamic=True` makes every dim of every tensor input
    dynamic; a list gives per-input shapes with -1 for dynamic.
    Names: `name` (default: the class name), plus `_<variant>` per params entry.
    """

    def decorator(cls: type[torch.nn.Module]):
        base = name or cls.__name__
        variants = params.items() if params else [(None, {})]
        for variant, kwargs in variants:
            test_name = f"{base}_{variant}" if variant else base
            unused = set(kwargs) - _accepted(cls.__init__, kwargs) - _accepted(inputs, kwargs)
            if unused:
                raise RegistryError(
                    f"{test_name}: params {sorted(unused)} are taken neither by {cls.__name__}() nor by inputs"
                )
            register(
                Test(
                    test_name,
                    _factory(cls, _taken_by(cls.__init__, kwargs), inputs, dynamic, kwargs),
                    _invoker(inputs, dict(kwargs)),
                    tolerance,
                    _source_of(cls),
                    defined_in=_file_of(cls),
                )
            )
        return cls

    return decorator


def _accepted(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> set[str]:
    if fn is torch.nn.Module.__init__:  # takes **kwargs, but only to reject them
        return set()
    parameters = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return set(kwargs)
    return set(kwargs) & set(parameters)


def _taken_by(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k in _accepted(fn, kwargs)}


def op_test(
    name: str,
    fn: Callable[..., Any],
    inputs: InputsFn,
    *,
    dynamic: bool | Sequence[Sequence[int] | None] = False,
    tolerance: Tolerance | None = None,
    timeout_seconds: float | None = None,
) -> Test:
    """Register a test of a plain function of tensors (wrapped in a module)."""
    module_cls = type(name, (FunctionModule,), {})
    factory = _factory(module_cls, {"fn": fn}, inputs, dynamic, {})
    source, defined_in = _source_of(inputs), _file_of(inputs)
    return register(
        Test(name, factory, _invoker(inputs, {}), tolerance, source, timeout_seconds, defined_in=defined_in)
    )


def op_tests(
    base: str,
    fns: Mapping[str, Callable[..., Any]],
    inputs: InputsFn,
    *,
    dynamic: bool | Sequence[Sequence[int] | None] = False,
    tolerance: Tolerance | None = None,
) -> list[Test]:
    """One `op_test` per function, named `<base>_<key>`: a sweep in one definition."""
    return [op_test(f"{base}_{key}", fn, inputs, dynamic=dynamic, tolerance=tolerance) for key, fn in fns.items()]


class FunctionModule(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _call_inputs(inputs: InputsFn, tu: TestUtils, kwargs: Mapping[str, Any]) -> list[Any]:
    return list(inputs(tu, **_taken_by(inputs, kwargs)))


def _invoker(inputs: InputsFn, kwargs: Mapping[str, Any]):
    def invoke(module, tu: TestUtils) -> None:
        module.forward(*_call_inputs(inputs, tu, kwargs))

    return invoke


def _factory(cls, kwargs: Mapping[str, Any], inputs: InputsFn, dynamic, input_kwargs: Mapping[str, Any]):
    """A factory whose instances carry `dynamic` as an annotation of their forward."""
    if dynamic is False:
        return lambda: cls(**kwargs)
    if dynamic is True:
        example = _call_inputs(inputs, TestUtils(seed=0), input_kwargs)
        shapes = [[-1] * x.dim() if isinstance(x, torch.Tensor) else None for x in example]
    else:
        shapes = [None if s is None else list(s) for s in dynamic]
    annotations = [None] + [None if s is None else (s, None, True) for s in shapes]
    annotated = type(cls.__name__, (cls,), {"forward": annotate_args(annotations)(_forward_of(cls))})
    annotated.__module__ = cls.__module__
    return lambda: annotated(**kwargs)


def _forward_of(cls):
    forward = cls.forward

    def annotated_forward(self, *args, **kwargs):
        return forward(self, *args, **kwargs)

    return annotated_forward
