"""The OpInfo sweep's CI slice as an e2e suite file: `python -m pytest --opinfo-slice ci`.

Sample 0 (float32) of one op in `CI_SHARE`: the slice's ops only are collected (seconds),
and only the slice's tests registered; they keep their names from the full sweep.
"""

from e2e.opinfo.collect import in_ci_ops, in_ci_slice, register_sweep

COLLECTION = register_sweep(only=in_ci_ops, cases=in_ci_slice)
