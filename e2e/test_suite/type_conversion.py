"""Dtype conversion (.to) and type promotion between tensors and with Python scalars."""

import torch

from e2e.framework import TestUtils, annotate_args, e2e_test, export, op_test, register_test_case

FLOAT_TO = {
    "Float64": torch.float64,
    "Float16": torch.float16,
    "BFloat16": torch.bfloat16,
    "Int64": torch.int64,
    "Int32": torch.int32,
    "Int8": torch.int8,
    "UInt8": torch.uint8,
    "Bool": torch.bool,
}


# From float32: values in [-3, 3) exercise truncation toward zero; uint8 gets non-negative values
# (negative float -> uint8 is undefined behaviour in C and differs between backends).
@e2e_test(
    inputs=lambda tu, dtype: [tu.rand(3, 4, low=0.0 if dtype == torch.uint8 else -3.0, high=3.0)],
    params={f"Float32To{name}": dict(dtype=dtype) for name, dtype in FLOAT_TO.items()},
)
class ToDtype(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        return x.to(self.dtype)


e2e_test(
    inputs=lambda tu, make: [make(tu)],
    name="Convert",
    params={
        "Int64ToFloat32": dict(dtype=torch.float32, make=lambda tu: tu.randint(3, 4, low=-100, high=100)),
        "Int32ToInt64": dict(
            dtype=torch.int64, make=lambda tu: tu.randint(3, 4, low=-100, high=100, dtype=torch.int32)
        ),
        "Int64ToInt32": dict(dtype=torch.int32, make=lambda tu: tu.randint(3, 4, low=-100, high=100)),
        "BoolToFloat32": dict(dtype=torch.float32, make=lambda tu: tu.bools(3, 4)),
        "BoolToInt64": dict(dtype=torch.int64, make=lambda tu: tu.bools(3, 4)),
        "Int64ToBool": dict(dtype=torch.bool, make=lambda tu: tu.randint(3, 4, low=-1, high=2)),
        "Float64ToFloat32": dict(dtype=torch.float32, make=lambda tu: tu.randn(3, 4, dtype=torch.float64)),
        "Float16ToFloat32": dict(dtype=torch.float32, make=lambda tu: tu.randn(3, 4, dtype=torch.float16)),
        "BFloat16ToFloat32": dict(dtype=torch.float32, make=lambda tu: tu.randn(3, 4, dtype=torch.bfloat16)),
        "UInt8ToFloat32": dict(
            dtype=torch.float32, make=lambda tu: tu.randint(3, 4, low=0, high=255, dtype=torch.uint8)
        ),
        "Int8ToInt64": dict(dtype=torch.int64, make=lambda tu: tu.randint(3, 4, low=-128, high=127, dtype=torch.int8)),
    },
)(ToDtype)


op_test(
    "ToDtypeDynamic_Float32ToInt64",
    lambda x: x.to(torch.int64),
    lambda tu: [tu.rand(3, 4, low=-3.0, high=3.0)],
    dynamic=True,
)
op_test(
    "TypeAsInt32", lambda x, y: x.type_as(y), lambda tu: [tu.rand(3, 4, high=5.0), tu.randint(2, dtype=torch.int32)]
)


# Promotion: the compiled result must have the dtype torch's promotion rules give.
@e2e_test(
    inputs=lambda tu, lhs, rhs: [lhs(tu), rhs(tu)],
    params={
        "Int64PlusFloat32": dict(lhs=lambda tu: tu.randint(3, 4), rhs=lambda tu: tu.randn(3, 4)),
        "Int32PlusInt64": dict(lhs=lambda tu: tu.randint(3, 4, dtype=torch.int32), rhs=lambda tu: tu.randint(3, 4)),
        "BoolPlusInt64": dict(lhs=lambda tu: tu.bools(3, 4), rhs=lambda tu: tu.randint(3, 4)),
        "Float16PlusFloat32": dict(lhs=lambda tu: tu.randn(3, 4, dtype=torch.float16), rhs=lambda tu: tu.randn(3, 4)),
        "Float32PlusFloat64": dict(lhs=lambda tu: tu.randn(3, 4), rhs=lambda tu: tu.randn(3, 4, dtype=torch.float64)),
        "UInt8PlusInt8": dict(
            lhs=lambda tu: tu.randint(3, 4, high=100, dtype=torch.uint8),
            rhs=lambda tu: tu.randint(3, 4, low=-100, high=100, dtype=torch.int8),
        ),
        "BFloat16PlusFloat16": dict(
            lhs=lambda tu: tu.randn(3, 4, dtype=torch.bfloat16), rhs=lambda tu: tu.randn(3, 4, dtype=torch.float16)
        ),
        "Int64PlusZeroDimFloat64": dict(
            lhs=lambda tu: tu.randint(3, 4), rhs=lambda tu: tu.randn(1, dtype=torch.float64).squeeze(0)
        ),
        "Float32PlusZeroDimFloat64": dict(
            lhs=lambda tu: tu.randn(3, 4), rhs=lambda tu: tu.randn(1, dtype=torch.float64).squeeze(0)
        ),
    },
)
class PromoteAdd(torch.nn.Module):
    def __init__(self, lhs, rhs):
        super().__init__()

    def forward(self, a, b):
        return a + b


op_test("PromoteScalar_Int64TimesFloat", lambda x: x * 1.5, lambda tu: [tu.randint(3, 4, low=-5, high=5)])
op_test(
    "PromoteScalar_Int32TrueDivide", lambda x: x / 2, lambda tu: [tu.randint(3, 4, low=-5, high=5, dtype=torch.int32)]
)
op_test("PromoteScalar_Float16PlusInt", lambda x: x + 3, lambda tu: [tu.randn(3, 4, dtype=torch.float16)])
op_test("PromoteScalar_BoolTimesInt", lambda x: x * 2, lambda tu: [tu.bools(3, 4)])
op_test("PromoteMean_Int64NeedsDtype", lambda x: x.float().mean(), lambda tu: [tu.randint(3, 4)])


class TypeConversionI64ToI32Module(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.int64, True)])
    def forward(self, x):
        return x.to(torch.int32)


@register_test_case(module_factory=lambda: TypeConversionI64ToI32Module())
def TypeConversionI64ToI32Module_basic(module, tu: TestUtils):
    module.forward(tu.randint(2, 3, low=-1000, high=1000))


class ToDtypeBoolLayoutNoneModule(torch.nn.Module):
    @export
    @annotate_args([None, ([-1, -1], torch.float32, True)])
    def forward(self, x):
        return torch.ops.aten.to(
            x,
            dtype=torch.bool,
            layout=None,
            device=None,
            pin_memory=None,
            non_blocking=False,
            copy=False,
            memory_format=None,
        )


@register_test_case(module_factory=lambda: ToDtypeBoolLayoutNoneModule())
def ToDtypeBoolLayoutNoneModule_basic(module, tu: TestUtils):
    module.forward(tu.rand(3, 5))
