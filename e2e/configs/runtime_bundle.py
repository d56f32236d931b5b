"""A runtime failure in that runtime's own terms: the program, its inputs and expected
outputs as .npy, and `run.sh` with the runtime's own tools (`tosa-opt` +
`tosa_reference_model`; `iree-compile` + `iree-run-module`; jax for XLA and for StableHLO's
interpreter), as an engineer of that project would want it filed. Written next to the pair's saved IR
(`reports/ir/<test>/<config>/native/`) when a runtime config fails in `execute` or `compare`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.utils._pytree as pytree

from compiler.executors import to_numpy

CHECK = """python3 - <<'PY'
import sys
import numpy as np
failed = 0
for i in range({outputs}):
    expected, actual = np.load(f"expected_{{i}}.npy"), np.load(f"output_{{i}}.npy")
    if expected.shape != actual.shape:
        print(f"output {{i}}: shape {{actual.shape}}, expected {{expected.shape}}"); failed = 1; continue
    e, a = expected.astype(np.float64), actual.astype(np.float64)
    bad = ~np.isclose(a, e, rtol={rtol}, atol={atol}, equal_nan=True)
    if bad.any():
        print(f"output {{i}}: {{int(bad.sum())}} of {{bad.size}} elements differ; max abs error {{np.nanmax(np.abs(a - e)):.6g}}")
        failed = 1
print("outputs differ from torch's" if failed else "outputs match torch's")
sys.exit(failed)
PY
"""


def write_native_bundle(
    directory: Path,
    program: Any,
    inputs: Sequence[Any],
    expected: Any,
    *,
    runtime: str,
    failure: str,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> Path:
    """Write the bundle into `directory/native`; returns its README."""
    native = Path(directory) / "native"
    native.mkdir(parents=True, exist_ok=True)
    tensors = [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]
    command = program.write_native(native, tensors)
    outputs = [v for v in pytree.tree_leaves(expected) if isinstance(v, torch.Tensor)]
    for i, value in enumerate(outputs):
        np.save(
            native / f"expected_{i}.npy",
            to_numpy(value).astype(np.float32) if value.dtype == torch.bfloat16 else to_numpy(value),
        )
    check = CHECK.format(outputs=len(outputs), rtol=rtol, atol=atol)
    script = f'#!/bin/sh\n# {runtime}: exits non-zero while the failure is there\nset -e\ncd "$(dirname "$0")"\n{command}\n{check}'
    (native / "run.sh").write_text(script)
    (native / "run.sh").chmod(0o755)
    readme = native / "README.md"
    readme.write_text(
        f"# {runtime} reproducer\n\n{failure}\n\nRun it with {runtime}'s own tools (nothing of this project):\n\n"
        f"    sh run.sh\n\nwhich runs\n\n"
        + "".join(f"    {line}\n" for line in command.splitlines())
        + f"\nthen compares output_<i>.npy with expected_<i>.npy (torch's values; rtol={rtol}, atol={atol}).\n"
        "Inputs: "
        + ", ".join(
            f"input_{i}.npy {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}" for i, t in enumerate(tensors)
        )
        + "\n"
    )
    return readme
