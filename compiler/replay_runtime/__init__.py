"""The replay runtime: what a reproducer bundle needs to replay, and what the suite itself runs.

Parse a module, run a pipeline (MLIR passes and Python passes) keeping its
diagnostics, lower to LLVM and run on MLIR's ExecutionEngine with our own f16/bf16
conversions, marshal tensors to memrefs by one element-type table, compare with the
tolerance table, normalize a failure's signature, and replay a bundle's case or
frontend step. Its modules import only torch, torch_mlir, numpy, the standard library
and each other (relative imports; onnx too, in the ONNX frontend's step alone): each
bundle carries a copy of this package
(`replay_runtime/` next to `repro.py`), so the copy is the code that verified it.
`tests/test_replay_runtime.py` checks both.
"""
