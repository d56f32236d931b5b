"""What native code prints to stderr while it runs, caught so an error can quote it.

LLVM's JIT reports why a program did not load (`JIT session error: Symbols not found:
[ __truncsfbf2 ]`, relocation errors) on the process's stderr and then fails with a
bare `Unknown function main`. `captured_stderr()` redirects file descriptor 2 to a
memory file for the duration of a block, then writes what it caught to the real
stderr as well, so nothing is lost, and hands the text to the caller.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator


class Captured:
    text: str = ""

    def lines(self, limit: int = 5) -> list[str]:
        return [line for line in self.text.splitlines() if line.strip()][:limit]


@contextlib.contextmanager
def captured_stderr() -> Iterator[Captured]:
    captured = Captured()
    sys.stderr.flush()
    saved = os.dup(2)
    sink = os.memfd_create("e2e-native-stderr")
    try:
        os.dup2(sink, 2)
        yield captured
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.lseek(sink, 0, os.SEEK_SET)
        data = b""
        while chunk := os.read(sink, 1 << 16):
            data += chunk
        os.close(sink)
        if data:
            os.write(2, data)
        captured.text = data.decode(errors="replace")
