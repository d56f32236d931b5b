"""Failure signatures: what makes two failures the same bug.

A signature is `stage | pass or op | normalized first error line` for compile-time
failures and crashes, or `compare | <mismatch kind>` for wrong results. Normalizing
strips what changes between two occurrences of one bug: locations, file paths, SSA
value names, addresses, and concrete sizes in shapes.
"""

from __future__ import annotations

import re

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


def stage_signature(stage: str, message: str, failing_pass: str | None = None) -> str:
    return f"{stage} | {pass_name(failing_pass)} | {normalize(message)}"


def mismatch_signature(kind: str) -> str:
    return f"compare | {kind}"


def first_native_error(stderr: str) -> str | None:
    """The first line of a crashed process's stderr that says what went wrong."""
    for line in stderr.splitlines():
        if any(word in line for word in ("Assertion", "error:", "LLVM ERROR", "Segmentation", "Aborted")):
            return line.strip()
    return None


def crash_signature(stage: str, stderr: str, reason: str) -> str:
    """As the runner writes it for a pair whose process died in `stage`."""
    return f"crash | {stage} | {normalize(first_native_error(stderr) or reason)}"
