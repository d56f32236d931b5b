"""A mutation of the catalogue injected into a built-in config, for whole runs: the suite or a
campaign run on a compiler with one known miscompile, as a regression would land.

    python -m pytest e2e --config e2e.mutation.inject:linalg__cmpf_ogt_to_oge
    python -m e2e.fuzz --config e2e.mutation.inject:linalg__cmpf_ogt_to_oge ...

`<config>__<mutation>` is the built-in config `<config>` (its name kept, so its pairs are the
same pairs as an unmutated run's) whose RefBackend runs the mutation's rewrite on
linalg-on-tensors, before its lowering, as a Python pass (`python:e2e.mutation.inject:<mutation>`):
the reducer replays it, and a bundle carries it. Only mutations at the `linalg` boundary.
"""

from __future__ import annotations

import dataclasses
import functools

from compiler.executors import EXECUTORS
from compiler.executors.refbackend import RefBackend

SEPARATOR = "__"


@functools.cache
def _mutation(name: str):
    from e2e.mutation.catalogue import CATALOGUE

    found = {m.name: m for m in CATALOGUE}.get(name)
    if found is None or found.boundary != "linalg":
        raise AttributeError(f"no mutation {name!r} at the linalg boundary in e2e.mutation.catalogue")
    return found


def _pass(name: str):
    mutation = _mutation(name)

    def apply(module) -> None:
        mutation.rewrite(module, True)

    apply.__name__ = name
    return apply


def _executor(mutation: str) -> type:
    entry = f"python:{__name__}:{mutation}"
    described = f"the RefBackend with {mutation}"

    @dataclasses.dataclass
    class MutantRefBackend(RefBackend):
        title: str = described

        def lower_entries(self) -> tuple[str, ...]:
            first, *rest = super().lower_entries()
            return (first, *self._to_linalg, *rest[len(super()._to_linalg) :])

        @property
        def _to_linalg(self) -> tuple[str, ...]:
            return (*super()._to_linalg, entry)

    MutantRefBackend.__name__ = MutantRefBackend.__qualname__ = f"executor_{mutation}"
    return MutantRefBackend


def _config(config_name: str, mutation: str):
    from e2e.configs.pipeline import CONFIGS

    _mutation(mutation)
    key = f"refbackend-{mutation}"
    EXECUTORS.setdefault(key, f"{__name__}:executor_{mutation}")
    return dataclasses.replace(CONFIGS[config_name], executor=key)


def __getattr__(attribute: str):
    """`<config>__<mutation>`: the mutated config; `executor_<mutation>`: its executor;
    `<mutation>`: the Python pass."""
    if SEPARATOR in attribute:
        config_name, _, mutation = attribute.partition(SEPARATOR)
        return _config(config_name, mutation)
    if attribute.startswith("executor_"):
        return _executor(attribute.removeprefix("executor_"))
    if attribute.startswith("_"):
        raise AttributeError(attribute)
    return _pass(attribute)
