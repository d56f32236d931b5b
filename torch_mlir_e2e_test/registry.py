"""Upstream's `register_test_case`, registering into this project's registry.

Its tests draw their inputs as upstream does (`framework.UpstreamTestUtils`).

The comparison rule for tests in upstream's form: floating-point and complex outputs
are judged with upstream's tolerance, `torch.allclose(rtol=1e-3, atol=1e-7,
equal_nan=True)`, because the authors wrote their tests against it (statistical RNG
tests such as `RandModule_basic` pass only within it). Integer and bool outputs stay
exact, as for every test here: upstream's allclose also lets an int64 off-by-one pass
(`ElementwiseDivScalarRoundingModeFloorInt64Module_basic`), which is a real bug.
"""

from __future__ import annotations

from typing import Callable

import torch

from e2e.framework import registry
from e2e.framework.registry import GLOBAL_TEST_REGISTRY, Tolerance
from torch_mlir_e2e_test.framework import UpstreamTestUtils

__all__ = ["GLOBAL_TEST_REGISTRY", "UPSTREAM_TOLERANCE", "register_test_case"]

UPSTREAM_TOLERANCE = Tolerance(rtol=1e-3, atol=1e-7)
# Upstream's default per-test deadline.
UPSTREAM_TIMEOUT_SECONDS = 120


def register_test_case(module_factory: Callable[[], torch.nn.Module], timeout_seconds: int = UPSTREAM_TIMEOUT_SECONDS):
    """Register the decorated invoker, named after the function, as upstream does."""
    return registry.register_test_case(
        module_factory, timeout_seconds, tolerance=UPSTREAM_TOLERANCE, test_utils=UpstreamTestUtils
    )
