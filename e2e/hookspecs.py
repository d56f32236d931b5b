"""Hooks the e2e plugin adds to pytest (registered by conftest.py)."""

import pytest


@pytest.hookspec
def pytest_e2e_after_result(item, prepared, result):
    """Called after each (test, config) pair ran, before it is reported.

    `result` (an e2e.framework.result.Result) may be amended, e.g. the reducer sets
    `result.repro_path` and adds notes.
    """
