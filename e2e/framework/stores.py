"""Stores of cached values by key, one file an entry, written atomically: JSON objects
(`JsonStore`: results, mutation records) and pickled values with a size bound and
least-recently-used trimming (`PickleStore`: captures, imports, lowered programs)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `path` so that a reader (another worker, a later run) sees its old content or
    the new one, never half of one: a file of this process's own, renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class JsonStore:
    """JSON objects by key, one file each in `directory` (None: a store that keeps nothing).
    A write is atomic: a reader sees the old entry or the new one, never half of one."""

    def __init__(self, directory: Path | None):
        self.directory = directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict | None:
        if self.directory is None:
            return None
        try:
            data = json.loads((self.directory / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def put(self, key: str, data: dict) -> None:
        if self.directory is None:
            return
        write_bytes_atomic(self.directory / f"{key}.json", json.dumps(data).encode())


class PickleStore:
    """Python values by key, one pickle file each in `directory` (None: a store that keeps
    nothing), of this user's own cache directory. A write is atomic; an entry larger than
    `entry_bytes` is not kept; `trim` removes the least recently used (read or written)
    past a total size. The frontend cache's and the program cache's store."""

    def __init__(self, directory: Path | None, entry_bytes: int):
        self.directory = directory
        self.entry_bytes = entry_bytes
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)

    def get(self, name: str) -> object | None:
        if self.directory is None:
            return None
        path = self.directory / f"{name}.pickle"
        try:
            value = pickle.loads(path.read_bytes())
            os.utime(path)  # recently used: kept by `trim`
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None
        return value

    def put(self, name: str, value: object) -> None:
        if self.directory is None:
            return
        data = pickle.dumps(value)
        if len(data) > self.entry_bytes:
            return
        write_bytes_atomic(self.directory / f"{name}.pickle", data)

    def trim(self, limit: int) -> int:
        """Remove the least recently used entries past `limit` bytes; returns how many."""
        if self.directory is None:
            return 0
        entries = []
        for path in self.directory.glob("*.pickle"):
            try:
                stat = path.stat()
            except OSError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        total, removed = sum(size for _, size, _ in entries), 0
        for _, size, path in sorted(entries):
            if total <= limit:
                break
            path.unlink(missing_ok=True)
            total, removed = total - size, removed + 1
        return removed
