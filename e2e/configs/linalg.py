"""`linalg`: torch.export -> FX importer -> torch backend -> linalg-on-tensors -> RefBackend."""

from e2e.configs.fx import FxConfig

CONFIG = FxConfig("linalg", backend="linalg")
