"""The OpInfo sweep as an e2e suite file (run with `--suite-dir e2e/opinfo/suite`)."""

from e2e.opinfo.collect import register_sweep

COLLECTION = register_sweep()
