"""Buffers a launch may read before its programmatic-launch wait: "settled" ones.

Every kernel of a module opens by letting the next launch start (launch.cuh), so a call may begin
while the launch before it still runs. A read placed before the call's `griddepcontrol.wait` is
safe when nothing that may still be running writes the buffer: it is an entry parameter that no
kernel of the program writes, and one of the program's own launches precedes the call, so the
kernel still running is the program's own, not the caller's producer of that parameter. The GEMM
atom reads settled weights this way (gemm_atom.py), the attention atom a settled kv_len.
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


def unwritten_params(program: Program, buffers: Iterable[Buffer]) -> bool:
    """Whether every buffer is an entry parameter that no kernel of the program writes."""
    return all(b in program.params and not any(b in k.writes for k in program.kernels) for b in buffers)
