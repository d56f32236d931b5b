"""`compare_tensors` on one large fp16 output, by chunk size: a failing, an equal and a
close-but-unequal comparison, one thread (as in a test host).

    python benchmarks/compare_large.py [--elements 67108864] [--chunks 22,20,18,16]

The tensors are seeded, so each chunk size compares the same values and must print the
same mismatch; a chunk size whose mismatch text differs from the first one's is reported
and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import compiler.replay_runtime.compare as compare  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--chunks", default="22,20,18,16", help="chunk sizes as powers of two")
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    shape = (1, 32, args.elements // 32)
    golden = torch.rand(shape, generator=generator).to(torch.float16)
    noise = 1 + 1e-3 * torch.randn(shape, generator=generator)
    failing = (golden.float() * noise).to(torch.float16)  # a few in ten elements beyond rtol 1e-3
    close = (golden.float() + 1e-6).to(torch.float16)
    tolerance = compare.Tolerance(rtol=1e-3, atol=1e-7)  # AtenInstanceNormModuleFp16_basic's
    cases = {"failing": failing, "equal": golden.clone(), "close": close}
    texts: dict[str, str] = {}
    status = 0
    print(f"{args.elements} fp16 elements, one thread; seconds per comparison")
    print(f"{'chunk':>10} " + " ".join(f"{name:>8}" for name in cases))
    for power in (int(p) for p in args.chunks.split(",")):
        compare.CHUNK = 1 << power
        seconds = []
        for name, actual in cases.items():
            start = time.perf_counter()
            text = str(compare.compare_tensors(golden, actual, "output", tolerance))
            seconds.append(time.perf_counter() - start)
            if texts.setdefault(name, text) != text:
                print(f"  chunk 2^{power}, {name}: a different mismatch:\n    {text}\n    {texts[name]}")
                status = 1
        print(f"{'2^' + str(power):>10} " + " ".join(f"{s:8.2f}" for s in seconds))
    print(f"failing: {texts['failing'][:160]}")
    sys.exit(status)


if __name__ == "__main__":
    main()
