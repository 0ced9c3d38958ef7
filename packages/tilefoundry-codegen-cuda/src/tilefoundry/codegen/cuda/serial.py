"""Thread-private CUDA C++ of TileIR statements: what one thread runs serially, in order.

Every realization ends here for the code inside its per-thread region (an element of a flat
grid, one share of a distributed row loop). Loops run in their logical order whatever their
kind, so a reduction is never reordered:

    for r in 0..K reduce(acc:add):     ->  for (int64_t r = 0; r < 64; ++r) {
      acc = acc + a[i, r] * b[r, j]          acc = (acc + (a[i * 64 + r] * b[r * 128 + j]));
                                           }

Kernel-local scratch (`Alloc`) becomes a thread-local array sized by the buffer's largest
extents. Checks are emitted by the index-check kernel (kernels.py), which numbers them.
"""

from __future__ import annotations

from collections.abc import Mapping

from tilefoundry.ir.dims import Dim, dim_bounds
from tilefoundry.ir.errors import PlanError
from tilefoundry.ir.tile.cexpr import CExpr, cname, ctype, shape_text
from tilefoundry.ir.tile.expr import Load, Var
from tilefoundry.ir.tile.stmt import Alloc, Assign, AtomCall, Buffer, For, If, Let, Seq, Stmt, Store

# A thread-local scratch array larger than this would spill to local memory at every access.
THREAD_SCRATCH_BYTES = 16384


def indent(lines: list[str], depth: int) -> list[str]:
    """`lines`, each prefixed by `depth` levels of two spaces."""
    return ["  " * depth + x for x in lines]


def largest_count(shape: tuple[Dim, ...]) -> int | None:
    """Elements of a buffer at its DimVars' upper bounds; None when an extent has no bound."""
    n = 1
    for d in shape:
        b = dim_bounds(d)
        if b is None:
            return None
        n *= max(b[1], 0)
    return n


class SerialCode:
    """Emits statements for one thread.

    Args:
        dims: DimVar name -> the kernel's C++ spelling of its extent (`d_T`).
        kernel: the kernel name, for diagnostics.
    """

    def __init__(self, dims: Mapping[str, str], kernel: str):
        self.dims = dict(dims)
        self.kernel = kernel

    def cx(self, names: Mapping[str, str] | None = None) -> CExpr:
        """An expression printer seeing the dims and `names` (lane arrays, renamed loop vars)."""
        return CExpr({**self.dims, **(names or {})})

    def stmt(self, s: Stmt, depth: int, names: Mapping[str, str]) -> list[str]:
        """Lines of `s` at `depth`."""
        cx = self.cx(names)
        if isinstance(s, Seq):
            return [x for c in s.body for x in self.stmt(c, depth, names)]
        if isinstance(s, For):
            head = f"for (int64_t {s.var} = 0; {s.var} < {cx(s.extent)}; ++{s.var}) {{"
            return indent([head], depth) + self.stmt(s.body, depth + 1, names) + indent(["}"], depth)
        if isinstance(s, Store):
            return indent([f"{cx(Load(s.buffer, s.index))} = {cx(s.value)};"], depth)
        if isinstance(s, Let):
            qual = "" if s.mutable else "const "
            return indent([f"{qual}{ctype(s.value.dtype)} {s.name} = {cx(s.value)};"], depth)
        if isinstance(s, Assign):
            return indent([f"{cx(Var(s.name))} = {cx(s.value)};"], depth)
        if isinstance(s, If):
            out = indent([f"if ({cx(s.cond)}) {{"], depth) + self.stmt(s.then, depth + 1, names)
            if s.orelse is not None:
                out += indent(["} else {"], depth) + self.stmt(s.orelse, depth + 1, names)
            return out + indent(["}"], depth)
        if isinstance(s, Alloc):
            return self.alloc(s, depth, names)
        if isinstance(s, AtomCall):
            raise PlanError(
                f"cuda: kernel {self.kernel}: the atom {s.atom} sits inside a loop; only a whole kernel "
                f"can be an atom",
                where=self.kernel,
                expected="an atom as the whole kernel body",
                got=s.atom,
            )
        raise PlanError(
            f"cuda: kernel {self.kernel}: cannot emit statement {type(s).__name__}", where=self.kernel
        )

    def alloc(self, s: Alloc, depth: int, names: Mapping[str, str]) -> list[str]:
        """A thread-local array at the buffer's largest size."""
        b = s.buffer
        n = thread_scratch_count(b, self.kernel)
        head = f"{ctype(b.dtype)} {cname(b)}[{max(n, 1)}];  // thread scratch {shape_text(b.shape)}"
        return indent([head], depth) + self.stmt(s.body, depth, names)


def thread_scratch_count(b: Buffer, kernel: str) -> int:
    """Elements of a thread-local scratch array for `b`.

    Raises:
        PlanError: the buffer has an unbounded extent or exceeds THREAD_SCRATCH_BYTES.
    """
    n = largest_count(b.shape)
    if n is None or n * b.dtype.itemsize > THREAD_SCRATCH_BYTES:
        size = "unbounded" if n is None else f"{n * b.dtype.itemsize} B"
        raise PlanError(
            f"cuda: kernel {kernel}: thread scratch {b.name} {shape_text(b.shape)} {b.dtype} is {size}, "
            f"more than the {THREAD_SCRATCH_BYTES} B one thread may hold",
            where=kernel,
            expected=f"<= {THREAD_SCRATCH_BYTES} B",
            got=size,
        )
    return n
