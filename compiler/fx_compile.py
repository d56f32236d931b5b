"""The FX frontend's stages under their former module name, for callers not yet moved to
`compiler.frontends.fx` (e2e/reducer/graph.py, edited on another branch). New code imports
`compiler.frontends.fx`."""

from compiler.frontends.fx import fx_to_torch_backend_ir

__all__ = ["fx_to_torch_backend_ir"]
