"""`tosa`: torch.export -> FX importer -> torch backend -> TOSA -> linalg -> RefBackend."""

from e2e.configs.fx import FxConfig

CONFIG = FxConfig("tosa", backend="tosa")
