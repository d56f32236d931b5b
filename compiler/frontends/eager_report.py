"""What an eager session did: ops run compiled, cache hits, fallbacks and their reasons.

A *fallback* is an op that computes values but ran on native PyTorch because it could
not be compiled (or its compiled form failed). It is a failure: its `signature` is the
op overload and the stage that failed, and `torch_ir` keeps the single-op torch-dialect
program that a reproducer starts from. Ops that stay native by design (views,
metadata, allocation, random numbers; see `eager.NATIVE_BY_DESIGN`) are counted apart
and are not failures.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Fallback:
    """One op signature that fell back to native PyTorch, and why."""

    op: str  # the op overload, e.g. "aten.max.dim"
    arguments: str  # tensor shapes and dtypes, non-tensor arguments, e.g. "f32[4,4], 1"
    stage: str  # the stage that failed: capture, import, torch-backend, backend, lower, execute, compare
    message: str  # the first diagnostic
    torch_ir: str | None = None  # the single op as raw torch-dialect IR (None if import failed)
    graph: str = ""  # the single-op FX graph (what import was given)
    failing_pass: str | None = None
    failing_ir: str | None = None  # the IR just before the failing pass
    calls: int = 0

    @property
    def signature(self) -> str:
        return f"{self.op} @ {self.stage}"

    def describe(self) -> str:
        where = f" in {self.failing_pass}" if self.failing_pass else ""
        return f"{self.op}({self.arguments}): [{self.stage}{where}] {self.message}"


@dataclass
class EagerReport:
    """Counts per op overload name. `passed` means no value-computing op fell back."""

    compiled_calls: Counter[str] = field(default_factory=Counter)
    cache_hits: Counter[str] = field(default_factory=Counter)
    compiles: Counter[str] = field(default_factory=Counter)  # signatures compiled (cache misses)
    native_calls: Counter[str] = field(default_factory=Counter)  # native by design
    native_reasons: dict[str, str] = field(default_factory=dict)
    fallbacks: list[Fallback] = field(default_factory=list)  # one per op signature
    compile_seconds: float = 0.0

    @property
    def fallback_calls(self) -> Counter[str]:
        calls: Counter[str] = Counter()
        for fallback in self.fallbacks:
            calls[fallback.op] += fallback.calls
        return calls

    @property
    def passed(self) -> bool:
        return not self.fallbacks

    @property
    def fallen_back_ops(self) -> list[str]:
        return sorted({f.op for f in self.fallbacks})

    def summary(self) -> str:
        """A table a person can read: one line per op, then every fallback with its reason."""
        total_compiled = sum(self.compiled_calls.values())
        total_hits = sum(self.cache_hits.values())
        fallback_calls = self.fallback_calls
        lines = [
            f"eager: {total_compiled} calls compiled ({len(self.compiled_calls)} ops, "
            f"{sum(self.compiles.values())} signatures compiled in {self.compile_seconds:.2f} s, "
            f"{total_hits} cache hits), "
            f"{sum(fallback_calls.values())} calls fell back ({len(fallback_calls)} ops), "
            f"{sum(self.native_calls.values())} native by design ({len(self.native_calls)} ops)",
        ]
        ops = sorted(set(self.compiled_calls) | set(fallback_calls) | set(self.native_calls))
        if ops:
            width = max(len(op) for op in ops)
            lines.append(f"  {'op':<{width}}  compiled  hits  fallback  native")
            for op in ops:
                lines.append(
                    f"  {op:<{width}}  {self.compiled_calls[op]:>8}  {self.cache_hits[op]:>4}"
                    f"  {fallback_calls[op]:>8}  {self.native_calls[op]:>6}"
                )
        if self.fallbacks:
            lines.append("fallbacks:")
            lines.extend(f"  {f.describe()}" for f in self.fallbacks)
        if self.native_calls:
            lines.append("native by design:")
            lines.extend(f"  {op}: {self.native_reasons[op]}" for op in sorted(self.native_calls))
        return "\n".join(lines)
