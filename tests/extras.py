"""The optional extras the project's tests use, and how a test says it needs one.

A test that needs an extra is marked `@requires_extra("runtimes", "jax")` (or calls
`skip_without_extra` where the need is found at run time): without the extra it is skipped
with a reason that names the extra and its install line, never failed.

`without_extras_env` runs Python as if extras were not installed, and
`python -m tests.extras [--without EXTRA,...] [PYTEST ARGS | -- python -m pytest ARGS]`
runs pytest so: without the
extras the README's install leaves out, so an unmarked test that needs one fails there.
With `--then-with-extras`, the tests that run skipped for a missing extra then run again
with every extra installed: CI runs the project's tests once so, as a newcomer's install
runs them and with every test that needs an extra run on it, instead of twice whole.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest

# pyproject.toml's optional dependencies, as the modules the tests import from them.
EXTRAS: dict[str, tuple[str, ...]] = {
    "runtimes": ("iree.compiler", "iree.runtime", "jax", "jaxlib", "ml_dtypes"),
    "onnx": ("onnx", "onnxscript", "onnxruntime"),
    "models": ("transformers",),
    "service": (
        "sqlalchemy",
        "alembic",
        "fastapi",
        "uvicorn",
        "jinja2",
        "httpx",
        "matplotlib",
        "psycopg",
        "distributed",
    ),
}
# The TOSA reference model's binaries: not a pip extra, kept out of the Python env.
TOSA_REF = "tosa-ref"
# What the README's install line (`pip install -e ".[models]"`) leaves out.
NOT_IN_THE_README_INSTALL = ("runtimes", "onnx", TOSA_REF)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def missing_extra(extra: str, *modules: str) -> str | None:
    """None when `extra` is installed (those of its `modules` given, else all of them);
    else why a test that needs it is skipped, naming the extra and how to install it."""
    if extra == TOSA_REF:
        from compiler.executors.tosa_ref import TosaReferenceModel

        install = TosaReferenceModel().missing()
        return None if install is None else f"needs the TOSA reference model's binaries ({TOSA_REF}): {install}"
    unknown = set(modules) - set(EXTRAS[extra])
    assert not unknown, f"{sorted(unknown)} are not modules of the {extra} extra: {EXTRAS[extra]}"
    absent = [module for module in modules or EXTRAS[extra] if not _installed(module)]
    if not absent:
        return None
    return f'needs the {extra} extra ({", ".join(absent)} not installed): pip install -e ".[{extra}]"'


def requires_extra(extra: str, *modules: str) -> pytest.MarkDecorator:
    """A mark that skips the test when `missing_extra(extra, *modules)` says why."""
    reason = missing_extra(extra, *modules)
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def skip_without_extra(extra: str, *modules: str) -> None:
    """Skip the running test (or fixture) unless `extra` is installed."""
    if reason := missing_extra(extra, *modules):
        pytest.skip(reason)


# A sitecustomize that hides packages: a meta path finder in front of each one, finding
# nothing under a hidden top-level name, so an import raises ModuleNotFoundError and
# `importlib.util.find_spec` returns None, as on a machine without the extra.
_HIDE = """import os, sys

HIDDEN = frozenset(os.environ["E2E_WITHOUT_PACKAGES"].split(","))


class WithoutHidden:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, name):  # invalidate_caches, find_distributions
        return getattr(self.finder, name)


sys.meta_path[:] = [WithoutHidden(finder) for finder in sys.meta_path]
"""


def without_extras_env(directory: Path, *extras: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment of a Python in which `extras` (of `EXTRAS`, and `tosa-ref`) are not
    installed: a sitecustomize written to `directory` (keep it outside the checkout) hides
    their packages."""
    hidden = sorted({module.partition(".")[0] for extra in extras if extra != TOSA_REF for module in EXTRAS[extra]})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(_HIDE)
    env = {**environ, "E2E_WITHOUT_PACKAGES": ",".join(hidden)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(directory), environ.get("PYTHONPATH")) if p)
    if TOSA_REF in extras:
        env["E2E_TOSA_TOOLS"] = str(directory / "no-tosa-tools")
    return env


# Where this module's pytest plugin writes the node ids of the tests it saw skipped for a
# missing extra (`python -m tests.extras --then-with-extras`).
SKIPPED_ENV = "E2E_SKIPPED_FOR_EXTRAS"
# Why a test skips for a missing extra: `missing_extra`'s reasons, `importorskip`'s of an
# extra's module, and the tests that say a runtime is "not installed".
_SKIP_REASON = re.compile(r"needs the .*(extra|binaries)|not installed")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record a test skipped for a missing extra (this module as a plugin: `-p tests.extras`)."""
    _record(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """Record a test file skipped whole for a missing extra (a module-level `importorskip`)."""
    _record(report)


def _record(report) -> None:
    if report.skipped and os.environ.get(SKIPPED_ENV):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if _SKIP_REASON.search(reason):
            _SKIPPED.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if os.environ.get(SKIPPED_ENV) and not hasattr(session.config, "workerinput"):  # xdist's controller
        root = session.config.rootpath  # node ids are relative to it: absolute, they run from anywhere
        skipped = [f"{root}/{nodeid}" for nodeid in dict.fromkeys(_SKIPPED)]
        # The paths pytest was given, which the run with the extras replaces by those tests.
        Path(os.environ[SKIPPED_ENV]).write_text(json.dumps({"paths": session.config.args, "skipped": skipped}))


_SKIPPED: list[str] = []


def main(argv: list[str] | None = None) -> int:
    """`python -m pytest ARGS` in a Python without the `--without` extras; its exit status."""
    parser = argparse.ArgumentParser(prog="python -m tests.extras", description=main.__doc__)
    parser.add_argument(
        "--without",
        default=",".join(NOT_IN_THE_README_INSTALL),
        help=f"extras to hide, comma-separated, of {', '.join([*EXTRAS, TOSA_REF])} (default: %(default)s)",
    )
    parser.add_argument(
        "--then-with-extras",
        action="store_true",
        help="then run the tests that were skipped for a missing extra again, with the extras (the same options)",
    )
    argv = sys.argv[1:] if argv is None else argv
    if "--" in argv:  # `... -- python -m pytest ARGS`: the command as the README writes it
        argv, command = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
        if command[:3] != ["python", "-m", "pytest"]:
            parser.error("after --: python -m pytest ARGS")
        argv = argv + command[3:]
    options, pytest_args = parser.parse_known_args(argv)
    extras = [extra for extra in options.without.split(",") if extra]
    unknown = set(extras) - {*EXTRAS, TOSA_REF}
    if unknown:
        parser.error(f"unknown extras {sorted(unknown)}")
    with tempfile.TemporaryDirectory(prefix="e2e-without-extras-") as shim:
        env = without_extras_env(Path(shim), *extras)
        skipped = Path(shim) / "skipped.txt"
        if options.then_with_extras:
            env[SKIPPED_ENV] = str(skipped)
            pytest_args = ["-p", "tests.extras", *pytest_args]
        print(f"tests.extras: pytest without {', '.join(extras)}", file=sys.stderr)
        status = subprocess.run([sys.executable, "-m", "pytest", *pytest_args], env=env).returncode
        if not options.then_with_extras:
            return status
        found = json.loads(skipped.read_text()) if skipped.exists() else {"paths": [], "skipped": []}
        nodeids = found["skipped"]
        if not nodeids:
            print("tests.extras: no test was skipped for a missing extra", file=sys.stderr)
            return status
        # The same options, the skipped tests in place of the paths given.
        options_only = [arg for arg in pytest_args if arg not in found["paths"]]
        print(f"tests.extras: the {len(nodeids)} tests skipped for a missing extra, with the extras", file=sys.stderr)
        again = subprocess.run([sys.executable, "-m", "pytest", *options_only, *nodeids]).returncode
        return status or again


if __name__ == "__main__":
    sys.exit(main())
