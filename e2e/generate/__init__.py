"""Generated programs: the op catalogue (ops.py), `Program` (program.py), `generate(seed)`
(grow.py) and their registration as suite tests (register.py). See docs/generate.md."""

from e2e.generate.grow import GenerationError, generate
from e2e.generate.program import CHECKS, Checks, Program
from e2e.generate.register import register_programs

__all__ = ["CHECKS", "Checks", "GenerationError", "Program", "generate", "register_programs"]
