"""TileIR: kernels as loop nests over scalar element expressions, in Candidate and Scheduled form."""

from .expr import Bin, Cast, Const, Expr, Load, Select, Un, Var
from .printer import format_expr, format_kernel, format_program, format_stmt
from .stmt import (
    Alloc,
    Assign,
    AtomCall,
    Buffer,
    Check,
    DimBinding,
    For,
    If,
    Kernel,
    Let,
    Program,
    Seq,
    Stmt,
    Store,
)

__all__ = [
    "Alloc",
    "Assign",
    "AtomCall",
    "Bin",
    "Buffer",
    "Cast",
    "Check",
    "Const",
    "DimBinding",
    "Expr",
    "For",
    "If",
    "Kernel",
    "Let",
    "Load",
    "Program",
    "Select",
    "Seq",
    "Stmt",
    "Store",
    "Un",
    "Var",
    "format_expr",
    "format_kernel",
    "format_program",
    "format_stmt",
]
