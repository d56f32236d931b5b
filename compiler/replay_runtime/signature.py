"""Failure signatures: what makes two failures the same bug.

A signature is `stage | where | message`: for a compile-time failure, the stage, the
failing pass (`-`: none) and the normalized first error line; for a wrong result,
`compare | <mismatch kind>`; for a process that ended abnormally, how it ended and the
stage it was in (`crash | <stage> | <first native error>`, `timeout | <stage>`,
`memory | <stage>`, `framework | <stage>`); for a broken test, `golden | broken test |
<kind>` or `import | broken test file | <error>`. Normalizing strips what changes
between two occurrences of one bug: locations, file paths, SSA value names, addresses,
and concrete sizes in shapes.

A signature travels as a value: the constructors below return a `Signature`, which a
Result, a reducer's case and the xfail matcher hold and compare as it is. Files carry its
text (`format()`): results (`results.json`), bundles' `case.json` and xfail files
(`<outcome>: <signature>`); `Signature.parse` reads it back, only where such a file is
read. It lives in the replay runtime, which imports nothing from the project and which
every bundle carries whole; the suite imports it as `e2e.framework.signature`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r'loc\((?:"[^"]*"|[^()]|\([^()]*\))*\)'), "loc"),  # loc("f.py":3:0), loc(fused[...])
    (re.compile(r'"[^"\s]*":\d+:\d+:?'), ""),  # "-":12:10:
    (re.compile(r"(?:/[\w.+-]+)+(?::\d+)*"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]{4,}\b"), "<addr>"),  # not `tensor<0xf32>`
    (re.compile(r"%[\w.#-]+"), "%v"),  # SSA names
    (re.compile(r"\^bb\d+"), "^bb"),
    (re.compile(r"(?<![\w.])\d{6,}(?![\w.])"), "N"),  # garbage sizes: "capacity (94472229991848)"
    (re.compile(r"(?<![\w.])\d+(?=x)"), "N"),  # the leading size of 3x4xf32
    (re.compile(r"(?<=[\[x,<])\d+(?=[x,\]>])"), "N"),  # sizes in shapes: [3,4], 3x4xf32
    (re.compile(r"\s+"), " "),
]


@dataclass(frozen=True)
class Signature:
    """One failure's signature; `format()` is its text, `parse(text)` reads it back."""

    stage: str  # the stage that failed, or how a process ended (crash, timeout, memory, framework)
    where: str | None = None  # the failing pass, the mismatch kind, the stage a process ended in
    message: str | None = None  # the normalized first error line

    def format(self) -> str:
        parts = [self.stage, self.where, self.message]
        while parts and parts[-1] is None:
            parts.pop()
        return " | ".join(part or "" for part in parts)

    __str__ = format

    @classmethod
    def parse(cls, text: str) -> "Signature":
        """The signature a text shows (`format()` gives the text back). A message may hold
        `|` itself; one cut short by an xfail file's stripped line is read as empty."""
        stage, *rest = text.split("|", 2)
        where = rest[0].strip() if rest else None
        message = rest[1].removeprefix(" ") if len(rest) > 1 else None
        return cls(stage.strip(), where, message)

    @property
    def op(self) -> str | None:
        """The op the message blames (`'x' op ...`, `operation 'x'`, the `'x': ` that
        `naming_op` writes), or None."""
        return guilty_op(self.message) if self.message else None

    def key(self) -> str:
        """The part that names the bug's place: stage, pass or kind, and the op the message
        blames, if any (a mismatch's kind is stable from run to run: see
        `compare.compare_tensors`): `lower | one-shot-bufferize | stablehlo.scatter`."""
        return " | ".join(part for part in (self.stage, self.where, self.op) if part is not None)

    def shows(self, observed: "Signature | None") -> bool:
        """Whether `observed` is this failure again: the same signature, or, for a crash,
        the same crash state whose native frames one of the two could not name (a process
        without `llvm-symbolizer` on its PATH prints the stack unnamed: a maintainer's
        machine replaying a bundle)."""
        if observed == self:
            return True
        if observed is None or self.stage != "crash" or (observed.stage, observed.where) != (self.stage, self.where):
            return False
        ours, _, our_frames = (self.message or "").partition(" in ")
        theirs, _, their_frames = (observed.message or "").partition(" in ")
        return ours == theirs and not (our_frames and their_frames)

    def covers(self, observed: "Signature") -> bool:
        """Whether `observed` is the failure this recorded signature names: the same stage
        and pass or kind, and the same op, unless this one names none (an entry recorded
        before its diagnostic's op was read out holds for the op named now)."""
        if (self.stage, self.where) != (observed.stage, observed.where):
            return False
        return self.op is None or self.op == observed.op


def normalize(message: str) -> str:
    """The first line of an error, with the parts that vary between occurrences removed."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text.strip(" :")[:300]


def pass_name(pass_entry: str | None) -> str:
    """`func.func(canonicalize{max-iterations=10})` -> `canonicalize`."""
    if not pass_entry:
        return "-"
    name = pass_entry
    while (match := re.fullmatch(r"[\w.]+\((.*)\)", name, re.S)) is not None:
        name = match[1]
    return re.sub(r"\{.*\}$", "", name, flags=re.S).strip()


def stage_signature(stage: str, message: str, failing_pass: str | None = None) -> Signature:
    """A stage's failure: the failing pass (`-` when none was localized) and its first error."""
    return Signature(stage, pass_name(failing_pass), normalize(message))


def mismatch_signature(kind: str) -> Signature:
    """A wrong result: `compare | values`, `compare | nan`, `compare | shape`, ..."""
    return Signature("compare", kind)


def ended_signature(ending: str, stage: str) -> Signature:
    """A process that ended in `stage` without a message to tell (`timeout`, `memory`, `framework`)."""
    return Signature(ending, stage)


def broken_test_signature(kind: str) -> Signature:
    """A test broken on native torch (`kind`: module_factory, deepcopy, invoker, outputs)."""
    return Signature("golden", "broken test", kind)


def first_native_error(stderr: str) -> str | None:
    """The first line of a crashed process's stderr that says what went wrong."""
    for line in stderr.splitlines():
        if any(word in line for word in ("Assertion", "error:", "LLVM ERROR", "Segmentation", "Aborted")):
            return line.strip()
    return None


def process_ending(status: int) -> str:
    """How a child process ended, as the suite's isolation words it (`Crashed.reason`): a
    negative status, or a shell's 128 + N, is death by signal N."""
    import signal

    number = -status if status < 0 else status - 128 if status > 128 else None
    if number is None:
        return f"exited with status {status} before returning a result"
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"killed by signal {number}"


def crash_signature(stage: str, stderr: str, reason: str) -> Signature:
    """As the runner writes it for a pair whose process died in `stage`: how it died (the
    first native error line, else the process's ending) and which crash it was (the crash
    state, `crash_state`), so that two aborts for different reasons are two signatures."""
    return Signature("crash", stage, normalize(crash_state(stderr, reason)))


def crash_state(stderr: str, reason: str) -> str:
    """`<first native error> [: <last words>] [in <frame> < <frame> < <frame>]`: an abort's
    last words (a failed `cf.assert`'s message: `crash.last_words`) when no error line says
    why, and the innermost named frames of the process's own native stack
    (`crash.report_native_crashes`), innermost first. As ClusterFuzz's crash state: the
    crash's type and its top frames."""
    from .crash import last_words, native_frames

    ending = first_native_error(stderr) or reason
    state = ending
    if ("Aborted" in ending or "SIGABRT" in ending) and (words := last_words(stderr)):
        state += f": {words}"
    frames = native_frames(stderr)
    if frames:
        state += " in " + " < ".join(frames)
    return state


# Where a diagnostic's own text names its op.
_NAMED_OP_PATTERNS = [
    re.compile(r"""(?:^|: )'([a-z_]+\.[\w.]+)': """),  # as `naming_op` writes it
    re.compile(r'torch\.operator"\([^)]*\) <\{name = "([\w.]+)"'),  # an op unknown to the torch dialect
    re.compile(r"""operation '([\w.]+)'"""),  # failed to legalize operation 'torch.aten.asin'
    re.compile(r"""'([a-z_]+\.[\w.]+)' op"""),  # 'tosa.reshape' op expected ...
]
# Where a note prints the op the diagnostic is attached to (MLIR's `printOpOnDiagnostic`).
_PRINTED_OP_PATTERNS = [
    re.compile(r"""see current operation:\s*(?:[%\w#:, ]+= )?"([\w.]+)"\("""),  # generic form
    re.compile(r"""see current operation:\s*(?:[%\w#:, ]+= )?([a-z_]+\.[\w.]+)"""),
]


def guilty_op(diagnostics: list[str] | str) -> str | None:
    """The op a diagnostic blames: the one it names, else the one its note prints."""
    text = diagnostics if isinstance(diagnostics, str) else "\n".join(diagnostics)
    for pattern in _NAMED_OP_PATTERNS + _PRINTED_OP_PATTERNS:
        match = pattern.search(text)
        if match:
            return match[1]
    return None


def naming_op(message: str, notes: list[str]) -> str:
    """A diagnostic's message that names its op: as it is when it names one, else led by
    the op its `see current operation` note prints (`'stablehlo.scatter': op was not
    bufferized`), so that its signature tells one op's failure from another's."""
    if any(pattern.search(message) for pattern in _NAMED_OP_PATTERNS):
        return message
    for pattern in _PRINTED_OP_PATTERNS:
        for note in notes:
            if match := pattern.search(note):
                return f"'{match[1]}': {message}"
    return message


def first_line(error: BaseException) -> str:
    """The first line of an exception's text (frontends quote it in StageErrors)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
