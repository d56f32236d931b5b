"""Upstream torch-mlir's e2e import paths, answered by this project's framework.

Test files written for `projects/pt1/python/torch_mlir_e2e_test/test_suite/` import

    from torch_mlir_e2e_test.framework import TestUtils
    from torch_mlir_e2e_test.registry import register_test_case
    from torch_mlir_e2e_test.annotations import annotate_args, export

and run here unchanged (`pytest DIR --suite-dir DIR`). Tests registered through
`torch_mlir_e2e_test.registry` are compared as upstream compares them (see
`registry.UPSTREAM_TOLERANCE`).
"""
