"""Name -> class registries with installed plugins: the executors' and the frontends'."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from importlib import metadata


def registered_class(kind: str, built_in: Mapping[str, str], group: str, name: str) -> type:
    """The class registered as `name`: a built-in `module:attribute` of `built_in`, else an
    installed entry point of `group`; a ValueError names what is known (`kind`: its word)."""
    if name in built_in:
        module, _, attribute = built_in[name].partition(":")
        return getattr(importlib.import_module(module), attribute)
    for point in metadata.entry_points(group=group):
        if point.name == name:
            return point.load()
    known = [*built_in, *(p.name for p in metadata.entry_points(group=group))]
    raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(known)}")
