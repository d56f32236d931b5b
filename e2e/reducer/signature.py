"""Failure signatures: what makes two failures the same bug, and the op a failure blames.

A signature is `stage | pass or op | normalized first error line` for compile-time
failures and crashes, or `compare | <mismatch kind>` for wrong results. How one is
built and normalized is in `compiler.replay_runtime.signature` (bundles compare
signatures with it); here, `guilty_op`.
"""

from __future__ import annotations

import re

from compiler.replay_runtime.signature import (  # noqa: F401 - re-exported
    crash_signature,
    first_native_error,
    mismatch_signature,
    normalize,
    pass_name,
    stage_signature,
)

_OP_PATTERNS = [
    re.compile(r'torch\.operator"\([^)]*\) <\{name = "([\w.]+)"'),  # an op unknown to the torch dialect
    re.compile(r"""operation '([\w.]+)'"""),  # failed to legalize operation 'torch.aten.asin'
    re.compile(r"""see current operation: (?:[%\w#:, ]+= )?"([\w.]+)"\("""),  # generic form in a note
    re.compile(r"""see current operation: (?:[%\w#:, ]+= )?([a-z_]+\.[\w.]+)"""),
    re.compile(r"""'([a-z_]+\.[\w.]+)' op"""),  # 'tosa.reshape' op expected ...
]


def guilty_op(diagnostics: list[str] | str) -> str | None:
    """The op a diagnostic blames: the one it names, else the one its note prints."""
    text = diagnostics if isinstance(diagnostics, str) else "\n".join(diagnostics)
    for pattern in _OP_PATTERNS:
        match = pattern.search(text)
        if match:
            return match[1]
    return None
