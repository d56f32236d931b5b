"""`torchscript`: torch.jit.script (torch.jit.trace where scripting fails, noted in the
result) -> JIT IR importer -> linalg -> RefBackend."""

from e2e.configs.jit import JitConfig

CONFIG = JitConfig("torchscript", frontend="torchscript")
