"""What a run's verdicts depend on beyond its code: the checkout's commit and branch, the
installed versions of every component a config runs, and the machine. Written into
`run.json` (`e2e.hooks.reporting.run_meta`) so that a run remembered by the reproducer
service (`e2e.service`) says which versions a bug reproduces on."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Distributions whose versions decide verdicts: the compiler, and each runtime a config runs on.
DISTRIBUTIONS = (
    "torch",
    "torch-mlir",
    "iree-base-compiler",
    "iree-base-runtime",
    "jax",
    "jaxlib",
    "onnx",
    "onnxruntime",
)


def versions() -> dict[str, str]:
    """The installed versions of `DISTRIBUTIONS` (those installed), and the TOSA reference
    model's (its binaries live outside the Python env, at the version the project pins)."""
    found = {}
    for name in DISTRIBUTIONS:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    from compiler.executors import tosa_ref

    if tosa_ref.tools_dir().is_dir():
        found["tosa-tools"] = tosa_ref.VERSION
    return found


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def commit() -> str | None:
    """The suite's commit: CI's (`GITHUB_SHA`) or the checkout's."""
    return os.environ.get("GITHUB_SHA") or _git("rev-parse", "HEAD")


def branch() -> str | None:
    """The branch the run is of: a pull request's head (`GITHUB_HEAD_REF`), CI's ref name, or the checkout's."""
    for name in ("E2E_BRANCH", "GITHUB_HEAD_REF", "GITHUB_REF_NAME"):
        if os.environ.get(name):
            return os.environ[name]
    return _git("rev-parse", "--abbrev-ref", "HEAD")


def machine() -> str:
    return platform.node()


def provenance() -> dict:
    """`run.json`'s fields for the above."""
    return {"commit": commit(), "branch": branch(), "machine": machine(), "versions": versions()}
