"""The OpInfo sweep: every op of PyTorch's OpInfo database as e2e tests through every config.

    python -m pytest e2e/opinfo/suite --suite-dir e2e/opinfo/suite --xfail-dir e2e/opinfo/xfail/full -n 2
    python -m e2e.opinfo --report                       # what the sweep takes and skips, by reason
    python -m e2e.opinfo.coverage reports/results.json  # ops x configs after a run

It lives outside `e2e/test_suite` so the default run does not pay op_db's import.
"""
