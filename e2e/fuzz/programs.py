"""Generated programs as the campaign sees them: a test's seed and its ops."""

from __future__ import annotations

import functools

from e2e.generate.register import seed_of  # noqa: F401 - the campaign's interface: a test's seed


@functools.lru_cache(maxsize=None)
def program(seed: int):
    """The generated program of `seed` (`e2e.generate.generate`: rebuilt exactly from its seed)."""
    from e2e.generate.grow import generate

    return generate(seed)


def ops_of(test: str) -> tuple[str, ...]:
    """The ops of generated test `test`'s program, by short aten name (`add`, `cumsum`)."""
    from e2e.fuzz.bugs import short_op

    seed = seed_of(test)
    if seed is None:
        return ()
    return tuple(dict.fromkeys(short_op(op) or op for op in program(seed).ops))
