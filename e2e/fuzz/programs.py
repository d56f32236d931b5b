"""Generated programs as the campaign sees them: a test's seed, its program and its ops.

A campaign's triage reads each program back as its block ran it, from the block's
`programs.json` (`e2e.generate.register.save_programs`), and grows one from its seed only
where no block saved it: a seed names a program only for one version of the generator, and
a campaign may be triaged again (`--report-only`, a merge of shards) by a later one."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.generate.program import Program
from e2e.generate.register import PROGRAMS_FILE, seed_of

__all__ = ["CampaignPrograms", "seed_of"]


class CampaignPrograms:
    def __init__(self, saved: dict[int, str] | None = None):
        self.saved = saved or {}  # seed -> the program's JSON, as a block ran it
        self.grown: dict[int, Program] = {}

    @classmethod
    def load(cls, reports_dir: Path, run: dict | None = None) -> CampaignPrograms:
        """The programs saved by the blocks of the campaign in `reports_dir`, and by those of
        the runs it was merged from (`run.json`'s `merged_from`: a merge of shards)."""
        roots = [reports_dir]
        for source in (run or {}).get("merged_from", []):
            path = Path(source["path"])
            roots.append(path if path.is_dir() else path.parent)
        saved: dict[int, str] = {}
        for root in roots:
            for path in sorted(root.glob(f"batches/*/{PROGRAMS_FILE}")):
                try:
                    data = json.loads(path.read_text())
                    saved.update(zip((int(s) for s in data["seeds"]), data["programs"]))
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # unreadable: those seeds are grown again
        return cls(saved)

    def __call__(self, seed: int) -> Program:
        """The program of `seed`: as saved, else grown (`e2e.generate.grow.generate`)."""
        if seed not in self.grown:
            if seed in self.saved:
                self.grown[seed] = Program.from_json(self.saved[seed])
            else:
                from e2e.generate.grow import generate

                self.grown[seed] = generate(seed)
        return self.grown[seed]

    def of_test(self, test: str) -> Program | None:
        """The program of generated test `test` (`Gen_<seed>`), or None for another test."""
        seed = seed_of(test)
        return None if seed is None else self(seed)

    def ops_of(self, test: str) -> tuple[str, ...]:
        """The ops of generated test `test`'s program, by short aten name (`add`, `cumsum`)."""
        from e2e.fuzz.bugs import short_op

        program = self.of_test(test)
        if program is None:
            return ()
        return tuple(dict.fromkeys(short_op(op) or op for op in program.ops))
