"""The configs: what a config is, the built-in ones, and how others are added.

A config compiles a prepared test and runs the golden trace's calls on what it built:

    class MyConfig:
        name = "mybackend"
        def compile(self, prepared, snapshots) -> artifact: ...
        def run(self, artifact, golden_trace) -> trace: ...

The built-in configs are `e2e.configs.pipeline.CONFIGS` (a frontend, a backend and an
executor each) and `eager` (`e2e/configs/eager.py`); the runtime configs
(`<backend>@<executor>`, e.g. `tosa@tosa-ref`) in `runtime.py`, run only when named. Others are added
without editing the project: name them as `module:attribute` in `--config`, or publish
them under the `e2e_conformance.configs` entry-point group. Expected failures are in
`e2e/configs/xfail/<name>.txt` (see `xfails.py`).
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from e2e.configs.xfails import XfailEntry, XfailError, load_xfails, xfail_path

__all__ = [
    "CONFIG_NAMES",
    "RUNTIME_CONFIG_NAMES",
    "Config",
    "TakesModels",
    "Preloads",
    "WarmsUp",
    "ENTRY_POINT_GROUP",
    "OPT_IN_CONFIG_NAMES",
    "XFAIL_DIR",
    "XfailEntry",
    "XfailError",
    "available_configs",
    "load_config",
    "load_xfails",
    "xfail_path",
]

CONFIG_NAMES = ("linalg", "tosa", "stablehlo", "ltc", "torchscript", "eager")
# Built in, run only when named (`--config onnx`): an optional extra, and slower per pair.
OPT_IN_CONFIG_NAMES = ("onnx", "dynamo")
# Real runtimes as executors (e2e/configs/runtime.py): not in the default set.
RUNTIME_CONFIG_NAMES = ("tosa@tosa-ref", "stablehlo@xla", "stablehlo@interp", "linalg@iree", "torch@iree", "onnx@iree")
# Where each built-in config is defined: the module whose `CONFIGS` maps its name to it.
# A new built-in config is its line here and its name above.
BUILT_IN: dict[str, str] = {
    **dict.fromkeys(("linalg", "tosa", "stablehlo", "ltc", "torchscript", "onnx", "dynamo"), "e2e.configs.pipeline"),
    "eager": "e2e.configs.eager",
}
ENTRY_POINT_GROUP = "e2e_conformance.configs"
XFAIL_DIR = Path(__file__).parent / "xfail"


@runtime_checkable
class Config(Protocol):
    """What the runner needs of a config."""

    name: str

    def compile(self, prepared: Any, snapshots: Any) -> Any: ...

    def run(self, artifact: Any, golden: Any) -> Any: ...


@runtime_checkable
class WarmsUp(Protocol):
    """A config with a one-time initialization of its own, paid once per process before the
    test hosts fork (the onnx exporter's first call costs seconds; the eager config's first
    op compile, 1.4 s). `host_paid_warm_up(result)`: whether a pair's host paid it itself
    (then the process warms up before the next host forks; a run whose hosts never pay
    it, one test or every capture from the frontend cache, never does)."""

    def warm_up(self) -> None: ...

    def host_paid_warm_up(self, result: Any) -> bool: ...


@runtime_checkable
class Preloads(Protocol):
    """A config whose every pair imports modules the pytest process has not (the eager
    config's fake tensors pull in torch._dynamo: 0.9 s): `preload()` imports them there,
    compiling nothing, once, before the first of its pairs starts a host; every host
    forked after it inherits them."""

    def preload(self) -> None: ...


@runtime_checkable
class TakesModels(Protocol):
    """A config that compiles test models other than torch modules (`Test.model_format`):
    the formats it takes; a config without it takes torch modules alone."""

    model_formats: tuple[str, ...]


def _plugin_configs() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_configs() -> list[str]:
    """The built-in configs, then those published by installed packages."""
    builtin = CONFIG_NAMES + OPT_IN_CONFIG_NAMES + RUNTIME_CONFIG_NAMES
    return list(builtin) + sorted(set(_plugin_configs()) - set(builtin))


@functools.cache
def load_config(spec: str) -> Config:
    """A config by built-in name, entry-point name, or `module:attribute`."""
    if spec in BUILT_IN:
        config = importlib.import_module(BUILT_IN[spec]).CONFIGS[spec]
    elif spec in RUNTIME_CONFIG_NAMES or "@" in spec:  # `<input>@<executor>`
        config = importlib.import_module("e2e.configs.runtime").runtime_config(spec)
        # Import the runtime's Python package now, before test hosts fork (jax: ~1.6 s each).
        config.toolchain().executor.missing()
    elif ":" in spec:
        module, _, attribute = spec.partition(":")
        try:
            config = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"config {spec!r} could not be loaded: {error}") from error
    elif spec in (plugins := _plugin_configs()):
        config = plugins[spec].load()
    else:
        raise ValueError(f"unknown config {spec!r}; known: {', '.join(available_configs())}, or module:attribute")
    if not isinstance(config, Config):
        raise ValueError(f"config {spec!r} is not a config: it needs `name`, `compile` and `run`")
    return config
