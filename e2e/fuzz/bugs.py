"""Each bug once, and only bugs: a campaign's failing pairs grouped into distinct bugs.

A failing pair is one of:

- a **bug**: a wrong result (the float64 oracle did not acquit it), a crash, a hang or an
  out-of-memory, a compile failure that is the compiler breaking (a verifier error, a pass
  that breaks the IR), or a refusal of an op the config takes alone (with the same types and
  attributes: the combination is what it refuses);
  pairs with one key are one bug: the config, the signature's stage and pass or kind, its
  message with every number and type written in it left out (`bug_message`: a generated
  program's sizes, operand and dim numbers and tensor types change from program to program,
  the bug does not), and the guilty op (a crash's: where its bundle ends, with the pass it
  crashes in: `crash_site`, `merge_crash_sites`);
  **known** when an xfail entry of the hand-written suites carries that key, or names the
  bug's root (`KnownSignatures.knows_root`), else **new**;
- a **coverage gap**: a refusal (`REJECTION`: failed to legalize, unsupported, ...) of an
  op the config does not take even alone (`e2e.fuzz.coverage.Support`), counted per
  (config, op) and never reported as a bug;
- a **broken program**: torch itself refused the generated program (the generator's bug).

A wrong result's signature (`compare | values`) names no op, nor does a crash's (`crash |
backend | Fatal Python error: Segmentation fault`): such a bug is known only when an xfail
entry with that signature on the same config belongs to a hand-written test named after
the guilty op (`Cumsum_Dynamic` for `torch.aten.cumsum`).

A bug's **root** (`Bug.root`) is where its reduced program fails: the guilty op and the
step (pass) it fails in, at any config (`torch.aten.view in convert-torch-to-linalg`); for
a bug whose failing pass only tripped over types an earlier step broke, what broke them
(`a fold or rewrite of torch.aten.where.self`). Bugs of one root are one compiler bug. A
bug is known by its root too: an xfail entry of a hand-written test that fails in the same
pass on the same op, or, a wrong result, any mismatch of a test named after its guilty op
on its config (a reduction that moved `nan` to `values` leaves the bug known).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from e2e.framework.result import Result
from e2e.framework.signature import Signature, guilty_op, pass_name
from e2e.fuzz.bundles import bundle_case, crash_site

RUNTIME_ENDINGS = ("crash", "timeout", "memory")
NOT_FAILURES = ("pass", "skip")
WRONG, CRASH, COMPILE, BROKEN = "wrong result", "crash or hang", "compile failure", "broken program"


def short_op(op: str | None) -> str | None:
    """`torch.aten.pow.Tensor_Scalar` -> `pow`; `tosa.reshape` -> `tosa.reshape` (not an aten op)."""
    if not op:
        return None
    if op.startswith(("torch.aten.", "aten.")):
        return op.split("aten.", 1)[1].split(".")[0].rstrip("_") or None
    return op


def kind_of(result: Result) -> str:
    if result.outcome in RUNTIME_ENDINGS:
        return CRASH
    if result.stage == "golden":
        return BROKEN
    if result.stage == "compare":
        return WRONG
    return COMPILE


def ltc_op(message: str) -> str | None:
    """The first op of LTC's `LTC has no lowering for aten::where.self, ...`, as torch-mlir names it."""
    match = re.search(r"aten::(\w+)", message)
    return f"torch.aten.{match[1]}" if match else None


def named_op(signature: Signature) -> str | None:
    """The op a signature's message blames (`Signature.op`), or the first LTC lacks a lowering for."""
    return signature.op or ltc_op(signature.message or "")


# What `bug_message` leaves out of a signature's message, in order: types first (their
# sizes and element types are the program's), then every number left.
_TYPES = re.compile(r"!?\w+(?:\.\w+)*<(?:[^<>]|<[^<>]*>)*>")  # !torch.vtensor<[2,?],f32>, tensor<2x?xbf16>
_NUMBERS = re.compile(r"-?\b\d+\b|-N\b|\bN\b")


def bug_message(message: str | None) -> str | None:
    """A signature's message as one bug shows it in any program: `type of return operand 3
    ('!torch.vtensor<[N,?],si64>') doesn't match` and `... operand 0 ('!torch.vtensor<[],f32>')
    ...` are one bug."""
    if message is None:
        return None
    return _NUMBERS.sub("#", _TYPES.sub("<type>", message))


def bug_key(signature: Signature) -> tuple[str, str | None, str | None]:
    """The part of a signature that tells one bug from another (see the module doc)."""
    return signature.stage, signature.where, bug_message(signature.message)


@dataclass(frozen=True)
class Failure:
    """One failing pair of a campaign, as the classification sees it."""

    test: str
    config: str
    kind: str
    signature: Signature
    guilty_op: str | None
    repro_path: str | None = None
    types_broke: str | None = None  # the reducer's word on the step that broke the types, if one did
    types_root: str | None = None  # what broke them, whatever the step
    crash_pass: str | None = None  # a crash's: the pass its bundle crashes in (`crash_site`)
    failing_step: str | None = None  # the step its verified bundle fails in (its case's last pipeline entry)

    @classmethod
    def of(cls, result: Result, site: bool = True) -> "Failure":
        """The failure a pair's Result records (a campaign's results read with
        `Result.from_json`). `site=False` leaves a crash's bundle unparsed (`crash_site`): a
        server reading an upload parses no IR."""
        signature = result.signature or Signature(str(result.stage), "-")
        # A verified bundle's guilty op and step name the bug (the fields; a bundle of a row
        # written before them, its case.json).
        case = bundle_case(result.repro_path) if result.guilty_op is None or result.failing_step is None else {}
        bundled = (result.guilty_op or case.get("guilty_op")) if result.repro_path else None
        step = (result.failing_step or (case.get("pipeline") or [None])[-1]) if result.repro_path else None
        op = bundled or guilty_op(result.error or "") or named_op(signature)
        types = result.types_broke and "; ".join(filter(None, (result.types_broke, result.types_bundle)))
        kind, crash_pass = kind_of(result), None
        if kind == CRASH and site:
            last_ops, crash_pass = crash_site(result.repro_path)
            op = bundled or last_ops or op  # the bundle's: the op its crash state's frames name
        test, config, repro = result.test, result.config, result.repro_path
        return cls(test, config, kind, signature, op, repro, types, result.types_root, crash_pass, step)

    @property
    def site(self) -> tuple[str | None, str | None]:
        """Where it fails, as far as it is known: (the pass, by name, of its bundle's failing
        step, else of its signature when a compile stage failed: its pass, or the stage when
        no pass ran (a frontend's `capture | - | ...`); the guilty op)."""
        where = self.signature.where if self.signature.where not in (None, "-") else self.signature.stage
        step = self.failing_step or (where if self.kind == COMPILE else None)
        return (pass_name(step) if step else None), self.guilty_op

    @property
    def key(self) -> tuple:
        """What makes two failures one bug (crashes whose bundles end in a common op merge
        later: `merge_crash_sites`)."""
        return self.config, bug_key(self.signature), self.guilty_op, self.crash_pass


@dataclass
class Bug:
    """A distinct bug: every failing pair with one key."""

    config: str
    signature: Signature
    guilty_op: str | None
    kind: str
    known: bool
    failures: list[Failure] = field(default_factory=list)
    # After triage (`e2e.fuzz.triage`): the smallest program, its regression test, and that
    # test's bundle on this config with whether its repro.py exits 1.
    reduced: Any = None  # e2e.generate.program.Program
    regression: str | None = None
    regression_bundle: str | None = None
    verified: bool | None = None
    checked_types: str | None = None  # the triage's own type check (`e2e.fuzz.triage.check_types`)
    checked_root: str | None = None  # and what it says broke them
    reduced_failure: Failure | None = None  # its regression test's pair on this config, as it failed

    @property
    def root(self) -> str | None:
        """Where its reduced program fails (see the module doc): what broke the types, when an
        earlier step did; else the guilty op and the pass of its reduced bundle (the regression
        test's, else a pair's), else of its signature; None when neither is known."""
        if self.types_root:
            return self.types_root
        step, op = self.site
        return f"{op} in {step}" if step and op else None

    @property
    def site(self) -> tuple[str | None, str | None]:
        """(pass, guilty op) of its most reduced failure: the regression test's pair, else the
        first pair with a bundle's failing step, else its first pair (`Failure.site`)."""
        failures = [*filter(None, [self.reduced_failure]), *self.failures]
        chosen = next((f for f in failures if f.failing_step), None) or self.first
        step, op = chosen.site
        return step, (op if chosen is not self.first else self.guilty_op)

    @property
    def stage(self) -> str:
        return self.signature.stage

    @property
    def first(self) -> Failure:
        return self.failures[0]

    @property
    def types_broke(self) -> str | None:
        """Where the types broke: the reducer's word on a failing pair, else the triage's."""
        return next((f.types_broke for f in self.failures if f.types_broke), self.checked_types)

    @property
    def types_root(self) -> str | None:
        """What broke the types, whatever the step: bugs with one root are one compiler bug."""
        return next((f.types_root for f in self.failures if f.types_root), self.checked_root)

    @property
    def bundle(self) -> str | None:
        """The regression test's bundle, else the campaign's own bundle of the first pair."""
        return self.regression_bundle or next((f.repro_path for f in self.failures if f.repro_path), None)


@dataclass
class Classified:
    bugs: list[Bug] = field(default_factory=list)
    gaps: dict[tuple[str, str], list[Failure]] = field(default_factory=dict)  # (config, op) -> failures
    broken: list[Failure] = field(default_factory=list)

    @property
    def new(self) -> list[Bug]:
        return [bug for bug in self.bugs if not bug.known]

    @property
    def known(self) -> list[Bug]:
        return [bug for bug in self.bugs if bug.known]


@dataclass(frozen=True)
class KnownSignatures:
    """The signatures the hand-written suites' xfail entries carry, per config."""

    by_config: dict[str, dict[tuple, tuple[str, ...]]]  # config -> `bug_key` -> the tests that carry it
    entries: dict[str, tuple[tuple[str, Signature], ...]] = field(default_factory=dict)  # config -> (test, signature)

    @classmethod
    def load(cls, directory: Path, configs: Iterable[str], generated: Callable[[str], bool]) -> "KnownSignatures":
        from e2e.configs.xfails import read_xfails, xfail_path

        found: dict[str, dict[tuple, tuple[str, ...]]] = {}
        entries: dict[str, tuple[tuple[str, Signature], ...]] = {}
        for config in configs:
            carried: dict[tuple, list[str]] = defaultdict(list)
            kept = [
                (entry.test, entry.expected[1])
                for entry in read_xfails(xfail_path(config, directory), None)
                if entry.expected is not None and not generated(entry.test)
            ]
            for test, signature in kept:
                carried[bug_key(signature)].append(test)
            found[config] = {signature: tuple(tests) for signature, tests in carried.items()}
            entries[config] = tuple(kept)
        return cls(found, entries)

    def carries(self, failure: Failure) -> bool:
        """Whether an entry carries the failure's key (see the module doc), or its root."""
        tests = self.by_config.get(failure.config, {}).get(bug_key(failure.signature), ())
        if failure.kind == CRASH and not tests:
            tests = self._crash_entries(failure)
        if failure.kind not in (WRONG, CRASH):
            return bool(tests) or self.knows_site(failure.config, failure.kind, *failure.site)
        op = _squash(short_op(failure.guilty_op) or "")
        return (bool(op) and any(op in _squash(test) for test in tests)) or self.knows_site(
            failure.config, failure.kind, *failure.site
        )

    def _crash_entries(self, failure: Failure) -> tuple[str, ...]:
        """The tests whose entry records this crash without its crash state: `crash |
        execute | Fatal Python error: Aborted` for one that says `...: Aborted: mismatched
        size for broadcast` (an entry older than crash states, or one a test holds for any
        abort in its stage). An entry that has a crash state carries only its own."""
        observed = failure.signature
        return tuple(
            test
            for test, recorded in self.entries.get(failure.config, ())
            if recorded.stage == observed.stage
            and recorded.where == observed.where
            and (observed.message or "").startswith(recorded.message or "")
        )

    def knows_root(self, bug: "Bug") -> bool:
        """Whether an entry names the bug's root (its most reduced failure's pass and guilty op)."""
        return self.knows_site(bug.config, bug.kind, *bug.site)

    def knows_site(self, config: str, kind: str, step: str | None, op: str | None) -> bool:
        """Whether a hand-written test's entry fails where a bug of `kind` on `config` does:
        in pass `step` on op `op` (the op its message blames, else the one it is named
        after), at any config; a wrong result: any mismatch on `config` of a test named after `op`;
        a crash only by its key (an entry of a crash names its stage, not its pass)."""
        ops = {_squash(short_op(one) or "") for one in (op or "").split(", ")} - {""}
        if not ops:
            return False

        def names(test: str, signature: Signature) -> bool:
            blamed = named_op(signature)
            if blamed is not None and signature.stage != "compare":
                return _squash(short_op(blamed) or "") in ops
            return any(one in _squash(test) for one in ops)

        if kind == WRONG:
            return any(s.stage == "compare" and names(t, s) for t, s in self.entries.get(config, ()))
        if kind != COMPILE or step is None:  # a crash's entry names its stage, not its pass: by its key alone
            return False
        return any(
            s.stage not in ("compare", "golden", *RUNTIME_ENDINGS) and pass_name(s.where) == step and names(t, s)
            for entries in self.entries.values()
            for t, s in entries
        )


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


# How a config says it lacks an op (a legalization or conversion that refuses it); any
# other compile failure (a verifier error, a pass that breaks the IR, an assertion) is a bug
# whatever the config takes.
REJECTION = re.compile(
    r"failed to legalize|unsupported|not supported|not implemented|NotImplemented|unimplemented|"
    r"no lowering|cannot be lowered|could not be lowered|not lowered",
    re.IGNORECASE,
)


def rejects(failure: Failure) -> bool:
    """Whether a compile failure is the config refusing an op (not the compiler breaking)."""
    return failure.kind == COMPILE and REJECTION.search(failure.signature.format()) is not None


def classify(results: Iterable[Result], known: KnownSignatures, untaken: Callable[[Failure], str | None]) -> Classified:
    """Group a campaign's failing pairs into bugs, coverage gaps and broken programs.

    `untaken(failure)`: for a compile failure that refuses an op, the op the config does not
    take even alone (the failure is a coverage gap of that op), or None (it does: a bug)."""
    result = Classified()
    bugs: dict[tuple, Bug] = {}
    for pair in results:
        if pair.outcome in NOT_FAILURES:
            continue
        failure = Failure.of(pair)
        if failure.kind == BROKEN:
            result.broken.append(failure)
            continue
        if rejects(failure):
            op = untaken(failure)
            if op is not None:
                result.gaps.setdefault((failure.config, op), []).append(failure)
                continue
        bug = bugs.get(failure.key)
        if bug is None:
            bug = bugs[failure.key] = Bug(
                failure.config, failure.signature, failure.guilty_op, failure.kind, known.carries(failure)
            )
        bug.failures.append(failure)
    result.bugs = sorted(
        merge_crash_sites(list(bugs.values())),
        key=lambda b: (b.known, b.config, b.signature.format(), b.guilty_op or ""),
    )
    return result


def merge_crash_sites(bugs: list[Bug]) -> list[Bug]:
    """Crashes of one config, signature and crashing pass whose bundles end in a common op
    (`crash_site`: seed 953's bundle kept a `repeat` beside the `reshape` the others end in)
    are one bug, named by the ops they all end in; known if any part was."""
    groups: dict[tuple, list[Bug]] = defaultdict(list)
    for bug in bugs:
        place = bug.first.crash_pass
        if bug.kind == CRASH and place is not None and bug.guilty_op:
            groups[(bug.config, bug_key(bug.signature), place)].append(bug)
    absorbed: set[int] = set()
    for group in groups.values():
        merged: list[tuple[set[str], Bug]] = []
        for bug in group:
            ops = set(bug.guilty_op.split(", "))
            for index, (common, into) in enumerate(merged):
                if common & ops:
                    into.failures.extend(bug.failures)
                    into.known = into.known or bug.known
                    into.guilty_op = ", ".join(sorted(common & ops))
                    merged[index] = (common & ops, into)
                    absorbed.add(id(bug))
                    break
            else:
                merged.append((ops, bug))
    return [bug for bug in bugs if id(bug) not in absorbed]
