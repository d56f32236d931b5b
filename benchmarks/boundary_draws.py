"""What boundary draws put in front of the ops that need them, over programs drawn at the
boundaries (`boundary_share=1.0`): the figures of benchmarks/RESULTS.md (2026-12-08).

    python benchmarks/boundary_draws.py --seed 11300000 --programs 600

- inputs still drawn at the boundaries after `grow.boundary_twin`'s replay, and the
  programs that fell back wholly to uniform draws;
- comparisons (`gt`, `lt`, `ge`, `le`) of two different values, and those whose operands
  tie in some element (what `aten.gt.Tensor` lowered as `ge` needs);
- nodes of an op that takes NaN (`OpSpec.takes_nan`) and those an operand of which holds one;
- nodes of an op with points (`OpSpec.points`: `round`, `sign`) and those an operand of
  which holds one of them.

Counts, not times: deterministic for a seed range at a commit.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e.framework.testutils import TestUtils, seed_for  # noqa: E402
from e2e.generate.boundary import BOUNDARY  # noqa: E402
from e2e.generate.grow import generate  # noqa: E402
from e2e.generate.ops import CATALOGUE  # noqa: E402

COMPARISONS = ("gt", "lt", "ge", "le")


def at_point(value: torch.Tensor, points: tuple[float, ...]) -> bool:
    """Whether some element is one of `points` (-0.0 and 0.0 alike: `sign` treats them so)."""
    if not value.is_floating_point():
        return False
    return any(bool((value == p).any()) for p in points)


def measure(first: int, count: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for seed in range(first, first + count):
        program = generate(seed, boundary_share=1.0)
        drawn = sum(i.values == BOUNDARY for i in program.inputs)
        counts["programs"] += 1
        counts["inputs"] += len(program.inputs)
        counts["inputs at the boundaries"] += drawn
        counts["programs wholly uniform"] += drawn == 0
        values = program.intermediates(program.make_inputs(TestUtils(seed_for(program.name))))
        for node in program.nodes:
            spec = CATALOGUE[node.op]
            operands = [values[name] for name in node.inputs]
            if node.op in COMPARISONS and len(set(node.inputs)) == 2:
                counts["comparisons of two values"] += 1
                counts["with a tie across the operands"] += bool((operands[0] == operands[1]).any())
            if spec.takes_nan:
                counts["nodes taking NaN"] += 1
                counts["meeting one"] += any(o.is_floating_point() and bool(o.isnan().any()) for o in operands)
            if spec.points:
                counts[f"{node.op} nodes"] += 1
                counts[f"{node.op} meeting a point"] += at_point(operands[0], spec.points)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=11300000, help="the first seed")
    parser.add_argument("--programs", type=int, default=600)
    args = parser.parse_args()
    counts = measure(args.seed, args.programs)
    rows = [("programs", ""), ("inputs", "inputs at the boundaries"), ("programs wholly uniform", "")]
    rows += [("comparisons of two values", "with a tie across the operands"), ("nodes taking NaN", "meeting one")]
    rows += [(f"{op} nodes", f"{op} meeting a point") for op in sorted(o for o, s in CATALOGUE.items() if s.points)]
    for total, part in rows:
        print(f"{total}: {counts[total]}" + (f", {part}: {counts[part]}" if part else ""))


if __name__ == "__main__":
    main()
