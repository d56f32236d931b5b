"""The full OpInfo sweep as an e2e suite file: `python -m pytest --opinfo-slice full`.

Collecting it runs every sample natively (about 2,550 tests; minutes on a loaded machine,
inside the import probe's own budget, `--import-timeout`). The CI slice is `e2e/opinfo/ci`.
"""

from e2e.opinfo.collect import register_sweep

COLLECTION = register_sweep()
