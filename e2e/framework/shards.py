"""Shards: one run split over N machines, `--shard I/N` keeping shard I's items.

A test's configs stay together: they are one scope (`<file>::<Test>`, the xdist scope),
sharing one capture and one test host. Scopes are dealt greedily, longest first, to the
least-loaded shard, with each scope's duration from an earlier run: per pair from a
results file (`--shard-durations`: a results.json, results.jsonl or reports directory),
or per test from the durations the plugin keeps in pytest's cache for ordering. A scope
with no recorded duration weighs the median of those that have one (1 s when none has),
and ties are broken by the SHA-256 of the scope's name, so the deal depends only on the
selected items and the durations: every shard computes the same plan on its own.

Every shard must see the same items (the same arguments) and the same durations, or
some tests run twice and others never. The plan's digest (`plan`, in `run.json`) names
the whole assignment; `python -m e2e.tools.merge` refuses shards whose plans differ.
"""

from __future__ import annotations

import hashlib
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

UNKNOWN_WEIGHT = 1.0  # seconds a scope weighs when no scope has a recorded duration


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    @classmethod
    def parse(cls, text: str) -> "ShardSpec":
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise ValueError(f"--shard {text!r}: expected I/N, e.g. --shard 1/4")
        index, count = int(match[1]), int(match[2])
        if count < 1 or not 1 <= index <= count:
            raise ValueError(f"--shard {text}: I must be between 1 and N (shards are numbered from 1)")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def scope_of(nodeid: str) -> str:
    """The scope of an item: `<file>::<Test>` for an e2e item (as the xdist scheduler
    splits it), the node id itself for anything shorter."""
    parts = nodeid.split("::")
    return "::".join(parts[:2]) if len(parts) >= 3 else nodeid


@dataclass
class Durations:
    """Recorded seconds: per pair (test, config) from a results file, per test (its total
    over the configs it ran) from the plugin's cache. `source` says where they came from."""

    pairs: dict[tuple[str, str], float] = field(default_factory=dict)
    tests: dict[str, float] = field(default_factory=dict)
    source: str = "none"

    @classmethod
    def from_rows(cls, rows: Iterable[dict], source: str) -> "Durations":
        pairs = {}
        for row in rows:
            seconds = row.get("duration")
            if isinstance(seconds, (int, float)) and row.get("config") not in (None, "-"):
                pairs[(row["test"], row["config"])] = float(seconds)
        return cls(pairs=pairs, source=source)

    @classmethod
    def from_results(cls, path: Path | str) -> "Durations":
        from e2e.framework.results_files import load_rows, results_file

        rows, _ = load_rows(path)
        return cls.from_rows(rows, str(results_file(path)))

    def weight(self, test: str | None, configs: Sequence[str]) -> float | None:
        """Seconds the configs of `test` took, or None when nothing of it was recorded. A
        config the earlier run did not have weighs the mean of the test's others."""
        if test is None:
            return None
        known = [self.pairs[(test, c)] for c in configs if (test, c) in self.pairs]
        if known:
            mean = sum(known) / len(known)
            return sum(known) + mean * (len(configs) - len(known))
        return self.tests.get(test)


@dataclass(frozen=True)
class Scope:
    name: str  # `<file>::<Test>`
    test: str | None  # the registered test's name (None: not an e2e test)
    configs: tuple[str, ...]


@dataclass
class Plan:
    """Which shard each scope is in, and the seconds each shard is expected to take."""

    count: int
    shard_of: dict[str, int]  # scope -> 1-based shard
    loads: list[float]  # estimated seconds per shard
    known: int  # scopes with a recorded duration
    digest: str  # names the assignment of every item: equal in every shard of one run

    def summary(self, spec: ShardSpec, items: int, total_items: int, source: str) -> dict:
        """What `run.json` records of this shard (`e2e.tools.merge` checks it)."""
        mine = sum(1 for shard in self.shard_of.values() if shard == spec.index)
        return {
            "index": spec.index,
            "count": spec.count,
            "plan": self.digest,
            "tests": mine,
            "total_tests": len(self.shard_of),
            "items": items,
            "total_items": total_items,
            "tests_with_durations": self.known,
            "durations": source,
            "estimated_s": [round(load, 1) for load in self.loads],
        }


def _tiebreak(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


def plan(scopes: Sequence[Scope], count: int, durations: Durations, nodeids: Iterable[str] = ()) -> Plan:
    """Deal `scopes` to `count` shards: longest first, each to the least-loaded shard (the
    lowest-numbered of equals). `nodeids` (every selected item) go into the digest."""
    weights = {scope.name: durations.weight(scope.test, scope.configs) for scope in scopes}
    known = [w for w in weights.values() if w is not None]
    fill = statistics.median(known) if known else UNKNOWN_WEIGHT
    order = sorted(
        scopes, key=lambda s: (-(weights[s.name] if weights[s.name] is not None else fill), _tiebreak(s.name))
    )
    loads = [0.0] * count
    shard_of: dict[str, int] = {}
    for scope in order:
        target = min(range(count), key=lambda i: (loads[i], i))
        shard_of[scope.name] = target + 1
        weight = weights[scope.name]
        loads[target] += weight if weight is not None else fill
    lines = [f"{shard}\t{name}" for name, shard in sorted(shard_of.items())]
    lines += [f"{shard_of[scope_of(n)]}\t{n}" for n in sorted(nodeids)]
    digest = hashlib.sha256("\n".join([str(count), *lines]).encode()).hexdigest()[:16]
    return Plan(count=count, shard_of=shard_of, loads=loads, known=len(known), digest=digest)


def scopes_of(items: Sequence) -> list[Scope]:
    """The scopes of pytest items, in their first item's order, with each scope's configs."""
    found: dict[str, tuple[str | None, list[str]]] = {}
    for item in items:
        name = scope_of(item.nodeid)
        test, configs = found.setdefault(name, (getattr(item, "test_name", None), []))
        config = getattr(item, "config_name", None)
        if config is not None:
            configs.append(config)
        if test is None and getattr(item, "test_name", None) is not None:
            found[name] = (item.test_name, configs)
    return [Scope(name, test, tuple(configs)) for name, (test, configs) in found.items()]
