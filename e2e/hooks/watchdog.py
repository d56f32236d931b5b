"""SIGTERM ends a run like Ctrl-C: results so far are written, children killed.

A signal that lands while Python runs a finalizer (a `__del__`, an after-fork hook, a
logging lock release) raises its KeyboardInterrupt there, and Python swallows it as
unraisable; the run would go on. So the run stops after the test in progress, and the
first signal also starts a watchdog that sends it again to the main thread every two
seconds until pytest has seen the interrupt, whatever the run is waiting for (an xdist
worker's next event may be minutes away)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from e2e.framework import isolation

# A signal handler is the process's, not a pytest config's: what it saw is kept per process.
_SIGNALLED: list[int] = []
_INTERRUPT_ARRIVED = threading.Event()  # the KeyboardInterrupt reached pytest's session


def install() -> None:
    """SIGTERM (and Ctrl-C) raise a KeyboardInterrupt that is sure to reach pytest."""

    def interrupt(number, frame):
        if not _SIGNALLED:
            threading.Thread(target=_resend_until_it_arrives, args=(number,), daemon=True).start()
        _SIGNALLED.append(number)
        raise KeyboardInterrupt(f"signal {number}")

    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupt)


def signalled() -> bool:
    """Whether a signal asked this process to stop."""
    return bool(_SIGNALLED)


def session_ended() -> None:
    """No signal is sent again once the session ends."""
    _INTERRUPT_ARRIVED.set()


def _resend_until_it_arrives(number: int) -> None:
    while not _INTERRUPT_ARRIVED.wait(2.0):
        signal.pthread_kill(threading.main_thread().ident, number)


@pytest.hookimpl(tryfirst=True)  # before the terminal's, which takes its time to print the traceback
def pytest_keyboard_interrupt(excinfo):
    _INTERRUPT_ARRIVED.set()


def pytest_runtest_logfinish(nodeid, location):
    # The quick way out when the interrupt was swallowed: after the test in progress.
    if _SIGNALLED and not _INTERRUPT_ARRIVED.is_set():
        raise KeyboardInterrupt(f"signal {_SIGNALLED[0]}")


class WorkerSignals:
    """A signal sent to the xdist controller alone (a CI job's timeout, `kill`) would leave
    each worker running its test to its end: the controller passes it on, as a terminal's
    Ctrl-C does to the whole process group."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo):
        is_worker = hasattr(self.config, "workerinput")
        if _SIGNALLED and not is_worker and self.config.pluginmanager.has_plugin("dsession"):
            for pid in isolation.child_pids(os.getpid()):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
