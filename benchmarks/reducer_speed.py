"""Reducer yield, bundle size, blame and speed: on a suite run, and on broken compilers.

    python -m pytest e2e -n 2 --runxfail --reduce-xfailed -q     # bundles for every failing pair
    python benchmarks/reducer_speed.py reports/results.json        # what the reducer made of them
    python benchmarks/reducer_speed.py --broken                    # compilers broken on purpose

A suite run reads the `reducer:` note of every failing pair: the share with a verified
bundle (own or shared), ops per bundle, reduction time per distinct bundle, why the
others have none. Broken compilers (`tests/broken_compilers.py`: one lowering rewritten
at torch-backend or linalg level to fail, crash or compute wrong values) know which op
is guilty, so they also measure whether the bundle blames it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the checkout


def suite(path: str) -> None:
    rows = json.loads(Path(path).read_text())
    failing = [
        r
        for r in rows
        if r.get("outcome") not in ("pass", "skip", "error") and r.get("final") not in ("passed", "xpassed", "skipped")
    ]
    notes = {}
    for row in failing:
        notes[(row["test"], row["config"])] = next((n for n in row.get("notes", []) if n.startswith("reducer:")), None)
    fields = {k: dict(re.findall(r"(\w+)=(\S+)", n)) for k, n in notes.items() if n and "bundle=" in n}
    verified = {k: f for k, f in fields.items() if f.get("verified") == "True"}
    own = [f for f in fields.values() if f.get("shared") == "False"]
    sizes = [int(f["ops_after"]) for f in own]
    times = [float(f["seconds"]) for f in own]
    share = 100 * len(verified) / max(len(failing), 1)
    print(f"failing pairs: {len(failing)}")
    print(
        f"with a verified bundle: {len(verified)} ({share:.1f}%); {len(own)} distinct bundles, "
        f"{len(fields) - len(own)} pairs share one; {len(fields) - len(verified)} bundles did not re-verify"
    )
    if sizes:
        print(
            f"ops per distinct bundle: median {statistics.median(sizes)}, max {max(sizes)} "
            f"(FX nodes for capture/import bundles)"
        )
        print(
            f"time per distinct bundle (reduction + re-verification): median {statistics.median(times):.1f} s, max {max(times):.1f} s"
        )
        reduce_only = [float(f["seconds"]) - float(f["verify_seconds"]) for f in own if "verify_seconds" in f]
        if reduce_only:
            print(f"reduction alone: median {statistics.median(reduce_only):.1f} s, max {max(reduce_only):.1f} s")
        stops = Counter(f.get("stopped", "-") for f in own)
        print("stopped: " + ", ".join(f"{k} {v}" for k, v in stops.most_common()))
    by_stage = Counter(r.get("stage") for r in failing if (r["test"], r["config"]) in verified)
    all_stage = Counter(r.get("stage") for r in failing)
    print("verified / failing, by stage: " + ", ".join(f"{s} {by_stage[s]}/{n}" for s, n in all_stage.most_common()))
    missing = [(k, notes[k]) for k in notes if k not in verified]
    if missing:
        print(f"\nwithout a verified bundle ({len(missing)}):")
        for (test, config), note in sorted(missing):
            print(f"  {test} [{config}]: {(note or 'no reducer note').removeprefix('reducer: ')[:220]}")


# (broken compiler, module) pairs whose output the broken compiler changes. Not here:
# subf_to_addf on MLP (softmax's `x - max` becomes `x + max`, and softmax does not
# care: the output is right) and mulf_to_addf on MLP (no arith.mulf left to break).
CASES = [
    ("reject_exp", "Mixed"),
    ("abort_on_tanh", "Mixed"),
    ("mulf_to_addf", "Mixed"),
    ("subf_to_addf", "Mixed"),
    ("divf_to_mulf", "MLP"),
    ("reject_aten_tanh", "Mixed"),
    ("abort_on_aten_mm", "MLP"),
    ("aten_sub_to_add", "Mixed"),
]


def _modules():
    import torch

    class Mixed(torch.nn.Module):
        def forward(self, x, y):
            a = torch.exp(x) + y
            b = torch.tanh(a) * y
            return torch.relu(b - x) + a

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.a, self.b = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

        def forward(self, x):
            return torch.softmax(self.b(torch.relu(self.a(x))), -1)

    torch.manual_seed(1)
    return {"Mixed": (Mixed(), [torch.rand(3, 4), torch.rand(3, 4)]), "MLP": (MLP(), [torch.rand(2, 4)])}


def _reduce_one(broken, module, inputs, reports_dir: Path, time_box: float):
    from compiler.executors.refbackend import BOUNDARY_AS_BITS
    from compiler.frontends.fx import fx_to_torch_backend_ir
    from e2e.configs import load_config
    from e2e.reducer.failure import reduce_mismatch, reduce_mlir
    from e2e.reducer.localize import stage_pipelines

    chain = stage_pipelines(load_config("linalg"))["backend"]
    entry = f"python:tests.broken_compilers:{broken.name}"
    at = 0 if broken.level == "torch" else chain.index(BOUNDARY_AS_BITS)
    pipeline = [*chain[:at], entry, *chain[at:]]
    common = dict(test=type(module).__name__, config=broken.name, reports_dir=reports_dir, time_box=time_box)
    if broken.kind == "mismatch":
        return reduce_mismatch(module, inputs, pipeline, **common)
    torch_ir, _ = fx_to_torch_backend_ir(module, inputs)
    return reduce_mlir(torch_ir, pipeline, "backend", crash=broken.kind == "crash", **common)


def broken_compilers(time_box: float) -> None:
    from e2e.framework import isolation
    from tests.broken_compilers import BROKEN

    by_name = {b.name: b for b in BROKEN}
    modules = _modules()
    rows = []
    print(f"{'broken compiler':18} {'level':6} {'kind':8} {'module':6} bundle verified ops   s     guilty op (right?)")
    with tempfile.TemporaryDirectory(prefix="reducer-bench-") as scratch:
        for name, module_name in CASES:
            broken = by_name[name]
            module, inputs = modules[module_name]
            start = time.monotonic()
            outcome = isolation.run_forked(
                lambda: _reduce_one(broken, module, inputs, Path(scratch) / name, time_box), time_box + 150
            )
            seconds = time.monotonic() - start - getattr(outcome, "verify_seconds", 0.0)
            ok = hasattr(outcome, "bundle")
            caught = ok and (outcome.bundle is not None)
            guilty = outcome.guilty_op if ok else None
            right = bool(guilty) and guilty in broken.guilty
            rows.append(
                dict(
                    caught=caught,
                    verified=ok and outcome.verified,
                    ops=outcome.ops_after if caught else None,
                    right=right,
                    seconds=seconds,
                )
            )
            ops = f"{outcome.ops_before}->{outcome.ops_after}" if caught else "-"
            detail = guilty if ok else repr(outcome)[:80]
            print(
                f"{name:18} {broken.level:6} {broken.kind:8} {module_name:6} {str(caught):6} "
                f"{str(ok and outcome.verified):8} {ops:5} {seconds:5.1f} {detail} ({'yes' if right else 'NO'})"
                + ("" if caught or not ok else f"  [{outcome.note[:100]}]")
            )
    n = len(rows)
    caught = [r for r in rows if r["caught"]]
    print(
        f"\ncaught (a bundle written): {len(caught)}/{n}; bundled and re-verified: {sum(r['verified'] for r in rows)}/{n}; "
        f"guilty op named right: {sum(r['right'] for r in rows)}/{n}"
    )
    if caught:
        print(
            f"ops per bundle: median {statistics.median(r['ops'] for r in caught)}, max {max(r['ops'] for r in caught)}; "
            f"time per reduction (without re-verification): median {statistics.median(r['seconds'] for r in rows):.1f} s, "
            f"max {max(r['seconds'] for r in rows):.1f} s"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="?", help="reports/results.json of a suite run")
    parser.add_argument("--broken", action="store_true", help="reduce failures of deliberately broken compilers")
    parser.add_argument("--time-box", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.results:
        suite(args.results)
    if args.broken:
        broken_compilers(args.time_box)
    if not args.results and not args.broken:
        parser.error("give reports/results.json and/or --broken")


if __name__ == "__main__":
    main()
