"""The hypothesis property families as e2e tests, on every config: `Property_<family>_<k>`.

Each family's examples are drawn as a derandomized run draws them (`families.examples`),
as many as the hypothesis profile's `max_examples` (`$E2E_HYPOTHESIS_PROFILE`, default
`ci`: 6), so a name is the same case on every run. `tests/properties/` runs the same
strategies as hypothesis tests, with shrinking.
"""

import os

from hypothesis import settings

import e2e.properties  # registers the profiles
from e2e.framework import op_test
from e2e.properties.families import FAMILIES, examples

_COUNT = settings.get_profile(os.environ.get(e2e.properties.PROFILE_ENV, "ci")).max_examples

for _family in FAMILIES:
    for _k, _args in enumerate(examples(_family, _COUNT)):
        _fn, _inputs, _dynamic = _family.build(_args)
        op_test(f"Property_{_family.name}_{_k}", _fn, _inputs, dynamic=_dynamic)
