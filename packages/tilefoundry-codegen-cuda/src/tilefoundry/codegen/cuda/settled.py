"""Buffers a launch may read before its programmatic-launch wait: "settled" ones.

Every kernel of a module opens by letting the next launch start (launch.cuh), and so does each
module's first kernel against the caller's last, so a call may run while launches before it,
the program's own or an earlier module's, still run. A read placed before the call's
`griddepcontrol.wait` is safe only where nothing that may still be running writes the buffer:
  - a weight: an entry parameter declared ConstTensor (`Program.constants`), which a caller
    binds from its loaded weights, not from work in flight, and which no kernel of the program
    writes;
  - behind a launch of the program's own, so the kernel still running when the call starts is
    the program's (which writes no weight), not the caller's.
A plain Tensor entry is not settled even when no kernel of the program writes it: another
module's kernel, still running as this one starts, may be writing it (a module's output passed
on as the next one's input, the residual stream of a decoder's layers). The GEMM atom reads
settled weights this way (gemm_atom.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from tilefoundry.ir.tile.stmt import AtomCall, Buffer, Kernel, Program


def launches_before(program: Program, kernel: Kernel) -> bool:
    """Whether one of the program's own launches always precedes `kernel`: a kernel before it that
    no atom applies as its prologue (an applied prologue does not launch; an epilogue's GEMM
    launches before the epilogue would)."""
    kernels = list(program.kernels)
    prologues = {id(k.body.prologue) for k in kernels if isinstance(k.body, AtomCall)}
    return any(id(k) not in prologues for k in kernels[: kernels.index(kernel)])


def settled_weights(program: Program, buffers: Iterable[Buffer]) -> bool:
    """Whether every buffer is a ConstTensor entry parameter that no kernel of the program writes."""
    written = {b for k in program.kernels for b in k.writes}
    return all(b in program.params and b.name in program.constants and b not in written for b in buffers)
