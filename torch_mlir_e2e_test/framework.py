"""`TestUtils` (and the test record) under upstream's import path.

The invoker's `tu` is this project's seeded `TestUtils`; its `rand`, `randint` and
`nans` take upstream's arguments (`*sizes`, `low`, `high`, `dtype`).
"""

from e2e.framework.registry import Test
from e2e.framework.testutils import TestUtils

__all__ = ["Test", "TestUtils"]
