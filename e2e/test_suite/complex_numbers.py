"""Complex numbers made and consumed inside the program (real inputs and outputs)."""

import torch

from e2e.framework import op_tests


def _as_complex(x):
    return torch.view_as_complex(x)


# x has a trailing dim of 2: real and imaginary parts.
op_tests(
    "Complex",
    inputs=lambda tu: [tu.randn(3, 4, 2), tu.randn(3, 4, 2)],
    fns={
        "ViewAsRealRoundTrip": lambda x, y: torch.view_as_real(_as_complex(x)),
        "Mul": lambda x, y: torch.view_as_real(_as_complex(x) * _as_complex(y)),
        "Add": lambda x, y: torch.view_as_real(_as_complex(x) + _as_complex(y)),
        "Div": lambda x, y: torch.view_as_real(_as_complex(x) / _as_complex(y)),
        "Abs": lambda x, y: _as_complex(x).abs(),
        "Angle": lambda x, y: torch.angle(_as_complex(x)),
        "RealImag": lambda x, y: (_as_complex(x).real * 2, _as_complex(y).imag),
        "Conj": lambda x, y: torch.view_as_real(torch.conj_physical(_as_complex(x))),
        "Exp": lambda x, y: torch.view_as_real(torch.exp(_as_complex(x) * 0.5)),
        "MulReal": lambda x, y: torch.view_as_real(_as_complex(x) * 3.0),
        "Complex": lambda x, y: torch.view_as_real(torch.complex(x[..., 0], y[..., 0])),
        "Polar": lambda x, y: torch.view_as_real(torch.polar(x[..., 0].abs(), y[..., 0])),
        "Matmul": lambda x, y: torch.view_as_real(_as_complex(x) @ _as_complex(y).transpose(0, 1)),
        "SumDim": lambda x, y: torch.view_as_real(_as_complex(x).sum(1)),
        "AbsSquared": lambda x, y: (_as_complex(x) * _as_complex(x).conj()).real,
        "Reciprocal": lambda x, y: torch.view_as_real(torch.reciprocal(_as_complex(x))),
        "Sqrt": lambda x, y: torch.view_as_real(torch.sqrt(_as_complex(x))),
        "Sgn": lambda x, y: torch.view_as_real(torch.sgn(_as_complex(x))),
        "IsComplexMask": lambda x, y: _as_complex(x).abs() > 1.0,
    },
)
op_tests(
    "ComplexDynamic",
    inputs=lambda tu: [tu.randn(3, 5, 2)],
    dynamic=[[-1, -1, 2]],
    fns={
        "Abs": lambda x: _as_complex(x).abs(),
        "MulConj": lambda x: torch.view_as_real(_as_complex(x) * _as_complex(x).conj()),
    },
)
op_tests(
    "ComplexFft",
    inputs=lambda tu: [tu.randn(2, 8)],
    fns={
        "RfftAbs": lambda x: torch.fft.rfft(x).abs(),
        "FftRoundTrip": lambda x: torch.fft.ifft(torch.fft.fft(x)).real,
        "RfftReal": lambda x: torch.view_as_real(torch.fft.rfft(x, dim=-1)),
        "Irfft": lambda x: torch.fft.irfft(torch.fft.rfft(x)),
    },
)
op_tests(
    "Complex128",
    inputs=lambda tu: [tu.randn(3, 2, dtype=torch.float64)],
    fns={"Abs": lambda x: _as_complex(x).abs(), "Mul": lambda x: torch.view_as_real(_as_complex(x) * _as_complex(x))},
)
