"""TOSA on the TOSA reference model (`tosa-tools`, Arm's reference implementation of the spec).

`tosa-opt --tosa-serialize` writes the TOSA flatbuffer, `tosa_reference_model` runs it
on .npy inputs. Both are binaries of the PyPI wheel `tosa-tools`, which must stay out of
this project's environment (it pins numpy<2.2 and installs top-level packages such as
`tests`): `python -m compiler.executors.tosa_ref --install` extracts its binaries into a
cache directory, and they run as subprocesses. `E2E_TOSA_TOOLS` names another directory.

Workarounds a TOSA user would apply too: tensor `arith.constant`s (which `tosa-opt`,
knowing only builtin, func and tosa, cannot serialize) become `tosa.const`; every result
goes through a `tosa.identity` (the serializer names a graph output `TosaOutput_<i>` only
when an operator produces it, not a constant or an input); inputs are cast to the graph's
own element types (f64 is serialized as FP32: TOSA has no f64). The reference model runs
from a JSON test descriptor (it refuses a graph without inputs given on the command
line). It takes static shapes only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from compiler.executors import RuntimeExecutor, outputs_as, to_numpy
from compiler.refbackend import ResultType, argument_types
from compiler.stages import Snapshots, StageError, module_text

VERSION = "2026.8.0"
TOOLS = ("tosa-opt", "tosa_reference_model", "tosa.fbs")
INSTALL = f"python -m compiler.executors.tosa_ref --install   (tosa-tools=={VERSION}, kept out of the Python env)"

NUMPY_OF_ELEMENT = {
    "f32": np.float32,
    "f16": np.float16,
    "f64": np.float32,
    "i1": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "ui8": np.uint8,
}


def tools_dir() -> Path:
    if "E2E_TOSA_TOOLS" in os.environ:
        return Path(os.environ["E2E_TOSA_TOOLS"])
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "e2e-conformance" / f"tosa-tools-{VERSION}" / "bin"


def install(target: Path | None = None) -> Path:
    """Download the tosa-tools wheel (no dependencies) and extract its binaries."""
    target = target or tools_dir()
    with tempfile.TemporaryDirectory() as download:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"tosa-tools=={VERSION}", "-d", download],
            check=True,
        )
        (wheel,) = Path(download).glob("tosa_tools-*.whl")
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive:
            for tool in TOOLS:
                (target / tool).write_bytes(archive.read(f"bin/{tool}"))
                (target / tool).chmod(0o755)
    return target


# A tensor constant of another dialect, as tosa-opt cannot serialize it.
_ARITH_TENSOR_CONSTANT = re.compile(r"= arith\.constant (dense(?:_resource)?<.*?> : (tensor<[^>]*>))")


def serializable(tosa_text: str) -> str:
    """TOSA text `tosa-opt` can serialize: tensor arith.constants become tosa.const."""
    return _ARITH_TENSOR_CONSTANT.sub(lambda m: f'= "tosa.const"() <{{values = {m[1]}}}> : () -> {m[2]}', tosa_text)


# The reference model's lines that say why it refused or failed, before its generic ERROR lines.
_REASON = re.compile(r"could not allocate op|^Op\w+: |type mismatch|Cannot open|Unable to find|not supported", re.I)


def identity_outputs(module) -> None:
    """Make an operator produce every result of @main (`tosa.identity`), in place."""
    from torch_mlir import ir

    with module.context, ir.Location.unknown():
        for op in module.body.operations:
            if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
                block = op.regions[0].blocks[0]
                terminator = block.operations[len(block.operations) - 1]
                for i, value in enumerate(terminator.operands):
                    with ir.InsertionPoint(terminator):
                        identity = ir.Operation.create("tosa.identity", results=[value.type], operands=[value])
                    terminator.operands[i] = identity.result


def _run(command: list[str], stage: str, what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip()
        lines = [line for line in output.splitlines() if line.strip()]
        first = next((line for line in lines if "error" in line.lower() or "assert" in line.lower()), None)
        first = first or (lines[-1] if lines else "")
        raise StageError(stage, f"{what} failed (exit {done.returncode}): {first.strip()}", diagnostics=lines[-30:])


@dataclass
class TosaReferenceModel(RuntimeExecutor):
    input: str = "tosa"
    name: str = "tosa-ref"
    title: str = "the TOSA reference model"  # how reports name it
    accepts: tuple[str, ...] = ("tosa",)
    static_only: bool = True

    def missing(self) -> str | None:
        return None if all((tools_dir() / tool).exists() for tool in TOOLS) else INSTALL

    def compile(self, backend_module, result_dtypes: Sequence[ResultType], snapshots: Snapshots) -> "TosaProgram":
        snapshots.record("lower", backend_module)
        arguments = argument_types(backend_module)
        if arguments is None or any(a is None or None in a.dims for a in arguments):
            raise StageError("lower", "the TOSA reference model takes static tensor arguments only")
        identity_outputs(backend_module)
        workdir = Path(tempfile.mkdtemp(prefix="e2e-tosa-"))
        try:
            (workdir / "program.mlir").write_text(serializable(module_text(backend_module)))
            tools = tools_dir()
            _run(
                [
                    str(tools / "tosa-opt"),
                    str(workdir / "program.mlir"),
                    "--tosa-serialize",
                    f"--tosa-flatbuffer-filename={workdir / 'program.tosa'}",
                    "-o",
                    os.devnull,
                ],
                "lower",
                "tosa-opt --tosa-serialize",
            )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return TosaProgram(workdir, [NUMPY_OF_ELEMENT.get(a.element) for a in arguments], list(result_dtypes))


class TosaProgram:
    def __init__(self, workdir: Path, input_types: list, result_dtypes: list[ResultType]):
        self.workdir, self.input_types, self.result_dtypes = workdir, input_types, result_dtypes

    def command(self, inputs: Sequence[str], outputs: Sequence[str]) -> list[str]:
        """The reference model's command line in its working directory, where it writes desc.json."""
        descriptor = {
            "tosa_file": "program.tosa",
            "ifm_name": [f"TosaInput_{i}" for i in range(len(inputs))],
            "ifm_file": list(inputs),
            "ofm_name": [f"TosaOutput_{i}" for i in range(len(outputs))],
            "ofm_file": list(outputs),
        }
        (self.workdir / "desc.json").write_text(json.dumps(descriptor))
        tools = tools_dir()
        return [
            str(tools / "tosa_reference_model"),
            "--test_desc",
            "desc.json",
            "--operator_fbs",
            str(tools / "tosa.fbs"),
        ]

    def __call__(self, *tensors: torch.Tensor) -> list:
        if len(tensors) != len(self.input_types):
            raise StageError("execute", f"the program takes {len(self.input_types)} tensors, {len(tensors)} were given")
        inputs = []
        for i, (tensor, numpy_type) in enumerate(zip(tensors, self.input_types)):
            array = to_numpy(tensor)
            if numpy_type is not None and array.dtype != numpy_type:
                array = array.astype(numpy_type)  # the graph's own element type (e.g. i64 -> i32)
            np.save(self.workdir / f"input_{i}.npy", array)
            inputs.append(f"input_{i}.npy")
        outputs = [f"output_{i}.npy" for i in range(len(self.result_dtypes))]
        for name in outputs:
            (self.workdir / name).unlink(missing_ok=True)
        done = subprocess.run(self.command(inputs, outputs), cwd=self.workdir, capture_output=True, text=True)
        if done.returncode != 0 or not all((self.workdir / name).exists() for name in outputs):
            lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
            first = next((line for line in lines if _REASON.search(line)), None) or next(
                (line for line in lines if "ERROR" in line or "error" in line or "assert" in line.lower()),
                lines[-1] if lines else "no output",
            )
            first = re.sub(r"^.*?(OpFactory could not allocate op.*?\)(?: -> \([^)]*\))?).*$", r"\1", first)
            first = re.sub(r"\s+", " ", first)
            raise StageError(
                "execute",
                f"tosa_reference_model failed (exit {done.returncode}): {first.strip()}",
                diagnostics=lines[-30:],
            )
        arrays = [np.load(self.workdir / name) for name in outputs]
        return outputs_as(arrays, self.result_dtypes, "tosa_reference_model")

    def write_native(self, directory: Path, tensors: Sequence[torch.Tensor]) -> str:
        """program.mlir, program.tosa and input_<i>.npy in `directory`; returns the commands."""
        for name in ("program.mlir", "program.tosa"):
            shutil.copy(self.workdir / name, directory / name)
        inputs = []
        for i, (tensor, numpy_type) in enumerate(zip(tensors, self.input_types)):
            array = to_numpy(tensor)
            np.save(directory / f"input_{i}.npy", array if numpy_type is None else array.astype(numpy_type))
            inputs.append(f"input_{i}.npy")
        tools = tools_dir()
        serialize = (
            f"{tools / 'tosa-opt'} program.mlir --tosa-serialize --tosa-flatbuffer-filename=program.tosa -o /dev/null"
        )
        outputs = [f"output_{i}.npy" for i in range(len(self.result_dtypes))]
        run = " ".join(self.command(inputs, outputs))
        shutil.copy(self.workdir / "desc.json", directory / "desc.json")
        return serialize + "\n" + run

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--install", action="store_true", help=f"extract tosa-tools=={VERSION}'s binaries into {tools_dir()}"
    )
    args = parser.parse_args(argv)
    if args.install:
        print(f"tosa-tools {VERSION} binaries in {install()}")
    else:
        print(TosaReferenceModel().missing() or f"installed in {tools_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
