"""The e2e framework: registry, seeded inputs, golden traces, comparison, results."""

from e2e.framework.registry import (
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
from e2e.framework.testutils import TestUtils

__all__ = [
    "GLOBAL_TEST_REGISTRY",
    "FunctionModule",
    "Test",
    "TestUtils",
    "Tolerance",
    "annotate_args",
    "e2e_test",
    "export",
    "op_test",
    "op_tests",
    "register_test_case",
]
