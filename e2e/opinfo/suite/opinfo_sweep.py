"""The OpInfo sweep as an e2e suite file (run with `--suite-dir e2e/opinfo/suite`).

`E2E_OPINFO_SLICE=ci` collects only the ops of the `opinfo_ci` slice (seconds instead of
minutes); select the slice's tests with `-m opinfo_ci`.
"""

import os

from e2e.opinfo.collect import in_ci_ops, register_sweep

SLICE_ENV = "E2E_OPINFO_SLICE"

COLLECTION = register_sweep(only=in_ci_ops if os.environ.get(SLICE_ENV) == "ci" else None)
