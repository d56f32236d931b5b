"""`--stablehlo-testdata DIR` for the StableHLO testdata suite (`suite/`), passed on to the
suite file (and the test hosts it forks into) as $STABLEHLO_TESTDATA; its markers."""

import os

import pytest

from e2e.stablehlo_testdata.register import CI_EVERY, CI_MARK, ENV, MARK, OPTION


def pytest_addoption(parser):
    parser.addoption(
        OPTION,
        default=None,
        metavar="DIR",
        help="StableHLO testdata: a checkout of openxla/stablehlo or its stablehlo/testdata "
        f"(default ${ENV}, else ../shared/corpora/stablehlo-testdata beside the checkout)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if config.getoption(OPTION.lstrip("-").replace("-", "_")):
        os.environ[ENV] = os.path.abspath(config.getoption(OPTION.lstrip("-").replace("-", "_")))
    config.addinivalue_line("markers", f"{MARK}: a program of StableHLO's testdata (e2e/stablehlo_testdata)")
    config.addinivalue_line("markers", f"{CI_MARK}: every {CI_EVERY}th StableHLO testdata program, the CI slice")
