"""Failure signatures (`stage | where | message`): the suite's name for
`compiler.replay_runtime.signature`, where the one definition lives so that every bundle
replays with the same rules the suite signed the failure with."""

from compiler.replay_runtime.signature import (  # noqa: F401 - the suite's interface
    Signature,
    broken_test_signature,
    crash_signature,
    ended_signature,
    first_native_error,
    guilty_op,
    mismatch_signature,
    normalize,
    pass_name,
    process_ending,
    stage_signature,
)
