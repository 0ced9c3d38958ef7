"""A toy target catalog for planning tests: whole-GEMM bf16 atoms of the named operand layouts."""

from __future__ import annotations

from tilefoundry.ir.target import ExecAxis, MmaAtom, PeakRates, Resource, TargetCatalog

# Layout suffix -> (A major, B major): r row-major, c column-major, for A, B, C in turn.
MAJORS = {"rrr": ("K", "N"), "rcr": ("K", "K"), "crr": ("M", "N")}


def toy_gemm_catalog(
    *layouts: str, shared_a_group: int = 1, epilogue: bool = False, prologue: bool = False
) -> TargetCatalog:
    """A target whose GEMM atoms `toy_gemm_bf16_<layout>` read and write global memory."""
    atoms = tuple(
        MmaAtom(
            name=f"toy_gemm_bf16_{lay}",
            issued_by="block",
            m=64,
            n=64,
            k=16,
            a_major=MAJORS[lay][0],
            b_major=MAJORS[lay][1],
            a_storage="gmem",
            b_storage="gmem",
            a_layout="(M,K)",
            b_layout="(K,N)" if MAJORS[lay][1] == "N" else "(N,K)",
            c_layout="(M,N):(N,1)",
            shared_a_group=shared_a_group,
            epilogue=epilogue,
            prologue=prologue,
            **{f"{x}_dtype": "bf16" for x in "abcd"},
        )
        for lay in layouts
    )
    memory = Resource(
        name="global",
        kind="global",
        storage="gmem",
        instance="device",
        visibility="device",
        capacity_bytes=1 << 30,
        alignment_bytes=16,
    )
    return TargetCatalog(
        target="toy",
        arch="toy1",
        device="Toy Part",
        exec_axes=(ExecAxis(name="block", binds=("group", "worker"), dynamic=True),),
        resources=(memory,),
        atoms=atoms,
        capabilities=(),
        peak=PeakRates(flops_per_s={"bf16": 1e12}, bytes_per_s={"global": 1e11}),
    )
