"""Hooks the e2e plugin adds to pytest."""

import pytest


@pytest.hookspec
def pytest_e2e_after_result(item, result):
    """Called after a (test, config) pair failed and was reduced, before it is reported.

    `result` (an e2e.framework.result.Result) may be amended: notes, repro_path.
    """
