"""The catalogue test programs every target compiles, and the check that runs one compiled function.

tests/test_compile_ops.py ("cpu") and tests/test_cuda_ops.py ("cuda") group these functions into
their own Modules, next to target-specific ones, and check each against the evaluator across
DimVar values.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import torch

from tilefoundry.check import allclose, check, equal
from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, f32, func, i32, i64, tf
from tilefoundry.ir.hir import Function
from tilefoundry.ir.target import get_target
from tilefoundry.runtime.loader import CompiledFunction, LinkedModule, load_linked_module

T = DimVar("T", 1, 33)


def pointwise(width: int, half_width: int) -> tuple[Function, Function, Function]:
    """`unary` and `binary` over f32 rows of `width`, `halves` over bf16 rows of `half_width`."""

    @func
    def unary(x: Tensor[(T, width), f32]):
        return (
            tf.exp(x),
            tf.exp2(x),
            tf.log(tf.abs(x) + 0.5),
            tf.log2(tf.abs(x) + 0.5),
            tf.sqrt(tf.abs(x)),
            tf.rsqrt(tf.abs(x) + 0.1),
            tf.tanh(x),
            tf.sigmoid(x),
            tf.silu(x),
            tf.gelu(x),
            tf.gelu(x, approximate="tanh"),
            tf.relu(x),
            tf.softplus(x * 8.0),
            -x,
            tf.abs(x),
        )

    @func
    def binary(a: Tensor[(T, width), f32], b: Tensor[(width,), f32]):
        return (
            a + b,
            a - b,
            a * b,
            a / (tf.abs(b) + 1.0),
            tf.maximum(a, b),
            tf.minimum(a, b),
            tf.pow(tf.abs(a) + 0.5, b),
            tf.where(a > b, a, b),
            tf.clamp(a, -0.5, 0.5),
            tf.cast(a < b, "f32") + tf.cast(a >= b, "f32") * 2.0,
            tf.cast(a, "bf16"),
            tf.cast(tf.cast(a * 100.0, "i32"), "f32"),
        )

    @func
    def halves(x: Tensor[(T, half_width), bf16], y: Tensor[(T, half_width), bf16]):
        return tf.silu(x) * y + x, tf.cast(tf.exp(tf.cast(x, "f32")), "bf16")

    return unary, binary, halves


@func
def logic(a: Tensor[(T, 20), i32], b: Tensor[(T, 20), i32]):
    return (a + b) * b - a, tf.maximum(a, b), (a > b) & (b > 0), tf.where(a == b, a, -b)


@func
def reduce(x: Tensor[(T, 6, 10), f32]):
    return (
        tf.sum(x, -1),
        tf.mean(x, (0, 2)),
        tf.max(x, 1, keepdim=True),
        tf.min(x, -1),
        tf.reduce(x, -1, False, "absmax"),
        tf.argmax(x, -1),
        tf.softmax(x, -1),
        tf.log_softmax(x, 1),
        tf.sum(x, 0),
    )


@func
def norms(x: Tensor[(T, 24), f32], w: ConstTensor[(24,), f32], b: ConstTensor[(24,), f32]):
    return tf.rms_norm(x, w), tf.layer_norm(x, w, b), tf.rms_norm(tf.cast(x, "bf16"), tf.cast(w, "bf16"))


@func
def matmuls(a: Tensor[(T, 12), f32], wm: ConstTensor[(12, 9), f32], bat: Tensor[(3, T, 12), f32]):
    return a @ wm, bat @ wm, tf.cast(tf.cast(a, "bf16") @ tf.cast(wm, "bf16"), "f32"), a[0] @ wm


@func
def shapes(x: Tensor[(T, 4, 6), f32], y: Tensor[(T, 4, 6), f32]):
    return (
        tf.reshape(x, (T, 24)),
        tf.transpose(x, (2, 0, 1)),
        x[:, 1:3, ::2],
        tf.concat((x, y), 1),
        tf.stack((x, y), 0),
        tf.repeat_interleave(x, 2, 1),
        tf.broadcast_to(x[:, :1, :], (T, 4, 6)),
        tf.full((T, 3), 1.5, "f32"),
        tf.arange(0, T, 1, "i64"),
        x,
    )


@func
def indexing(x: Tensor[(T, 8), f32], ids: Tensor[(5,), i64], gi: Tensor[(T, 3), i64]):
    return tf.index_select(x, 1, ids), tf.gather(x, 1, gi), tf.embedding(x, gi)


@func
def cache(cache: Tensor[(2, 16, 4), f32], pos: Tensor[(), i32], new: Tensor[(2, T, 4), f32]):
    return tf.cache_update(cache, pos, new, axis=1)


@func
def rope(
    x: Tensor[(2, 3, T, 8), f32],
    cos: Tensor[(40, 8), f32],
    sin: Tensor[(40, 8), f32],
    positions: Tensor[(T,), i64],
):
    return tf.rope(x, cos, sin, positions)


@func
def attend(
    q: Tensor[(2, 4, T, 8), f32],
    k: Tensor[(2, 2, T, 8), f32],
    v: Tensor[(2, 2, T, 8), f32],
    kv_len: Tensor[(2,), i32],
):
    return (
        tf.attention(q, k, v, causal=True),
        tf.attention(q, k, v, scale=0.3),
        tf.attention(q, k, v, causal=True, kv_len=kv_len),
    )


def inputs(fn: Function, n: int, gen: torch.Generator, device: str) -> tuple[torch.Tensor, ...]:
    """Seeded arguments for `fn` on `device`, every DimVar at `n`.

    Floats come from randn, integers from [-20, 20).
    """
    out = []
    for p in fn.params:
        shape = tuple(n if not isinstance(d, int) else d for d in p.type.shape)
        dt = p.type.dtype.torch
        if p.type.dtype.is_float:
            out.append(torch.randn(shape, generator=gen).to(dt).to(device))
        else:
            out.append(torch.randint(-20, 20, shape, generator=gen).to(dt).to(device))
    return tuple(out)


def expect(ref: torch.Tensor | tuple[torch.Tensor, ...], tolerance: Mapping[torch.dtype, float]) -> dict:
    """`check` rules for `ref`'s outputs: floats allclose at their dtype's `tolerance`, the rest equal.

    A float dtype `tolerance` lacks takes f32's.
    """
    outs = ref if isinstance(ref, tuple) else (ref,)
    names = ["output"] if not isinstance(ref, tuple) else [f"output[{i}]" for i in range(len(outs))]
    rules = {}
    for name, o in zip(names, outs, strict=True):
        if o.dtype.is_floating_point:
            tol = tolerance[o.dtype] if o.dtype in tolerance else tolerance[torch.float32]
            rules[name] = [allclose(atol=tol, rtol=tol)]
        else:
            rules[name] = [equal()]
    return rules


def check_compiled(
    linked: LinkedModule,
    fn: Function,
    sizes: tuple[int, ...],
    *,
    device: str,
    tolerance: Mapping[torch.dtype, float],
    make: Callable[[int, torch.Generator], tuple] | None = None,
) -> None:
    """Run `fn` compiled in `linked` at each DimVar value of `sizes` and `check` it against the evaluator."""
    body = CompiledFunction(load_linked_module(linked, fn.name), fn.returns_tuple)
    gen = torch.Generator().manual_seed(0)
    for n in sizes:
        args = make(n, gen) if make else inputs(fn, n, gen, device)
        ref = fn(*args)
        report = check(body, fn, args, expect=expect(ref, tolerance))
        assert report.passed, f"{fn.name} at T={n}:\n{report}"


def launched(body: Callable[..., object], *args: object) -> tuple[object, list[str]]:
    """What one call of `body` returns, and the names of the CUDA kernels and copies it ran."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = body(*args)
        torch.cuda.synchronize()
    cuda = torch.autograd.DeviceType.CUDA
    return out, [e.name for e in prof.events() if e.device_type == cuda]


def misaligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` whose data starts one element past a 16-byte boundary: a packed kernel's twin
    for unaligned tensors runs instead."""
    out = torch.empty(t.numel() + 16, dtype=t.dtype, device=t.device)[1 : 1 + t.numel()].view(t.shape)
    out.copy_(t)
    assert out.data_ptr() % 16 != 0
    return out


def exact_math(x: torch.Tensor, p: torch.Tensor, u: torch.Tensor) -> dict[str, torch.Tensor]:
    """The exact (f64) values the precision tests hold compiled f32 math to: exp and exp2 of `x`,
    log and log2 of `p`, tanh, sigmoid, softplus and gelu of `u`."""
    xd, pd, ud = x.double(), p.double(), u.double()
    F = torch.nn.functional
    return {
        "exp": xd.exp(),
        "exp2": torch.exp2(xd),
        "log": pd.log(),
        "log2": pd.log2(),
        "tanh": ud.tanh(),
        "sigmoid": torch.sigmoid(ud),
        "softplus": F.softplus(ud),
        "gelu": F.gelu(ud),
    }


def require_nvcc() -> None:
    """Skip the calling test or fixture when the cuda target cannot compile here, saying why."""
    if not get_target("cuda").availability.can_compile:
        pytest.skip("cuda cannot compile here: " + "; ".join(get_target("cuda").availability.reasons))


def require_cuobjdump() -> None:
    """Skip the calling test or fixture when no cuobjdump is found to read SASS with, naming where
    it was looked for."""
    from tilefoundry.codegen.cuda.sass import cuobjdump

    try:
        cuobjdump()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def cuda_source(fn: Function, options: Mapping[str, object]) -> str:
    """The CUDA translation unit codegen-cuda writes for `fn` alone under `options` (not built)."""
    from tilefoundry.codegen.cuda import emit as cuda_emit
    from tilefoundry.ir.pipeline import schedule_module

    catalog = get_target("cuda").catalog_for(options)
    scheduled = schedule_module(fn.name, {fn.name: fn}, catalog, options)
    return cuda_emit.codegen(scheduled, options).files[f"{fn.name}.cu"]


def cuda_ptx(fn: Function, options: Mapping[str, object], tmp_path: Path) -> str:
    """The PTX of `fn`'s translation unit compiled with the build's own flags, for one virtual arch."""
    from tilefoundry.codegen.cuda.build import compile_flags

    flags = list(compile_flags("sm_90a", options))
    at = flags.index("-gencode")
    del flags[at : at + 2]
    ptx = tmp_path / f"{fn.name}.ptx"
    nvcc_compile(cuda_source(fn, options), ptx, *flags, "-arch=compute_90a", "-ptx")
    return ptx.read_text()


def nvcc_compile(text: str, out: Path, *flags: str) -> None:
    """Compiles C++ `text` against the runtime and CUTLASS headers into `out` with nvcc (`flags`
    choose the code and the output: `-ptx`, `-c`), asserting it builds."""
    from tilefoundry.codegen.cuda.build import nvcc
    from tilefoundry.runtime.headers import cutlass_include_dir, runtime_include_dir

    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cu")
    src.write_text(text)
    headers = ["-I", str(runtime_include_dir()), "-isystem", str(cutlass_include_dir())]
    cmd = [nvcc(), "-std=c++17", "--expt-relaxed-constexpr", "-DNDEBUG", *flags, *headers, str(src)]
    done = subprocess.run([*cmd, "-o", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
