"""From `op_db` to e2e tests: the first samples of every op, stably named, skips classified.

Each OpInfo entry (op and variant) gives its first `SAMPLES_PER_DTYPE[dtype]` sample
inputs for float32, int64 and bool (where the op supports the dtype on CPU). A sample
becomes one test, `OpInfo_<op>[_<variant>]_<k>` (float32) or `..._<dtype>_<k>`: its
tensors are the forward arguments, everything else is a constant of the module.
Sample generation is seeded by the test's name, so a name means the same case on every
run and machine with this torch. What is not taken is recorded with its reason.
"""

from __future__ import annotations

import itertools
import re
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from e2e.framework.registry import GLOBAL_TEST_REGISTRY, Test, register

SAMPLES_PER_DTYPE = {torch.float32: 3, torch.int64: 1, torch.bool: 1}
DTYPE_SUFFIX = {torch.float32: "", torch.int64: "_int64", torch.bool: "_bool"}
MAX_SAMPLE_ELEMENTS = 10_000  # bigger samples cost compile and run time without covering more
CI_SHARE = 8  # the `opinfo_ci` slice: sample 0 (float32) of one op in CI_SHARE, by a hash of its name
TIMEOUT_SECONDS = 120.0

# Why a sample, dtype or op is not a test. Counted by the collection report.
NO_FLOAT32 = "op does not support float32 on CPU"
SAMPLES_RAISE = "sample generation raises"
NATIVE_RAISES = "op raises on native CPU for this sample"
NON_TENSOR_OUTPUT = "output is not made of dense tensors (and scalars)"
NON_STRIDED_INPUT = "input is not a strided (dense) tensor"
RANDOM = "op draws from the random number generator"
NONDETERMINISTIC = "output differs between two native runs"
UNINITIALIZED = "output is uninitialized memory"
TOO_LARGE = f"sample has more than {MAX_SAMPLE_ELEMENTS} elements"
INPLACE = "in-place variant (the functional form is swept)"


class _TensorSlot:
    """One instance, kept by copies (the golden trace deep-copies the module)."""

    def __repr__(self) -> str:
        return "<tensor argument>"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return "TENSOR"


TENSOR = _TensorSlot()  # marks where a forward argument goes among a sample's leaves

# Ops whose output is uninitialized memory: any compiled value is right, none comparable.
UNINITIALIZED_OPS = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}


@dataclass(frozen=True)
class Skip:
    op: str  # the op's key, e.g. "nn_functional_pad_reflect"
    dtype: str
    reason: str
    samples: int  # how many samples this record stands for (0: the whole op or dtype)


@dataclass
class OpInfoCase:
    """One sample of one op: the test it becomes."""

    name: str
    op: str
    dtype: str
    index: int
    fn: Callable[..., Any]
    tensors: list[torch.Tensor]
    leaves: list[Any]  # the sample's flattened (input, args, kwargs), TENSOR where a tensor goes
    spec: Any

    def call(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        values = [next(given) if leaf is TENSOR else leaf for leaf in self.leaves]
        sample_input, args, kwargs = tree_unflatten(values, self.spec)
        return self.fn(sample_input, *args, **kwargs)


@dataclass
class Collection:
    cases: list[OpInfoCase] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    ops: int = 0  # OpInfo entries (op and variant) seen

    def summary(self) -> str:
        taken_ops = {c.op for c in self.cases}
        by_dtype = Counter(c.dtype for c in self.cases)
        lines = [
            f"OpInfo entries: {self.ops}; with at least one test: {len(taken_ops)}",
            f"tests (samples taken): {len(self.cases)} ("
            + ", ".join(f"{d} {n}" for d, n in sorted(by_dtype.items()))
            + ")",
            "not taken, by reason (entries / samples):",
        ]
        entries, samples = Counter(), Counter()
        for skip in self.skips:
            entries[skip.reason] += 1
            samples[skip.reason] += skip.samples
        for reason, count in entries.most_common():
            lines.append(f"  {count:5d} / {samples[reason]:5d}  {reason}")
        untaken = sorted({s.op for s in self.skips} - taken_ops)
        lines.append(
            f"entries with no test at all: {len(untaken)}"
            + (
                f" ({', '.join(untaken[:12])}, ...)"
                if len(untaken) > 12
                else f" ({', '.join(untaken)})"
                if untaken
                else ""
            )
        )
        return "\n".join(lines)


def op_key(op) -> str:
    name = op.name + (f"_{op.variant_test_name}" if op.variant_test_name else "")
    return re.sub(r"[^0-9A-Za-z_]", "_", name)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _is_output(value: Any) -> bool:
    leaves, _ = tree_flatten(value)
    return any(isinstance(v, torch.Tensor) for v in leaves) and all(
        v is None or isinstance(v, (bool, int, float)) or (isinstance(v, torch.Tensor) and v.layout == torch.strided)
        for v in leaves
    )


def _same(a: Any, b: Any) -> bool:
    left, _ = tree_flatten(a)
    right, _ = tree_flatten(b)
    try:
        torch.testing.assert_close(left, right, rtol=0, atol=0, equal_nan=True)
    except Exception:
        return False
    return True


class _seeding_counted:
    """True while in use if the code inside called `torch.manual_seed`."""

    def __enter__(self):
        self.calls, self.original = [], torch.manual_seed
        torch.manual_seed = lambda seed: (self.calls.append(seed), self.original(seed))[1]
        return self

    def __exit__(self, *exc):
        torch.manual_seed = self.original

    def __bool__(self) -> bool:
        return bool(self.calls)


def _classify(op, case: OpInfoCase) -> str | None:
    """Why this sample is not a test, or None. Runs the op natively twice."""
    if any(t.layout != torch.strided for t in case.tensors):
        return NON_STRIDED_INPUT
    if sum(t.numel() for t in case.tensors) > MAX_SAMPLE_ELEMENTS:
        return TOO_LARGE
    if op.name in UNINITIALIZED_OPS:
        return UNINITIALIZED
    try:
        # Different RNG seeds, so a random op differs on every machine and every worker
        # classifies it the same way (xdist needs identical collections).
        torch.manual_seed(0)
        state = torch.get_rng_state()
        with _seeding_counted() as seeded:
            first = case.call(*[t.clone() for t in case.tensors])
        # OpInfo wraps random ops to reseed (and restore the RNG) on each call: the same values twice.
        draws = seeded or not torch.equal(state, torch.get_rng_state())
        torch.manual_seed(1)
        second = case.call(*[t.clone() for t in case.tensors])
    except Exception:
        return NATIVE_RAISES
    if not _is_output(first):
        return NON_TENSOR_OUTPUT
    if draws:
        return RANDOM
    if not _same(first, second):
        return NONDETERMINISTIC
    return None


def _samples(op, dtype: torch.dtype, name: str, count: int) -> list:
    torch.manual_seed(zlib.crc32(name.encode()))
    return list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=False), count))


def in_ci_ops(key: str) -> bool:
    """The ops of the `opinfo_ci` slice: one in CI_SHARE, by a hash of the name (stable)."""
    return zlib.crc32(key.encode()) % CI_SHARE == 0


def collect(op_db: list | None = None, only: Callable[[str], bool] | None = None) -> Collection:
    """Every OpInfo entry's first samples as cases, and what was not taken, with why.

    `only(op_key)` restricts the entries (e.g. `in_ci_ops`: collecting all takes minutes).
    """
    if op_db is None:
        from torch.testing._internal.common_methods_invocations import op_db
    collection = Collection()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in op_db:
            key = op_key(op)
            if only is not None and not only(key):
                continue
            collection.ops += 1
            if op.inplace_variant is not None:
                collection.skips.append(Skip(key, "-", INPLACE, 0))
            supported = op.supported_dtypes("cpu")
            if torch.float32 not in supported:
                collection.skips.append(Skip(key, "float32", NO_FLOAT32, 0))
            for dtype, count in SAMPLES_PER_DTYPE.items():
                if dtype in supported:
                    _collect_dtype(op, key, dtype, count, collection)
    return collection


def _collect_dtype(op, key: str, dtype: torch.dtype, count: int, collection: Collection) -> None:
    base = f"OpInfo_{key}{DTYPE_SUFFIX[dtype]}"
    try:
        samples = _samples(op, dtype, base, count)
    except Exception:
        collection.skips.append(Skip(key, _dtype_name(dtype), SAMPLES_RAISE, 0))
        return
    for index, sample in enumerate(samples):
        leaves, spec = tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
        tensors = [_dense(leaf) for leaf in leaves if isinstance(leaf, torch.Tensor)]
        case = OpInfoCase(
            f"{base}_{index}",
            key,
            _dtype_name(dtype),
            index,
            op.op,
            tensors,
            [TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves],
            spec,
        )
        reason = _classify(op, case)
        if reason is None:
            collection.cases.append(case)
        else:
            collection.skips.append(Skip(key, case.dtype, reason, 1))


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    return tensor.contiguous() if tensor.layout == torch.strided else tensor


class OpInfoModule(torch.nn.Module):
    def __init__(self, case: OpInfoCase):
        super().__init__()
        self.case = case

    def forward(self, *tensors):
        return self.case.call(*tensors)


def in_ci_slice(case: OpInfoCase) -> bool:
    return case.dtype == "float32" and case.index == 0 and in_ci_ops(case.op)


def as_test(case: OpInfoCase) -> Test:
    def invoke(module, tu) -> None:
        module.forward(*[t.clone() for t in case.tensors])

    marks = ("opinfo", "opinfo_ci") if in_ci_slice(case) else ("opinfo",)
    return Test(
        case.name,
        lambda: OpInfoModule(case),
        invoke,
        source=f"op_db: {case.op} ({case.dtype} sample {case.index})",
        timeout_seconds=TIMEOUT_SECONDS,
        marks=marks,
    )


def register_sweep(
    collection: Collection | None = None,
    only: Callable[[str], bool] | None = None,
    cases: Callable[[OpInfoCase], bool] | None = None,
) -> Collection:
    """Register every case (of the ops `only` keeps; the `cases` it keeps) as an e2e test
    (once per process)."""
    collection = collection or collect(only=only)
    for case in collection.cases:
        if (cases is None or cases(case)) and case.name not in GLOBAL_TEST_REGISTRY:
            register(as_test(case))
    return collection
