"""Golden program: RMSNorm in bf16, computed in f32 (DESIGN.md §3's first example)."""

import torch

from tilefoundry.dsl import ConstTensor, DimVar, Tensor, bf16, func, tf

T = DimVar("tokens", 1, 8193)


@func
def rms_norm(x: Tensor[(T, 256), bf16], g: ConstTensor[(256,), bf16]) -> Tensor[(T, 256), bf16]:
    x32 = tf.cast(x, "f32")
    var = tf.mean(x32 * x32, axis=-1, keepdim=True)
    return tf.cast(x32 * tf.rsqrt(var + 1e-6), "bf16") * g


PROGRAM = run = rms_norm


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    x = torch.randn(5, 256, generator=g).bfloat16()
    return x, (1 + 0.1 * torch.randn(256, generator=g)).bfloat16()


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)).bfloat16() * w
