"""Generated programs as the campaign sees them: a test's seed and its ops."""

from __future__ import annotations

import functools
import re

_SEED = re.compile(r"(\d+)$")


def seed_of(test: str) -> int | None:
    """The seed of generated test `test` (the number that ends its name), or None."""
    match = _SEED.search(test)
    return int(match[1]) if match else None


@functools.lru_cache(maxsize=None)
def program(seed: int):
    """The generated program of `seed` (`e2e.generate.generate`: rebuilt exactly from its seed)."""
    from e2e.generate import generate

    return generate(seed)


def ops_of(test: str) -> tuple[str, ...]:
    """The ops of generated test `test`'s program, by short aten name (`add`, `cumsum`)."""
    from e2e.fuzz.bugs import short_op

    seed = seed_of(test)
    if seed is None:
        return ()
    return tuple(dict.fromkeys(short_op(op) or op for op in program(seed).ops))
