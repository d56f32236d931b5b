"""A hand check's material: ten bundles of a campaign at random, each shown (title, signature,
guilty op, record, reduced program), its repro.py rerun and its upstream command run.

    python benchmarks/bundle_check.py REPORTS_DIR [SEED]
"""

import json
import random
import subprocess
import sys
from pathlib import Path

root = Path(sys.argv[1])
bundles = sorted(
    {p.parent for p in root.glob("**/repro/*/*/case.json")}
    | {p.parent for p in root.glob("**/repro/*/*/types/case.json")}
)
print(f"{len(bundles)} bundles")
random.seed(int(sys.argv[2]) if len(sys.argv) > 2 else 64)
picked = random.sample(bundles, min(10, len(bundles)))
for b in picked:
    case = json.loads((b / "case.json").read_text())
    rec = json.loads((b / "bundle.json").read_text()) if (b / "bundle.json").exists() else {}
    print("=" * 100)
    print(b)
    print((b / "README.md").read_text().splitlines()[0])
    print("signature:", case.get("signature"), "| guilty:", case.get("guilty_op"), "| stage:", case.get("stage"))
    print("pipeline tail:", case.get("pipeline", [])[-3:])
    print({k: v for k, v in rec.items() if k not in ("upstream_output",)})
    text = (b / "repro.mlir").read_text().split("{-#")[0] if (b / "repro.mlir").exists() else ""
    print(text[:2500])
    done = subprocess.run([sys.executable, "-I", "repro.py"], cwd=b, capture_output=True, text=True, timeout=300)
    print("repro.py exit", done.returncode, "|", (done.stdout.strip().splitlines() or [""])[-1][:300])
    cmd = rec.get("upstream_command")
    if cmd:
        up = subprocess.run(cmd, shell=True, cwd=b, capture_output=True, text=True, timeout=300)
        print("upstream exit", up.returncode, "|", "\n".join(up.stderr.strip().splitlines()[:4])[:600])
