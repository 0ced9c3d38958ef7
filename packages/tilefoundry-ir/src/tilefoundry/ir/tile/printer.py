"""Text of TileIR, as `tilefoundry.compile(..., dump=True)` prints each stage.

program rms(x: in (T, 64) f32, g: in (64,) f32, out0: out (T, 64) f32)
  dims: T = x.shape[0]
  kernel k0_rms_norm  [row]  origin: rms_norm@model.py:14
    for i0 in 0..T parallel -> worker:
      let acc: f32 = 0.0
      for r in 0..64 reduce(acc:add) -> vector x16:
        acc = acc + x[i0, r] * x[i0, r]
      ...
"""

from __future__ import annotations

from ..dims import format_dim
from .expr import Bin, Cast, Const, Expr, Fold, Load, Select, Un, Var
from .stmt import Alloc, Assign, AtomCall, Buffer, Check, For, If, Kernel, Let, Program, Seq, Stmt, Store

_INFIX = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "floordiv": "//",
    "mod": "%",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&&",
    "or": "||",
    "xor": "^",
}


def format_expr(e: Expr) -> str:
    """One-line text of an expression."""
    if isinstance(e, Const):
        if isinstance(e.value, bool):
            return "true" if e.value else "false"
        return repr(e.value) if e.dtype.is_float else str(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Bin):
        if e.op in _INFIX:
            return f"({format_expr(e.a)} {_INFIX[e.op]} {format_expr(e.b)})"
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Un):
        return f"{e.op}({format_expr(e.a)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({format_expr(e.a)})"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(format_expr(i) for i in e.index)}]"
    if isinstance(e, Fold):
        over = f"{e.var} in 0..{format_expr(e.extent)}"
        return f"fold_{e.op}({over}: {format_expr(e.body)}, {format_expr(e.init)})"
    return repr(e)


def format_buffer(b: Buffer) -> str:
    """`name: role (shape) dtype`."""
    dims = ", ".join(format_dim(d) for d in b.shape)
    return f"{b.name}: {b.role} ({dims}{',' if b.rank == 1 else ''}) {b.dtype}"


def _loop_head(s: For) -> str:
    head = f"for {s.var} in 0..{format_expr(s.extent)} {s.kind}"
    if s.carries:
        head += "(" + ", ".join(f"{n}:{c}" for n, c in s.carries) + ")"
    if s.reassociable:
        head += " reassociable"
    if s.request:
        head += f" requested {s.request}"
    if s.binding is not None:
        head += f" -> {s.binding}" + (f" x{s.width}" if s.binding == "vector" else "")
    return head + ":"


def format_stmt(s: Stmt, indent: int = 0) -> list[str]:
    """Lines of a statement at `indent` levels of two spaces."""
    pad = "  " * indent
    if isinstance(s, Seq):
        return [line for c in s.body for line in format_stmt(c, indent)]
    if isinstance(s, For):
        return [pad + _loop_head(s), *format_stmt(s.body, indent + 1)]
    if isinstance(s, Store):
        idx = ", ".join(format_expr(i) for i in s.index)
        return [f"{pad}{s.buffer.name}[{idx}] = {format_expr(s.value)}"]
    if isinstance(s, Let):
        kind = "var" if s.mutable else "let"
        return [f"{pad}{kind} {s.name}: {s.value.dtype} = {format_expr(s.value)}"]
    if isinstance(s, Assign):
        return [f"{pad}{s.name} = {format_expr(s.value)}"]
    if isinstance(s, If):
        lines = [f"{pad}if {format_expr(s.cond)}:", *format_stmt(s.then, indent + 1)]
        if s.orelse is not None:
            lines += [f"{pad}else:", *format_stmt(s.orelse, indent + 1)]
        return lines
    if isinstance(s, Check):
        return [f"{pad}check {format_expr(s.cond)} else {s.message!r} {format_expr(s.shown)}"]
    if isinstance(s, Alloc):
        return [f"{pad}alloc {format_buffer(s.buffer)}", *format_stmt(s.body, indent)]
    if isinstance(s, AtomCall):
        ops = ", ".join(b.name for b in s.operands)
        params = ", ".join(f"{k}={format_expr(v)}" for k, v in s.params.items())
        then = f" then epilogue {s.epilogue.name}" if s.epilogue is not None else ""
        first = f" after prologue {s.prologue.name}" if s.prologue is not None else ""
        chain = f" chained with {s.chain.name}" if s.chain is not None else ""
        return [f"{pad}atom {s.atom}({ops}; {params}){first}{then}{chain}"]
    return [pad + repr(s)]


def format_kernel(k: Kernel, indent: int = 1) -> list[str]:
    """Lines of a kernel: its header, decisions (when scheduled) and body."""
    pad = "  " * indent
    head = f"{pad}kernel {k.name}  [{k.form}]"
    if k.origin:
        head += "  origin: " + ", ".join(k.origin)
    lines = [head]
    if k.placement:
        lines.append(f"{pad}  placed: " + ", ".join(str(c) for c in k.placement))
    lines += [f"{pad}  # {d}" for d in k.decisions]
    lines += format_stmt(k.body, indent + 1)
    return lines


def format_program(p: Program) -> str:
    """The whole program as text (the dump of one stage)."""
    params = ", ".join(format_buffer(b) for b in p.params)
    lines = [f"program {p.name}({params})  [{p.stage}]"]
    if p.dims:
        lines.append(
            "  dims: " + ", ".join(f"{d.var.name} = {p.params[d.param].name}.shape[{d.axis}]" for d in p.dims)
        )
    lines += [f"  temp {format_buffer(t)}" for t in p.temps]
    lines += [f"  # {n}" for n in p.notes]
    for k in p.kernels:
        lines += format_kernel(k)
    return "\n".join(lines)
