"""`ltc`: the module on the `lazy` device (TorchScript backend), its forward captured as
one lazy graph -> JIT IR importer -> linalg -> RefBackend."""

from e2e.configs.jit import JitConfig

CONFIG = JitConfig("ltc", frontend="ltc")
