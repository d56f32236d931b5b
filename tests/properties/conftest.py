"""Choose the hypothesis profile: `--hypothesis-profile NAME`, else $E2E_HYPOTHESIS_PROFILE, else `ci`."""

import os

from hypothesis import settings

from e2e.properties import PROFILE_ENV


def pytest_configure(config):
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get(PROFILE_ENV, "ci"))
