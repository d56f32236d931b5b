"""Which ops a config takes alone: the op run alone on the spot, else the support matrix.

A refusal (`e2e.fuzz.bugs.rejects`) of a generated program's op is a coverage gap when the
config refuses that op alone, with the same operand types and attributes: the failing
program's nodes, each alone with its operands made inputs (`e2e.fuzz.shrink.alone`), the
refused op's first, are run on the config by the suite's runner until one fails as the
program did (a gap) or none does (a bug: the combination is refused); signatures are cached
per (config, op, attributes, types) in a JSON file. Without a program to run, the op
support matrix answers, read as data (`docs/support.json`, written beside `docs/support.md`
by `python -m e2e.tools.support`; OpInfo op names; a cell's status is `pass`, `partial` or
`fail`): `pass` is taken, anything else is not: a campaign reports only what is surely a bug.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from e2e.framework.signature import Signature
from e2e.fuzz.bugs import Failure, named_op, short_op

MATRIX = Path(__file__).resolve().parents[2] / "docs" / "support.json"


def read_matrix(path: Path = MATRIX) -> dict[str, dict[str, str]]:
    """op -> config -> status ("pass", "partial", "fail"), from the matrix's data
    (`e2e.tools.support.statuses`); {} without one."""
    try:
        return json.loads(path.read_text())["ops"]
    except (OSError, ValueError, KeyError):
        return {}


def same_refusal(signature: Signature | None, failure: Failure) -> bool:
    """Whether a one-op program's failure is the refusal `failure` shows: the same stage and
    pass, refusing the same op (shapes in the message may differ: `?` alone, `N` in the program)."""
    if signature is None:
        return False
    if signature.key() != failure.signature.key():
        return False
    return short_op(named_op(signature)) == short_op(failure.guilty_op)


@dataclass
class Support:
    """`untaken(failure)`: the op of a refusal the config does not take alone, or None."""

    program_of: Callable[[str], object]  # a generated test's Program
    check: Callable[[object, str], Signature | None] | None = None  # (one-op program, config) -> its signature
    matrix: dict[str, dict[str, str]] = field(default_factory=read_matrix)
    cache_path: Path | None = None
    checked: dict[str, Signature | None] = field(default_factory=dict)  # "config op attrs types" -> signature
    deadline: float = float("inf")  # time.monotonic() after which nothing more is run
    answers: dict[tuple, str | None] = field(default_factory=dict)  # Failure.key -> untaken op

    def __post_init__(self) -> None:
        if self.cache_path is not None and self.cache_path.is_file():
            read = json.loads(self.cache_path.read_text())
            self.checked.update({key: Signature.parse(text) if text else None for key, text in read.items()})

    def cell(self, config: str, op: str) -> str | None:
        for name in (op, f"nn.functional.{op}", op.rstrip("_")):
            cell = self.matrix.get(name, {}).get(config)
            if cell:
                return cell
        return None

    def untaken(self, failure: Failure) -> str | None:
        """The op the config refuses alone, as this failure refuses it (a gap), or None (a
        bug); one answer per (config, signature, guilty op): one refusal, one check."""
        key = failure.key
        if key not in self.answers:
            self.answers[key] = self._untaken(failure)
        return self.answers[key]

    def _untaken(self, failure: Failure) -> str | None:
        op = short_op(failure.guilty_op) or "(op not named)"
        program = self.program_of(failure.test)
        if program is None or self.check is None:
            return None if self.cell(failure.config, op) == "pass" else op
        # The node of the refused op first; a decomposed op (conv1d -> convolution) is found
        # by running each node alone until one is refused the same way.
        order = sorted(range(len(program.nodes)), key=lambda i: program.nodes[i].op != op)
        for index in order:
            if time.monotonic() > self.deadline:  # out of time: the matrix answers, conservatively
                return None if self.cell(failure.config, op) == "pass" else op
            if same_refusal(self.alone_signature(program, index, failure.config), failure):
                return op
        return None

    def alone_signature(self, program, index: int, config: str) -> Signature | None:
        """The signature of node `index` alone on `config` (None: it passes), cached."""
        from e2e.fuzz.shrink import alone

        one = alone(program, index)
        node = program.nodes[index]
        key = f"{config} {node.op} {dict(node.attrs)} {','.join(str(i.type) for i in one.inputs)}"
        if key not in self.checked:
            self.checked[key] = self.check(one, config)
            if self.cache_path is not None:
                self.cache_path.parent.mkdir(parents=True, exist_ok=True)
                texts = {key: signature and signature.format() for key, signature in self.checked.items()}
                self.cache_path.write_text(json.dumps(texts, indent=1, sort_keys=True) + "\n")
        return self.checked[key]
