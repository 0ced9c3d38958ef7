"""Golden program: explicit placement — sharded annotations, `with Mesh(...)` scopes, layout sugar."""

import torch

from tilefoundry.dsl import Broadcast, ConstTensor, Mesh, Split, Tensor, Topology, f32, func, tf

CTA, THREAD = Topology("cta", 4), Topology("thread", 32)
ctas = Mesh((CTA,), (4,))
grid = Mesh((CTA, THREAD), (4, 32))


@func(topologies=(CTA, THREAD))
def sharded(x: Tensor[(128, 64), f32, ctas[Split(0)]], w: ConstTensor[(64, 64), f32, ctas[Broadcast]]):
    with ctas:
        # Each CTA multiplies its own 32 rows by the whole (replicated) w.
        mine = tf.local(x) @ tf.local(w)
    with grid:
        z = tf.reshard(x @ w, layout=grid[Split(0), Split(1)], storage="gmem")
        out = tf.relu(z)
    return mine, out


PROGRAM = run = sharded


def inputs(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    return torch.randn(128, 64, generator=g), torch.randn(64, 64, generator=g) / 8


def reference(x, w):
    # The evaluator holds values whole; `local` is the block of instance 0 (every program id 0).
    return x[:32] @ w, torch.relu(x @ w)
