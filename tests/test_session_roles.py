"""The plugin's per-process state is split by role (`e2e.session.E2EState`): each part is its
own object, small enough to read (at most 12 methods), and `E2EState` only holds them."""

from __future__ import annotations

import functools
import inspect

from e2e.host_pool import HostPool
from e2e.session import Caches, E2EState, SuiteLoader
from e2e.settings import Settings

MOST_METHODS = 12


KINDS = (classmethod, staticmethod, property, functools.cached_property)


def _methods(cls: type) -> list[str]:
    """Its own methods and properties as written (not a dataclass's generated dunders)."""
    return [
        name
        for name, member in vars(cls).items()
        if (inspect.isfunction(member) or isinstance(member, KINDS)) and name not in _GENERATED
    ]


_GENERATED = {"__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__"}


def test_each_part_of_the_session_stays_small():
    for part in (Settings, Caches, SuiteLoader, HostPool):
        methods = _methods(part)
        assert len(methods) <= MOST_METHODS, f"{part.__name__}: {len(methods)} methods: {methods}"


def test_the_session_only_holds_its_parts():
    assert _methods(E2EState) == ["__init__"]


def test_settings_are_frozen():
    assert Settings.__dataclass_params__.frozen
