"""Run upstream torch-mlir's own e2e framework on its own test_suite, test by test.

    python benchmarks/upstream_framework.py PATH_TO_TEST_SUITE_DIR [--configs linalg,tosa,stablehlo,onnx]
        [-j 2] [-k REGEX] [--timeout 60] [--out upstream-framework.json]

The reference `benchmarks/upstream_suite.py --upstream-results FILE` compares with: what
upstream's framework itself decides on this machine and wheel, where its xfail sets
describe upstream's CI (another torch, another build). It imports upstream's
`torch_mlir_e2e_test` from the checkout the suite lives in (`<suite>/../..`), never from
this project, and calls its `compile_and_run_test` and `SingleTestReport` per test with
the FxImporterTestConfig of each config, as upstream's `main.py --config fx_importer*`
does, or its OnnxBackendTestConfig for `onnx` (`main.py --config onnx`): one process per
config, no multiprocessing.

Each worker process runs tests one by one and prints a JSON line per test; a worker that
dies takes only the test it had started (reported `crash`), a test past `--timeout` is
killed (`timeout`), and a new worker takes the rest. Output: {config: {test: {"outcome":
"pass" | "fail" | "crash" | "timeout", "error": first line}}}, plus the wall time.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

# config -> (upstream's backend class, its module, upstream's TestConfig (module.class
# under configs/), the output type it passes), as upstream's main.py builds each config.
FX = "fx_importer_backend.FxImporterTestConfig"
CONFIGS = {
    "linalg": ("RefBackendLinalgOnTensorsBackend", "linalg_on_tensors_backends.refbackend", FX, None),
    "tosa": ("LinalgOnTensorsTosaBackend", "tosa_backends.linalg_on_tensors", FX, "tosa"),
    "stablehlo": ("LinalgOnTensorsStablehloBackend", "stablehlo_backends.linalg_on_tensors", FX, "stablehlo"),
    "onnx": (
        "RefBackendLinalgOnTensorsBackend",
        "linalg_on_tensors_backends.refbackend",
        "onnx_backend.OnnxBackendTestConfig",
        None,
    ),
}


# --- the worker: runs inside upstream's framework ------------------------------------


def _install_multiprocess_stand_in() -> None:
    """upstream's framework imports `multiprocess` for `run_tests`, which is not called here."""
    try:
        import multiprocess  # noqa: F401
    except ImportError:
        import types

        stand_in = types.ModuleType("multiprocess")
        stand_in.set_start_method = lambda *args, **kwargs: None
        stand_in.cpu_count = lambda: 1
        sys.modules["multiprocess"] = stand_in


def worker(python_root: Path, config_name: str | None) -> None:
    """Run the tests named on stdin through `config_name`; without one, list the registered tests."""
    sys.path.insert(0, str(python_root))
    _install_multiprocess_stand_in()
    import importlib

    import torch

    package = importlib.import_module("torch_mlir_e2e_test")
    if not str(Path(package.__file__).resolve()).startswith(str(python_root.resolve())):
        raise SystemExit(f"torch_mlir_e2e_test resolved to {package.__file__}, not upstream's under {python_root}")
    # configs/__init__.py imports every config, LTC's too, whose reference backend the pip
    # wheel does not ship: take the package without running it.
    import types

    configs = types.ModuleType("torch_mlir_e2e_test.configs")
    configs.__path__ = [str(python_root / "torch_mlir_e2e_test" / "configs")]
    sys.modules["torch_mlir_e2e_test.configs"] = configs
    from torch_mlir_e2e_test.framework import compile_and_run_test
    from torch_mlir_e2e_test.registry import GLOBAL_TEST_REGISTRY
    from torch_mlir_e2e_test.reporting import ErrorContext, SingleTestReport

    suite = python_root / "torch_mlir_e2e_test" / "test_suite"
    for path in sorted(suite.glob("*.py")):
        if path.stem != "__init__":
            try:
                importlib.import_module(f"torch_mlir_e2e_test.test_suite.{path.stem}")
            except Exception as error:  # torchvision, the custom-op extension
                print(
                    json.dumps({"unimported": path.name, "error": f"{type(error).__name__}: {error}"[:200]}), flush=True
                )
    if config_name is None:
        print(json.dumps({"registered": sorted(test.unique_name for test in GLOBAL_TEST_REGISTRY)}), flush=True)
        return
    class_name, module, test_config, output_type = CONFIGS[config_name]
    backend = getattr(importlib.import_module(f"torch_mlir_e2e_test.{module}"), class_name)()
    config_module, config_class = test_config.rsplit(".", 1)
    TestConfig = getattr(importlib.import_module(f"torch_mlir_e2e_test.configs.{config_module}"), config_class)
    config = TestConfig(backend, output_type) if output_type else TestConfig(backend)
    tests = {test.unique_name: test for test in GLOBAL_TEST_REGISTRY}
    torch.autograd.set_grad_enabled(False)  # as upstream's main.py
    for line in sys.stdin:
        name = line.strip()
        if name not in tests:
            print(json.dumps({"test": name, "outcome": "missing", "error": "not registered"}), flush=True)
            continue
        print(json.dumps({"start": name}), flush=True)
        result = compile_and_run_test(tests[name], config)
        report = SingleTestReport(result, ErrorContext.empty())
        error = ""
        if report.failed:
            text = (result.compilation_error or result.runtime_error or report.error_str() or "").strip()
            error = first_error_line(text)
        print(json.dumps({"test": name, "outcome": "fail" if report.failed else "pass", "error": error}), flush=True)


_BOILERPLATE = ("TORCHDYNAMO_VERBOSE", "-mlir-print-ir-after-all", "Traceback", 'File "', "^")


def first_error_line(text: str) -> str:
    """The line that says what went wrong: the last exception line, not the hints after it."""
    lines = [l.strip() for l in text.splitlines() if l.strip() and not any(b in l for b in _BOILERPLATE)]
    errors = [l for l in lines if re.match(r"[\w.]*(Error|Exception)\b|.*error:", l)]
    return (errors or lines or ["mismatch"])[-1][:300]


# --- the driver ------------------------------------------------------------------------


def test_names(python_root: Path) -> tuple[list[str], dict[str, str]]:
    """The tests upstream's registry holds once every file is imported, and the files that did not import."""
    command = [sys.executable, __file__, "--list", "--python-root", str(python_root)]
    listing = subprocess.run(command, capture_output=True, text=True, check=True)
    messages = [json.loads(line) for line in listing.stdout.splitlines() if line.startswith("{")]
    unimported = {m["unimported"]: m["error"] for m in messages if "unimported" in m}
    return next(m["registered"] for m in messages if "registered" in m), unimported


class Driver:
    def __init__(self, python_root: Path, config: str, names: list[str], timeout: float):
        self.python_root, self.config, self.timeout = python_root, config, timeout
        self.todo = list(names)
        self.results: dict[str, dict] = {}

    def run(self) -> None:
        while self.todo:
            self._one_worker()

    def _one_worker(self) -> None:
        command = [sys.executable, __file__, "--worker", self.config, "--python-root", str(self.python_root)]
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1
        )
        process.stdin.write("".join(f"{name}\n" for name in self.todo))
        process.stdin.close()
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in process.stdout] + [lines.put(None)], daemon=True).start()
        stderr: list[str] = []
        threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True).start()
        started, started_at = None, time.monotonic()
        while True:
            try:
                line = lines.get(timeout=5)
            except queue.Empty:
                if started and time.monotonic() - started_at > self.timeout:
                    process.kill()
                    self._finish(started, "timeout", f"no result after {self.timeout:.0f} s (killed)")
                    return
                continue
            if line is None:
                break
            try:
                message = json.loads(line)
            except ValueError:  # what upstream's code prints (the ONNX exporter's progress)
                continue
            if not isinstance(message, dict) or "unimported" in message:
                continue
            if "start" in message:
                started, started_at = message["start"], time.monotonic()
            else:
                self._finish(message["test"], message["outcome"], message["error"])
                started = None
        code = process.wait()
        if started is not None:  # the worker died inside this test
            tail = [l.strip() for l in stderr if l.strip()]
            self._finish(started, "crash", f"exit {code}: {tail[-1][:300] if tail else ''}")
        elif self.todo:
            raise SystemExit(f"[{self.config}] the worker exited {code} before any test: {''.join(stderr)[-2000:]}")

    def _finish(self, name: str, outcome: str, error: str) -> None:
        self.results[name] = {"outcome": outcome, "error": error}
        self.todo.remove(name)
        done = len(self.results)
        if done % 200 == 0 or outcome in ("crash", "timeout"):
            print(f"[{self.config}] {done} done; {name}: {outcome} {error[:100]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suite_dir", type=Path, nargs="?")
    parser.add_argument("--configs", default="linalg,tosa,stablehlo")
    parser.add_argument("-j", type=int, default=2, help="worker processes at once (default 2)")
    parser.add_argument("-k", default="", help="only tests whose name matches this regex")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    parser.add_argument("--out", type=Path, default=Path("upstream-framework.json"))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--python-root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker or args.list:
        return worker(args.python_root, args.worker)
    suite = args.suite_dir.resolve()
    python_root = suite.parent.parent
    registered, unimported = test_names(python_root)
    names = [n for n in registered if re.search(args.k, n)]
    configs = [c for c in args.configs.split(",") if c]
    # Each config's tests in `j` slices, run `j` at a time.
    drivers = [Driver(python_root, c, names[i :: args.j], args.timeout) for c in configs for i in range(args.j)]
    start = time.monotonic()
    pending = list(drivers)
    running: list[threading.Thread] = []
    while pending or running:
        running = [t for t in running if t.is_alive()]
        while pending and len(running) < args.j:
            thread = threading.Thread(target=pending.pop(0).run)
            thread.start()
            running.append(thread)
        time.sleep(0.5)
    results: dict[str, dict] = {c: {} for c in configs}
    for driver in drivers:
        results[driver.config].update(driver.results)
    wall = time.monotonic() - start
    args.out.write_text(json.dumps({"wall": wall, "unimported": unimported, "results": results}, indent=1))
    print(f"wall {wall:.0f} s; files not imported: {', '.join(sorted(unimported)) or 'none'}")
    for config in configs:
        outcomes: dict[str, int] = {}
        for row in results[config].values():
            outcomes[row["outcome"]] = outcomes.get(row["outcome"], 0) + 1
        print(f"{config}: {len(results[config])} tests: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
