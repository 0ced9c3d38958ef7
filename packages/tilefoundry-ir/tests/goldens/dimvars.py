"""Golden program: dynamic dimensions — DimVars, arithmetic over them, slices and reshapes."""

import torch

from tilefoundry.dsl import DimVar, Tensor, f32, func, i64, tf

T = DimVar("tokens", 1, 1025)
H = DimVar("heads", 1, 9)


@func
def halves(x: Tensor[(2 * T, H, 8), f32], pos: Tensor[(T,), i64]):
    first, second = x[:T], x[T:]
    mixed = tf.concat((second, first), axis=0)  # (2*T, H, 8)
    flat = mixed.reshape(2 * T, H * 8)
    shifted = tf.cast(pos, "f32").reshape(T, 1) + tf.cast(tf.arange(T), "f32").reshape(T, 1)
    return flat, tf.sum(first, axis=(1, 2)).reshape(T, 1) * shifted


PROGRAM = run = halves


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    return torch.randn(10, 3, 8, generator=g), torch.arange(4, 9)


def reference(x, pos):
    t = pos.shape[0]
    first, second = x[:t], x[t:]
    flat = torch.cat((second, first)).reshape(2 * t, -1)
    shifted = (pos.float() + torch.arange(t).float()).reshape(t, 1)
    return flat, first.sum(dim=(1, 2)).reshape(t, 1) * shifted
