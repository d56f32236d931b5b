"""The pytest process's end without the interpreter's teardown.

A process that imported torch, torch-mlir and sympy spends a quarter of a second of CPU
at exit freeing their million objects and running their libraries' destructors, for
nothing: the process is ending. Once pytest has finished a suite run that is the
process's own command (its summary written, every hook and cleanup run, its exit status
known), the e2e plugin ends the process with `os._exit(status)` from an `atexit` handler
registered before torch was imported (so it runs after the handlers of everything
imported later: the reaper of test hosts, tempfile's finalizers, torch's).

Not armed under xdist (execnet's own `atexit` handler, registered before this one, must
stop its gateways), in an xdist worker, nor for `pytest.main()` called by a program
that goes on after it (pytester's in-process runs). An exception that reached the top
(a hook or cleanup that raised) ends the process the usual way, with its traceback and
status.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import sys
from pathlib import Path

_SESSION: list = []  # the finished session whose exit status ends the process (`arm`)


def is_the_command(args: tuple[str, ...]) -> bool:
    """Whether a pytest run with these arguments is this process's command line
    (`pytest ...`, `python -m pytest ...`), not a `pytest.main()` inside another program."""
    program = Path(sys.argv[0])
    is_pytest = program.name in ("pytest", "py.test") or (
        program.name == "__main__.py" and program.parent.name == "pytest"
    )
    return is_pytest and tuple(args) == tuple(sys.argv[1:])


def arm(session) -> None:
    """End the process with `session.exitstatus` at interpreter exit, skipping the teardown."""
    _SESSION[:] = [session]


def _end() -> None:
    if not _SESSION or getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None:
        return
    status = int(_SESSION[0].exitstatus)
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed or broken stream: the usual exit reports it
        return
    logging.shutdown()  # its handler was registered before this one, so it would not run
    try:  # C stdio buffers (a native library's printf to a pipe): exit() would flush them
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(status)


atexit.register(_end)
