"""The e2e framework: registry, seeded inputs, golden traces, comparison, results.

The names below are imported when first used (PEP 562): a tool that reads results files
(`e2e.framework.results_files`, the reproducer service) does not import torch for them."""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what the names are, for readers and for `e2e.framework.dependencies` (it reads imports)
    from e2e.framework.registry import (  # noqa: F401
        GLOBAL_TEST_REGISTRY,
        FunctionModule,
        Test,
        Tolerance,
        annotate_args,
        e2e_test,
        export,
        op_test,
        op_tests,
        register_test_case,
    )
    from e2e.framework.testutils import TestUtils  # noqa: F401

_NAMES = {
    "GLOBAL_TEST_REGISTRY": "registry",
    "FunctionModule": "registry",
    "Test": "registry",
    "Tolerance": "registry",
    "annotate_args": "registry",
    "e2e_test": "registry",
    "export": "registry",
    "op_test": "registry",
    "op_tests": "registry",
    "register_test_case": "registry",
    "TestUtils": "testutils",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'e2e.framework' has no attribute {name!r}")
    return getattr(importlib.import_module(f"e2e.framework.{_NAMES[name]}"), name)
