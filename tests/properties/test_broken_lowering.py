"""A deliberately broken lowering is caught by a property family, and its bundle is the shrunk example."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.refbackend import LOWER_PIPELINE
from e2e.framework.registry import FunctionModule
from e2e.framework.testutils import TestUtils
from e2e.properties import strategies as s
from e2e.properties.check import PropertyFailure, check_compiles_like_native, to_executor


@pytest.mark.timeout(600)
def test_miscompiled_mul_is_caught_and_reduced_from_the_shrunk_example(tmp_path):
    chain = to_executor("linalg")
    # tests/broken_compilers.py: every arith.mulf becomes arith.addf, just before lowering to LLVM.
    broken = [*chain[: -len(LOWER_PIPELINE)], "python:tests.broken_compilers:mulf_to_addf", *LOWER_PIPELINE]
    seen = []

    # The binary family over two float ops (bounded: each example is a compile).
    @settings(
        max_examples=15,
        derandomize=True,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.sampled_from([op for op in s.BINARY if op.name in ("add", "mul")]), s.broadcast_pair(), s.seeds)
    def binary_family(op, shapes, seed):
        tu = TestUtils(seed)
        inputs = [s.make_input(tu, shape, torch.float32, op) for shape in shapes]
        seen.append((op.name, shapes))
        check_compiles_like_native(
            FunctionModule(op.fn), inputs, name=f"binary_{op.name}", pipeline=broken, reports_dir=tmp_path
        )

    with pytest.raises(PropertyFailure) as failure:
        binary_family()
    message = str(failure.value)
    # The shrunk example: mul of the smallest shapes.
    assert message.startswith("binary_mul on linalg: values mismatch"), message
    assert "example inputs: () float32, () float32" in message, message
    assert "reproducer (from the shrunk example)" in message, message
    bundle = tmp_path / "repro" / "binary_mul" / "linalg"
    with np.load(bundle / "inputs.npz") as inputs:
        assert [inputs[k].shape for k in sorted(inputs.files)] == [(), ()]  # the shrunk shapes, not a larger example's
    assert any(name == "mul" and shapes != ((), ()) for name, shapes in seen)  # a larger failing example came first
    done = subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
