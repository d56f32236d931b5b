"""Hypothesis property families: generated shapes, dtypes and parameters, compiled vs native.

Profiles (`hypothesis.settings`):

- `ci`: derandomized, few examples, no deadline: the same examples on every run.
- `dev`: random, many more examples, for hunting bugs locally.

`tests/properties/` loads `$E2E_HYPOTHESIS_PROFILE` (default `ci`); hypothesis's own
`--hypothesis-profile dev` option overrides it.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROFILE_ENV = "E2E_HYPOTHESIS_PROFILE"
# Compiling an example takes 0.1-1 s: no per-example deadline, and the slow-data checks off.
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=6, derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("dev", max_examples=60, print_blob=True, **_COMMON)
