"""Compare a config's trace with the golden trace.

Tolerances live in one table keyed by dtype (`TOLERANCES`), overridable per test; it
and the comparison of two tensors are in `compiler.replay_runtime.compare` (bundles
compare with them too). Here: Python values and structures, and whole traces. A
mismatch says where (trace item, output path) and what kind (values, shape, dtype,
nan, structure, type).
"""

from __future__ import annotations

from typing import Any

import torch

from compiler.replay_runtime.compare import (  # noqa: F401 - re-exported: the table and the tensor comparison
    EXACT,
    TOLERANCES,
    Mismatch,
    Tolerance,
    compare_tensors,
    tolerance_for,
)
from e2e.framework.trace import Trace


def compare_values(
    golden: Any, actual: Any, where: str, override: Tolerance | None, *, first_only: bool = False
) -> Mismatch | None:
    """The first mismatch between two outputs, or None when they agree. `first_only`: a
    tensor's mismatch describes its first differing chunk only (`compare_tensors`), for a
    caller that needs only whether the outputs agree."""
    if isinstance(golden, torch.Tensor):
        return compare_tensors(golden, actual, where, override, first_only=first_only)
    if golden is None:
        return None if actual is None else Mismatch("type", where, f"expected None, got {type(actual).__name__}")
    if isinstance(golden, (bool, int, float)):
        if isinstance(actual, torch.Tensor) and actual.numel() == 1:
            actual = actual.item()
        if not isinstance(actual, (bool, int, float)):
            return Mismatch("type", where, f"expected a Python {type(golden).__name__}, got {type(actual).__name__}")
        dtype = torch.float64 if isinstance(golden, float) else torch.int64
        return compare_tensors(torch.tensor(golden, dtype=dtype), torch.tensor(actual, dtype=dtype), where, override)
    if isinstance(golden, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(golden):
            got = (
                f"{type(actual).__name__} of {len(actual)}"
                if isinstance(actual, (tuple, list))
                else type(actual).__name__
            )
            return Mismatch("structure", where, f"expected {type(golden).__name__} of {len(golden)}, got {got}")
        for i, (g, a) in enumerate(zip(golden, actual)):
            if (mismatch := compare_values(g, a, f"{where}[{i}]", override, first_only=first_only)) is not None:
                return mismatch
        return None
    if isinstance(golden, dict):
        if not isinstance(actual, dict) or set(actual) != set(golden):
            return Mismatch("structure", where, f"expected dict with keys {sorted(golden)}, got {actual!r:.80}")
        for key in golden:
            mismatch = compare_values(golden[key], actual[key], f"{where}[{key!r}]", override, first_only=first_only)
            if mismatch is not None:
                return mismatch
        return None
    return Mismatch(
        "type",
        where,
        f"the test returned a {type(golden).__name__}; outputs must be tensors, Python scalars, None, "
        "or tuples, lists and dicts of them",
    )


def agree(golden: Any, actual: Any, override: Tolerance | None = None) -> bool:
    """Whether two outputs agree, as `compare_values` judges them; stops at the first difference."""
    return compare_values(golden, actual, "output", override, first_only=True) is None


def compare_traces(golden: Trace, actual: Trace, override: Tolerance | None = None) -> Mismatch | None:
    """The first mismatch between two traces, or None when they agree."""
    if len(golden) != len(actual):
        return Mismatch("structure", "trace", f"expected {len(golden)} calls, got {len(actual)}")
    for i, (g, a) in enumerate(zip(golden, actual)):
        where = f"trace item #{i} ({g.method}) @ output"
        if (mismatch := compare_values(g.outputs, a.outputs, where, override)) is not None:
            mismatch.call = i
            return mismatch
    return None
