"""The `eager` frontend (`EagerFrontend`): what the eager config's reducer and toolchain know
of its capture. The eager config dispatches each aten op of the running module
(`compiler.frontends.eager_mode`) and imports each alone with the FX importer, at its
call's shapes (`compiler.frontends.eager_ops`); a module's whole capture, where the reducer
needs one, is the FX frontend's.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler import pipelines
from compiler.frontends import ReducerFacts
from compiler.frontends.fx import FxFrontend


@dataclass(frozen=True)
class EagerFrontend(FxFrontend):
    """The eager config's: each op is imported alone with the FX importer, at its call's shapes."""

    name = "eager"
    reducer = ReducerFacts(
        repro_step="fx",
        dynamic_graph_search=False,
        torch_only_decompositions=True,
        repro_step_words=FxFrontend.reducer.repro_step_words,
    )

    def to_torch_backend(self, backend: str) -> pipelines.Pipeline:
        """Single ops: no legal ops kept whole."""
        return pipelines.FX_TO_TORCH_BACKEND
