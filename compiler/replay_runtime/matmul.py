"""A packed, register-blocked f32 matmul for the RefBackend's O2 programs (eager mode's).

`packed_matmul` replaces each f32 matmul `linalg.generic` on memrefs (after
bufferization: `C[b.., i, j] += A[b.., i, k] * B[b.., k, j]`, batch dims allowed, any
loop order) with a call to a kernel written here for its static shape: the GEMM loop
nest of BLIS and every fast BLAS, in `scf` and `vector` ops.

    for each block of NC columns, for each block of KC steps of k:
        copy that KC x NC block of B into a contiguous buffer, panel by panel of NR columns
        for each MR rows, for each panel: an MR x NR tile of C in registers (MR x NR/VL
            vectors), over the block's k: broadcast A[i, k], load the panel's row k, add

`convert-linalg-to-loops` gives a matmul one output element's reduction at a time, with
no reuse of registers: vectorized by LLVM, 1.5-1.8x slower than this with SSE, 6-8x with
AVX-512 (`benchmarks/matmul.py`, benchmarks/RESULTS.md). The tile sizes follow the JIT target's vector width: 8 x 32 with
AVX-512's 32 registers, 6 x 16 with AVX2's 16, 4 x 8 with SSE's.

Each output element still sums its products in the order of k, from C's value on, one
rounding per step: on a target without a fused multiply-add (the default, `x86-64-v2`)
the values are the naive loop's bit for bit. Where the target fuses them (`host` on a
CPU with FMA, `x86-64-v3`), each step is one `fma`: one rounding where the loop has two.
Rows and columns past the last whole tile are done by a smaller tile (rows) and by
scalar loops (columns), in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from .passes import operations
from .target import jit_target

PASS = "python:compiler.replay_runtime.matmul:packed_matmul"


@dataclass(frozen=True)
class Tiles:
    rows: int  # MR: rows of C in registers
    columns: int  # NR: columns of C in registers (a multiple of the vector width)
    depth: int  # KC: steps of k per packed block of B
    width: int  # NC: columns of B per packed block (a multiple of NR)


# By f32 lanes per vector register: MR x NR/VL accumulators, NR/VL vectors of B and
# a broadcast of A fit the target's registers (32 with AVX-512, 16 below). A packed
# block of B is 768 KiB at most, within a core's L2 cache.
TILES = {16: Tiles(8, 32, 256, 768), 8: Tiles(6, 16, 256, 768), 4: Tiles(4, 8, 256, 768)}


@dataclass(frozen=True)
class Matmul:
    """The static shape of one matmul: `batch` dims, then C is M x N, A M x K, B K x N."""

    batch: tuple[int, ...]
    m: int
    k: int
    n: int


def packed_matmul(module: ir.Module) -> None:
    """Replace every f32 matmul `linalg.generic` of the module with a call to its kernel."""
    target = jit_target()
    lanes = min(target.vector_width(), 16)
    fma = target.fuses_multiply_add()
    kernels: set[str] = set()
    for op in [op for op in operations(module.operation) if op.name == "linalg.generic"]:
        shape = matmul_shape(op)
        if shape is None:
            continue
        name = kernel_name(shape, lanes, fma)
        if name not in kernels:
            kernels.add(name)
            _add_kernel(module, kernel_text(name, shape, lanes, fma))
        _call_instead(op, name, shape)


def matmul_shape(op: ir.Operation) -> Matmul | None:
    """The matmul `op` is, if it is one this kernel computes: f32 memrefs of static shape,
    B and C contiguous in their last dim, the body `out + a * b` (either operand order)."""
    if len(op.operands) != 3 or len(op.results) != 0:
        return None
    a_type, b_type, c_type = types = [value.type for value in op.operands]
    if not all(isinstance(t, ir.MemRefType) for t in types):
        return None
    if not all(t.has_static_shape and isinstance(t.element_type, ir.F32Type) for t in types):
        return None
    strides = [_strides(t) for t in types]
    if any(s is None or not s for s in strides) or strides[1][-1] != 1 or strides[2][-1] != 1:
        return None  # A may be read with any strides; B's and C's rows are read as vectors
    iterators = [str(attr) for attr in ir.ArrayAttr(op.attributes["iterator_types"])]  # #linalg.iterator_type<...>
    reductions = [dim for dim, kind in enumerate(iterators) if "reduction" in kind]
    if len(reductions) != 1:
        return None
    maps = [ir.AffineMapAttr(attr).value for attr in ir.ArrayAttr(op.attributes["indexing_maps"])]
    dims = [_dim_positions(m) for m in maps]
    if any(d is None for d in dims):
        return None
    a_dims, b_dims, c_dims = dims
    rank = len(c_dims)
    if rank < 2 or len(a_dims) != rank or len(b_dims) != rank or len(iterators) != rank + 1:
        return None
    batch, (i, j), r = c_dims[:-2], c_dims[-2:], reductions[0]
    if a_dims != [*batch, i, r] or b_dims != [*batch, r, j] or len({*batch, i, j, r}) != rank + 1:
        return None
    if not _is_multiply_add(op):
        return None
    c_shape = c_type.shape
    return Matmul(tuple(c_shape[:-2]), c_shape[-2], a_type.shape[-1], c_shape[-1])


def _strides(memref: ir.MemRefType) -> list[int] | None:
    """The memref's strides, or None if its layout is not strided (an arbitrary affine map)."""
    try:
        return list(memref.get_strides_and_offset()[0])
    except RuntimeError:  # "Failed to extract strides and offset from memref."
        return None


def _dim_positions(affine_map: ir.AffineMap) -> list[int] | None:
    positions = []
    for expr in affine_map.results:
        if not isinstance(expr, ir.AffineDimExpr):
            return None
        positions.append(expr.position)
    return positions


def _is_multiply_add(op: ir.Operation) -> bool:
    """The body is `yield out + a * b` (operands of either op in either order)."""
    blocks = list(op.regions[0].blocks)
    if len(blocks) != 1:
        return False
    block = blocks[0]
    body = [child.operation for child in block.operations]
    if [o.name for o in body] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    mul, add, done = body
    a, b, out = block.arguments
    return (
        _same(mul.operands, [a, b])
        and _same(add.operands, [out, mul.results[0]])
        and _same(done.operands, [add.results[0]])
    )


def _same(values, expected: list[ir.Value]) -> bool:
    """`values` are `expected` in some order."""
    remaining = list(expected)
    for value in values:
        match = next((i for i, e in enumerate(remaining) if value == e), None)
        if match is None:
            return False
        remaining.pop(match)
    return not remaining


def kernel_name(shape: Matmul, lanes: int, fma: bool) -> str:
    dims = "x".join(str(d) for d in (*shape.batch, shape.m, shape.k, shape.n))
    return f"__e2e_matmul_{dims}_f32_v{lanes}{'_fma' if fma else ''}"


def _memref_type(shape: tuple[int, ...], unit_last_stride: bool) -> str:
    strides = ["?"] * len(shape)
    if unit_last_stride:
        strides[-1] = "1"
    return f"memref<{'x'.join(map(str, shape))}xf32, strided<[{', '.join(strides)}], offset: ?>>"


def operand_types(shape: Matmul) -> tuple[str, str, str]:
    """The kernel's argument types: any strides, B and C contiguous in their last dim."""
    return (
        _memref_type((*shape.batch, shape.m, shape.k), False),
        _memref_type((*shape.batch, shape.k, shape.n), True),
        _memref_type((*shape.batch, shape.m, shape.n), True),
    )


def kernel_text(name: str, shape: Matmul, lanes: int, fma: bool) -> str:
    """The kernel for `shape` as a private `func.func` (MLIR text)."""
    return _KernelWriter(shape, TILES[lanes], lanes, fma).function(name)


class _KernelWriter:
    def __init__(self, shape: Matmul, tiles: Tiles, lanes: int, fma: bool):
        self.shape, self.tiles, self.lanes, self.fma = shape, tiles, lanes, fma
        self.lines: list[str] = []
        self.constants: set[int] = set()
        self.a_type, self.b_type, self.c_type = operand_types(shape)
        self.vector = f"vector<{lanes}xf32>"
        t = tiles
        self.full_columns = shape.n - shape.n % t.columns
        panels = min(t.width, self.full_columns) // t.columns
        self.packed = f"memref<{max(panels, 1)}x{max(min(t.depth, shape.k), 1)}x{t.columns}xf32>"
        self.batch_indices: list[str] = []

    def c(self, value: int) -> str:
        self.constants.add(value)
        return f"%c{value}"

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("  " * depth + line)

    def function(self, name: str) -> str:
        shape = self.shape
        depth = 1
        self.emit(depth, f"%Bp = memref.alloc() {{alignment = 64 : i64}} : {self.packed}")
        for axis, size in enumerate(shape.batch):
            self.emit(depth, f"scf.for %batch{axis} = {self.c(0)} to {self.c(size)} step {self.c(1)} {{")
            self.batch_indices.append(f"%batch{axis}")
            depth += 1
        if self.full_columns and shape.m and shape.k:
            self.blocks(depth)
        if self.full_columns < shape.n and shape.m:
            self.scalar_columns(depth)
        for _ in shape.batch:
            depth -= 1
            self.emit(depth, "}")
        self.emit(1, f"memref.dealloc %Bp : {self.packed}")
        self.emit(1, "return")
        head = [
            f"func.func private @{name}(%A: {self.a_type}, %B: {self.b_type}, %C: {self.c_type}) {{",
            *(f"  %c{value} = arith.constant {value} : index" for value in sorted(self.constants)),
        ]
        return "\n".join([*head, *self.lines, "}"])

    def index(self, *last: str) -> str:
        return ", ".join([*self.batch_indices, *last])

    def blocks(self, depth: int) -> None:
        shape, t, e, full_columns = self.shape, self.tiles, self.emit, self.full_columns
        e(depth, f"scf.for %jc = {self.c(0)} to {self.c(full_columns)} step {self.c(t.width)} {{")
        e(depth + 1, f"%left = arith.subi {self.c(full_columns)}, %jc : index")
        e(depth + 1, f"%nw = arith.minsi %left, {self.c(t.width)} : index")
        e(depth + 1, f"%np = arith.divui %nw, {self.c(t.columns)} : index")
        e(depth + 1, f"scf.for %kc = {self.c(0)} to {self.c(shape.k)} step {self.c(t.depth)} {{")
        d = depth + 2
        e(d, f"%kleft = arith.subi {self.c(shape.k)}, %kc : index")
        e(d, f"%kw = arith.minsi %kleft, {self.c(t.depth)} : index")
        # Pack: panel p, row k of the packed buffer is B[kc + k, jc + p * NR .. + NR].
        self.panels(d)
        e(d + 1, f"scf.for %k = {self.c(0)} to %kw step {self.c(1)} {{")
        e(d + 2, "%kk = arith.addi %kc, %k : index")
        for v in range(t.columns // self.lanes):
            e(d + 2, f"%col{v} = arith.addi %pj, {self.c(v * self.lanes)} : index")
            e(d + 2, f"%bv{v} = vector.load %B[{self.index('%kk', f'%col{v}')}] : {self.b_type}, {self.vector}")
            e(d + 2, f"vector.store %bv{v}, %Bp[%p, %k, {self.c(v * self.lanes)}] : {self.packed}, {self.vector}")
        e(d + 1, "}")
        e(d, "}")
        full_rows = shape.m - shape.m % t.rows
        if full_rows:
            e(d, f"scf.for %ir = {self.c(0)} to {self.c(full_rows)} step {self.c(t.rows)} {{")
            self.tile(d + 1, t.rows, "%ir")
            e(d, "}")
        if full_rows < shape.m:
            self.tile(d, shape.m - full_rows, self.c(full_rows))
        e(depth + 1, "}")
        e(depth, "}")

    def panels(self, depth: int) -> None:
        """Open the loop over the block's panels: `%p`, its first column of B and C `%pj`."""
        self.emit(depth, f"scf.for %p = {self.c(0)} to %np step {self.c(1)} {{")
        self.emit(depth + 1, f"%pc = arith.muli %p, {self.c(self.tiles.columns)} : index")
        self.emit(depth + 1, "%pj = arith.addi %jc, %pc : index")

    def tile(self, depth: int, rows: int, first_row: str) -> None:
        """rows x NR of C, panel by panel of the packed block, in registers over its k."""
        t, e, vt = self.tiles, self.emit, self.vector
        columns = t.columns // self.lanes
        self.panels(depth)
        d = depth + 1
        for r in range(rows):
            e(d, f"%row{r} = arith.addi {first_row}, {self.c(r)} : index")
        for v in range(columns):
            e(d, f"%col{v} = arith.addi %pj, {self.c(v * self.lanes)} : index")
        accumulators = [(r, v) for r in range(rows) for v in range(columns)]
        for r, v in accumulators:
            e(d, f"%init{r}_{v} = vector.load %C[{self.index(f'%row{r}', f'%col{v}')}] : {self.c_type}, {vt}")
        start = ", ".join(f"%acc{r}_{v} = %init{r}_{v}" for r, v in accumulators)
        types = ", ".join(vt for _ in accumulators)
        e(
            d,
            f"%sum:{len(accumulators)} = scf.for %k = {self.c(0)} to %kw step {self.c(1)} iter_args({start}) -> ({types}) {{",
        )
        e(d + 1, "%kk = arith.addi %kc, %k : index")
        for v in range(columns):
            e(d + 1, f"%b{v} = vector.load %Bp[%p, %k, {self.c(v * self.lanes)}] : {self.packed}, {vt}")
        for r in range(rows):
            e(d + 1, f"%as{r} = memref.load %A[{self.index(f'%row{r}', '%kk')}] : {self.a_type}")
            e(d + 1, f"%a{r} = vector.broadcast %as{r} : f32 to {vt}")
            for v in range(columns):
                for line in self.multiply_add(f"%n{r}_{v}", f"%a{r}", f"%b{v}", f"%acc{r}_{v}", vt):
                    e(d + 1, line)
        e(d + 1, f"scf.yield {', '.join(f'%n{r}_{v}' for r, v in accumulators)} : {types}")
        e(d, "}")
        for i, (r, v) in enumerate(accumulators):
            e(d, f"vector.store %sum#{i}, %C[{self.index(f'%row{r}', f'%col{v}')}] : {self.c_type}, {vt}")
        e(depth, "}")

    def multiply_add(self, result: str, a: str, b: str, acc: str, type_text: str) -> list[str]:
        """`result = acc + a * b`: one fused op where the target has FMA, else two roundings."""
        if self.fma:
            op = "vector.fma" if type_text.startswith("vector") else "math.fma"
            return [f"{result} = {op} {a}, {b}, {acc} : {type_text}"]
        return [
            f"{result}_m = arith.mulf {a}, {b} : {type_text}",
            f"{result} = arith.addf {acc}, {result}_m : {type_text}",
        ]

    def scalar_columns(self, depth: int) -> None:
        """The columns past the last whole panel: one element at a time, k in order."""
        shape, e, first_column = self.shape, self.emit, self.full_columns
        e(depth, f"scf.for %i = {self.c(0)} to {self.c(shape.m)} step {self.c(1)} {{")
        e(depth + 1, f"scf.for %j = {self.c(first_column)} to {self.c(shape.n)} step {self.c(1)} {{")
        d = depth + 2
        e(d, f"%start = memref.load %C[{self.index('%i', '%j')}] : {self.c_type}")
        e(
            d,
            f"%total = scf.for %k = {self.c(0)} to {self.c(shape.k)} step {self.c(1)} iter_args(%acc = %start) -> (f32) {{",
        )
        e(d + 1, f"%a = memref.load %A[{self.index('%i', '%k')}] : {self.a_type}")
        e(d + 1, f"%b = memref.load %B[{self.index('%k', '%j')}] : {self.b_type}")
        for line in self.multiply_add("%next", "%a", "%b", "%acc", "f32"):
            e(d + 1, line)
        e(d + 1, "scf.yield %next : f32")
        e(d, "}")
        e(d, f"memref.store %total, %C[{self.index('%i', '%j')}] : {self.c_type}")
        e(depth + 1, "}")
        e(depth, "}")


def _add_kernel(module: ir.Module, text: str) -> None:
    parsed = ir.Module.parse(text, module.context)  # owns the kernel until it is detached: keep it alive
    kernel = list(parsed.body.operations)[0].operation
    kernel.detach_from_parent()
    ir.InsertionPoint(module.body).insert(kernel)


def _call_instead(op: ir.Operation, name: str, shape: Matmul) -> None:
    with ir.InsertionPoint(op), op.location:
        arguments = [
            ir.Operation.create("memref.cast", results=[ir.Type.parse(type_text)], operands=[value]).result
            for value, type_text in zip(op.operands, operand_types(shape))
        ]
        ir.Operation.create("func.call", operands=arguments, attributes={"callee": ir.FlatSymbolRefAttr.get(name)})
    op.erase()
