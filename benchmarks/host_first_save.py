"""What a test host pays for its first capture's `torch.export.save` (the frontend cache
pickles every capture it keeps), forked from a parent that did or did not run
`compiler.frontends.fx.warm_up_capture` (which now saves its own capture once).

    python benchmarks/host_first_save.py [--runs 5]

Each run is a fresh parent: the FX capture's imports and one capture either way, then
`warm_up_capture` or not, then a fork whose child captures a small module and pickles it.
Prints the child's CPU seconds for that first pickling, median of the runs, per parent.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import os, pickle, sys, time, torch
from compiler.frontends import fx

class Small(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x.tanh() * 2, dim=-1).sum(0)

fx.warm_up_capture_imports()
fx.fx_capture(fx.WarmUpModule(), [torch.rand(3, 3)], [[-1, 3]])
if sys.argv[1] == "warmed":
    fx.warm_up_capture()
read, write = os.pipe()
if os.fork() == 0:
    captured = fx.fx_capture(Small(), [torch.rand(4, 16)], [[-1, 16]])
    start = time.process_time()
    pickle.dumps(captured)
    os.write(write, f"{time.process_time() - start}".encode())
    os._exit(0)
os.close(write)
print(os.read(read, 64).decode())
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    seconds: dict[str, list[float]] = {"not warmed": [], "warmed": []}
    for _ in range(args.runs):
        for parent in seconds:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, parent], cwd=ROOT, capture_output=True, text=True, check=True
            )
            seconds[parent].append(float(done.stdout.strip().splitlines()[-1]))
    for parent, values in seconds.items():
        print(
            f"{parent:>11}: the host's first save {statistics.median(values) * 1000:.1f} ms CPU (median of {args.runs})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
