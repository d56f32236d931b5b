"""`stablehlo`: torch.export -> FX importer -> torch backend -> StableHLO -> linalg -> RefBackend."""

from e2e.configs.fx import FxConfig

CONFIG = FxConfig("stablehlo", backend="stablehlo")
